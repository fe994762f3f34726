"""The user's own Python package that `trainer.submit --build_image --user_package=PATH` installs
into the image it builds: what PATH is (a source directory, a wheel or a source distribution), the
Docker build context and the path pip installs inside it, and whether it holds the modules that
the trainer's --network, --model_fn and --input_fn name (docs/your-model.md, "Into the cloud").

The image is derived from the trainer's own (trainer/cloud/user_package.Dockerfile); everything
here runs on the submitting machine, before anything is built.
"""

import os
import tarfile
import zipfile

from trainer.errors import PipelineError

# The trainer flags that name the user's code as MODULE:CALLABLE (models/user_code.py loads them).
USER_CODE_FLAGS = ('network', 'model_fn', 'input_fn')
# The top-level packages the trainer's image holds: setup.py's `packages` (tests/test_vertex_submit.py
# keeps the two equal).
IMAGE_PACKAGES = ('trainer',)  # setup.py: its networks and flags are trainer.models, ...
SOURCE_MARKERS = ('setup.py', 'pyproject.toml')
ARCHIVES = ('.whl', '.tar.gz', '.zip')


def named_modules(trainer_args):
  """The top-level modules the trainer's flags name as user code.

  Args:
    trainer_args: the flags after `--` (list of str), `--flag=value` or `--flag value`.

  Returns:
    list of (flag, spec, top-level module name), in the order given; a value without ':' (not a
    MODULE:CALLABLE spec: the trainer refuses it) is left out.
  """
  found = []
  args = list(trainer_args)
  for i, arg in enumerate(args):
    for flag in USER_CODE_FLAGS:
      if arg.startswith('--%s=' % flag):
        spec = arg.split('=', 1)[1]
      elif arg == '--' + flag and i + 1 < len(args):
        spec = args[i + 1]
      else:
        continue
      if ':' in spec:
        found.append((flag, spec, spec.split(':', 1)[0].split('.', 1)[0]))
  return found


def build_context(path):
  """The Docker build context of --user_package=path and the package's path inside it.

  Returns:
    (context, package): absolute directory and a path relative to it ('.' for a source directory,
    the file name for a wheel or source distribution).

  Raises:
    PipelineError: path is missing, or neither a directory with setup.py or pyproject.toml nor a
      .whl, .tar.gz or .zip file.
  """
  path = os.path.abspath(os.path.expanduser(path))
  if os.path.isdir(path):
    if not any(os.path.isfile(os.path.join(path, m)) for m in SOURCE_MARKERS):
      raise PipelineError('--user_package=%s is a directory without setup.py or pyproject.toml: '
                          'give the root of your package (what `pip install DIR` takes), or a '
                          'wheel.' % path)
    return path, '.'
  if os.path.isfile(path) and path.endswith(ARCHIVES):
    return os.path.dirname(path), os.path.basename(path)
  if not os.path.exists(path):
    raise PipelineError('--user_package=%s does not exist: give the directory of your package '
                        '(with setup.py or pyproject.toml) or a wheel.' % path)
  raise PipelineError('--user_package=%s is not a package: give a directory with setup.py or '
                      'pyproject.toml, or a .whl, .tar.gz or .zip file.' % path)


def _names(path):
  """The top-level module names `path` holds: a directory's (at its top and under src/), a
  wheel's, or a source distribution's (under its one top folder, and its src/)."""
  if os.path.isdir(path):
    # What setuptools would install from a source tree: packages (with __init__.py) and modules.
    entries = [name for root in (path, os.path.join(path, 'src')) if os.path.isdir(root)
               for name in os.listdir(root)
               if os.path.isfile(os.path.join(root, name, '__init__.py')) or (
                   name.endswith('.py') and name != 'setup.py')]
  elif path.endswith(('.whl', '.zip')):
    with zipfile.ZipFile(path) as archive:
      entries = archive.namelist()
  else:
    with tarfile.open(path) as archive:
      entries = archive.getnames()
  if not os.path.isdir(path) and not path.endswith('.whl'):
    # An sdist's members sit under NAME-VERSION/ (and maybe NAME-VERSION/src/).
    entries = [e.split('/', 1)[1] for e in entries if '/' in e]
    entries += [e.split('/', 1)[1] for e in entries if e.startswith('src/')]
  names = set()
  for entry in entries:
    top = entry.split('/', 1)[0]
    names.add(top[:-3] if top.endswith('.py') else top)
  return names


def check(user_package, trainer_args):
  """Checks --user_package against the trainer's flags before anything is built.

  Args:
    user_package: --user_package (str) or None.
    trainer_args: the flags after `--`.

  Returns:
    list of warnings (str): a named module not found where the common layouts put it (setup.py
    can map a package anywhere, so this is not refused).

  Raises:
    PipelineError: a bad --user_package (build_context); a package with a top-level name the
      image already installs (IMAGE_PACKAGES: pip would write the user's files over the
      trainer's); or a flag that names a module of the user's when no --user_package is given:
      the built image would hold only this project's packages and the job would fail at start in
      the cloud.
  """
  named = [n for n in named_modules(trainer_args) if n[2] not in IMAGE_PACKAGES]
  if user_package is None:
    if named:
      flag, spec, module = named[0]
      raise PipelineError('--%s=%s: the image --build_image builds holds only this project\'s '
                          'packages, not %s: add --user_package=DIR (your package\'s root, with '
                          'setup.py or pyproject.toml) to install it into the image '
                          '(docs/your-model.md).' % (flag, spec, module))
    return []
  context, package = build_context(user_package)
  held = _names(os.path.join(context, package))
  clash = sorted(held & set(IMAGE_PACKAGES))
  if clash:
    raise PipelineError('--user_package=%s installs a top-level %s, a name the trainer\'s image '
                        'already installs (%s): pip would write your files over the trainer\'s. '
                        'Rename your top-level package (e.g. acme_%s) and the --network, '
                        '--model_fn or --input_fn that name it.'
                        % (user_package, clash[0], ', '.join(IMAGE_PACKAGES), clash[0]))
  return ['--%s=%s: --user_package=%s shows no module %s (looked for %s/ and %s.py at its top '
          'and under src/); the job fails at start if the installed package lacks it.'
          % (flag, spec, user_package, module, module, module)
          for flag, spec, module in named if module not in held]
