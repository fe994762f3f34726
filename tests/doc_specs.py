"""What the CLI and the Makefile define, for the docs' command check (tests/doc_commands.py):
each command's flags from its own --helpxml (absl's included), its sub-commands from the
constant its main() checks, setup.py's console scripts, and the Makefile's targets and variables.

Pure Python and no TensorFlow: the flags come from each command's `--helpxml` in a subprocess.
"""

import ast
import collections
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

# The sub-commands of a command: (the module that defines them, the constant main() checks).
SUBCOMMANDS = {'trainer.prepare': ('trainer/prepare/__main__.py', 'SOURCES'),
               'trainer.benchmark': ('trainer/benchmark/__main__.py', 'SUBCOMMANDS')}
# Flags absl handles before any flag is defined; --helpxml does not list them.
ABSL_SPECIAL_FLAGS = ('flagfile', 'undefok')

CliSpec = collections.namedtuple('CliSpec', 'flags subcommands')  # flags: name -> is boolean
MakefileSpec = collections.namedtuple('MakefileSpec', 'targets target_patterns variables')


def read_cli_spec(repo, module, python=None, timeout=300):
  """CliSpec of `python -m module` run in `repo`: its flags from its own --helpxml (absl's
  included), its sub-commands from the constant its main() checks."""
  proc = subprocess.run([python or sys.executable, '-m', module, '--helpxml'], cwd=repo,
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
  try:
    root = ET.fromstring(proc.stdout)
  except ET.ParseError:
    raise RuntimeError('python -m %s --helpxml exited %d without its XML:\n%s' % (
        module, proc.returncode, proc.stderr.decode('utf-8', 'replace')[-3000:]))
  flags = dict((name, False) for name in ABSL_SPECIAL_FLAGS)
  for flag in root.iter('flag'):
    boolean = flag.findtext('type') == 'bool'
    flags[flag.findtext('name')] = boolean
    if flag.findtext('short_name'):
      flags[flag.findtext('short_name')] = boolean
  subcommands = None
  if module in SUBCOMMANDS:
    path, constant = SUBCOMMANDS[module]
    subcommands = tuple(module_constant(os.path.join(repo, path), constant))
  return CliSpec(flags, subcommands)


class CliSpecs(object):
  """Module -> CliSpec for the commands of `console_scripts`, each read once, when first used."""

  def __init__(self, repo, console_scripts, python=None, python_of=None):
    """python: the interpreter that runs the commands; python_of: module -> another one (the
    Keras runtime's commands do not import under TF 2.15)."""
    self._repo = repo
    self._python = python
    self._python_of = python_of or {}
    self._modules = sorted(set(console_scripts.values()))
    self._specs = {}

  def __contains__(self, module):
    return module in self._modules

  def __iter__(self):
    return iter(self._modules)

  def __getitem__(self, module):
    if module not in self._modules:
      raise KeyError(module)
    if module not in self._specs:
      self._specs[module] = read_cli_spec(self._repo, module,
                                          self._python_of.get(module, self._python))
    return self._specs[module]


def module_constant(path, name):
  """The literal value of module-level `name = ...` in the Python file `path`."""
  with open(path, encoding='utf-8') as f:
    tree = ast.parse(f.read(), path)
  for node in tree.body:
    if (isinstance(node, ast.Assign) and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name) and node.targets[0].id == name):
      return ast.literal_eval(node.value)
  raise LookupError('%s assigns no %s' % (path, name))


def console_scripts(setup_py):
  """Script name -> module (`python -m` name) of setup.py's console_scripts."""
  with open(setup_py, encoding='utf-8') as f:
    text = f.read()
  scripts = {}
  for script, module in re.findall(r"'([\w.-]+)\s*=\s*([\w.]+):\w+'", text):
    scripts[script] = re.sub(r'\.__main__$', '', module)
  return scripts


def read_makefile(path):
  """MakefileSpec of the Makefile at `path`: its rule targets (literal, and as regexps those with
  % or $(...)), and the variables it assigns or references."""
  with open(path, encoding='utf-8') as f:
    text = f.read().replace('\\\n', ' ')
  variables = set(re.findall(r'\$[({]([A-Za-z_][A-Za-z0-9_]*)[:)}]', text))
  targets = set()
  patterns = []
  assignment = re.compile(r'^\s*(?:(?:override|export)\s+)*([A-Za-z_][A-Za-z0-9_]*)\s*'
                          r'(?:\?|::?|\+|!)?=')
  in_define = False
  for line in text.split('\n'):
    if line.startswith('\t') or not line.strip() or line.lstrip().startswith('#'):
      continue
    word = line.split()[0]
    if in_define:
      in_define = word != 'endef'
      continue
    if word == 'define':
      in_define = True
      variables.add(line.split()[1])
      continue
    if word in ('ifeq', 'ifneq', 'ifdef', 'ifndef', 'else', 'endif', 'include', '-include',
                'sinclude', 'vpath', 'unexport'):
      continue
    match = assignment.match(line)
    if match:
      variables.add(match.group(1))
      continue
    rule = re.match(r'^([^:#=]+?)\s*::?(?!=)(.*)$', line)
    if not rule:
      continue
    for target in rule.group(1).split():
      if '%' in target or '$' in target:
        regex = ''.join('.+' if part in ('%',) or part.startswith('$') else re.escape(part)
                        for part in re.split(r'(%|\$[({][^)}]*[)}])', target) if part)
        patterns.append(re.compile('^%s$' % regex))
      else:
        targets.add(target)
    specific = assignment.match(rule.group(2))  # target: VAR := value
    if specific:
      variables.add(specific.group(1))
  return MakefileSpec(targets, patterns, variables)
