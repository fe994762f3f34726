"""The package's rooms (BUILD.md, "Layout"), read from the source: each module at most 400 lines;
`trainer/prepare` and `trainer/cli` import nothing of `flags/` or `trainer/run/`; model code never
reads flags; every import between rooms points down their layers (LAYERS). Static (the source is
parsed, nothing imported): once, on the TF 2.15 runtime."""

import ast
import collections
import os
import re

import pytest

from helpers import REPO


def _setup_constant(name):
  """A literal assigned at the top of setup.py (read, not run: setup.py calls setup())."""
  with open(os.path.join(REPO, 'setup.py')) as f:
    tree = ast.parse(f.read())
  (value,) = [node.value for node in tree.body if isinstance(node, ast.Assign)
              and [t.id for t in node.targets if isinstance(t, ast.Name)] == [name]]
  return ast.literal_eval(value)


# Folders beside trainer/ that install as its subpackages (setup.py, trainer/__init__.py).
BESIDE_TRAINER = _setup_constant('BESIDE_TRAINER')
PACKAGES = ('trainer',) + BESIDE_TRAINER
MAX_LINES = 400

pytestmark = pytest.mark.one_runtime('the code layout')


def _modules(*folders):
  for folder in folders:
    for root, _, names in os.walk(os.path.join(REPO, folder)):
      for name in sorted(names):
        if name.endswith('.py'):
          yield os.path.relpath(os.path.join(root, name), REPO)


def _imports(path):
  """Every module `path` imports, at any depth of its code ('a.b' for `from a import b`)."""
  with open(os.path.join(REPO, path)) as f:
    tree = ast.parse(f.read(), path)
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for alias in node.names:
        yield alias.name
    elif isinstance(node, ast.ImportFrom) and node.module:
      for alias in node.names:
        yield '%s.%s' % (node.module, alias.name)


def test_no_module_is_over_400_lines():
  long = {}
  for path in _modules(*PACKAGES):
    with open(os.path.join(REPO, path)) as f:
      lines = sum(1 for _ in f)
    if lines > MAX_LINES:
      long[path] = lines
  assert not long, long


@pytest.mark.parametrize('room, forbidden', [
    ('trainer/prepare', ('trainer.flags', 'trainer.run')),
    ('trainer/cli', ('trainer.flags', 'trainer.run')),
    ('models', ('trainer.flags', 'absl.flags', 'trainer.run')),
])
def test_a_room_imports_nothing_above_it(room, forbidden):
  found = {path: name for path in _modules(room) for name in _imports(path)
           if any(name == f or name.startswith(f + '.') for f in forbidden)}
  assert not found, found


# What reads storage or a cloud service: flags/ imports none of it (trainer.run's config_sources
# and recorded_network read for it).
_STORAGE_READERS = (
    'trainer.storage.outputs', 'trainer.storage.json_files', 'trainer.storage.gfile',
    'trainer.storage.staged', 'trainer.storage.lease', 'trainer.storage.lease_stores',
    'trainer.cloud.gcs_preflight', 'trainer.run.network_record', 'trainer.data.arrays',
    'trainer.data.dataset_json.read')
_STORAGE_CALLS = re.compile(
    r'\bgfile\b|\bopen\(|\bdataset_json\.read\b|\bjson\.load\(|\bfiles_matching\b|'
    r'\bos\.(listdir|stat|walk|scandir)\b|\bos\.path\.(exists|is\w+|getsize)\b')


def test_flags_read_no_storage():
  """Turning flags into a Config reads dataset.json, the run's record and the gs:// preflight
  through trainer.run (config_sources, recorded_network): flags/ itself holds no I/O."""
  found = {}
  for path in _modules('flags'):
    with open(os.path.join(REPO, path)) as f:
      source = f.read()
    names = [n for n in _imports(path)
             if any(n == m or n.startswith(m + '.') for m in _STORAGE_READERS)]
    calls = sorted({m.group(0) for m in _STORAGE_CALLS.finditer(source)})
    if names or calls:
      found[path] = names + calls
  assert not found, found


def _room(module):
  """The room of a module: a package under trainer/ (trainer.run, trainer.models),
  trainer.models.specs, or, for a module of trainer/ itself (trainer.main, the entry points,
  trainer.errors) and a package's __main__ (an entry point), the module alone."""
  parts = module.split('.')
  if parts[-1] == '__main__' or len(parts) == 2:
    return module
  if parts[:3] == ['trainer', 'models', 'specs']:
    return 'trainer.models.specs'
  return '.'.join(parts[:2])


def _module_of(path):
  """The module name of a source file: 'models/resnet.py' -> 'trainer.models.resnet'."""
  module = path[:-3].replace(os.sep, '.')
  module = module[:-len('.__init__')] if module.endswith('.__init__') else module
  return 'trainer.' + module if module.split('.')[0] in BESIDE_TRAINER else module


def _project_module(name):
  """The project's module `name` imports ('a.b.c' from `from a.b import c`), or None."""
  parts = name.split('.')
  while parts[:1] == ['trainer']:
    folders = parts[1:] if parts[1:2] and parts[1] in BESIDE_TRAINER else parts
    path = os.path.join(REPO, *folders)
    if os.path.isfile(path + '.py') or os.path.isdir(path):
      return '.'.join(parts)
    parts = parts[:-1]
  return None


# The rooms' layers, top first: a room imports only rooms of the layers below its own (none of its
# own layer), so the package graph has no upward arrow and hence no loop. BUILD.md ("Layers")
# prints this order; a new room is placed here before its first import counts.
LAYERS = (
    ('commands and start-up', ('trainer', 'trainer.main', 'trainer.submit', 'trainer.export_keras',
                      'trainer.train_keras', 'trainer.train_torch', 'trainer.prepare.__main__',
                      'trainer.benchmark.__main__', 'trainer.advise.__main__')),
    ('flags into configs', ('trainer.flags',)),
    ('advice', ('trainer.advise',)),
    ('measurement', ('trainer.benchmark',)),
    ('the runs', ('trainer.run', 'trainer.keras_run', 'trainer.torch_run', 'trainer.prepare')),
    ('Keras and PyTorch twins', ('trainer.keras_models', 'trainer.torch_models')),
    ('input', ('trainer.data',)),
    ('networks, cloud, host', ('trainer.models', 'trainer.cloud', 'trainer.host')),
    ('foundations', ('trainer.models.specs', 'trainer.storage', 'trainer.tpu')),
    ('shared by all', ('trainer.cli',)),
    ('the error types', ('trainer.errors',)),
)


def _room_edges():
  """{room: {room it imports: one module of the first that does}}, across rooms only."""
  edges = collections.defaultdict(dict)
  for path in _modules(*PACKAGES):
    module = _module_of(path)
    for name in _imports(path):
      target = _project_module(name)
      if target and _room(target) != _room(module):
        edges[_room(module)].setdefault(_room(target), path)
  return edges


def test_every_import_points_down_the_layers():
  """No upward or sideways arrow in the room graph (a run -> advise -> benchmark -> run loop once
  made each of them need the others); every room has its layer."""
  layer = {room: depth for depth, (_, rooms) in enumerate(LAYERS) for room in rooms}
  edges = _room_edges()
  rooms = {_room(_module_of(path)) for path in _modules(*PACKAGES)}
  assert not rooms - set(layer), 'rooms without a layer in LAYERS: %s' % sorted(rooms - set(layer))
  not_down = sorted('%s -> %s (%s)' % (a, b, path) for a in edges for b, path in edges[a].items()
                    if layer[b] <= layer[a])
  assert not not_down, not_down


def test_build_md_names_the_layers_in_order():
  with open(os.path.join(REPO, 'BUILD.md')) as f:
    text = ' '.join(f.read().split())
  order = ' > '.join('%s (%s)' % (name, ', '.join('`%s`' % room for room in rooms))
                     for name, rooms in LAYERS)
  assert order in text, 'BUILD.md should list the layers as: ' + order
