"""The package's rooms (BUILD.md, "Layout"), read from the source: each module at most 400 lines;
`trainer/prepare` and `trainer/cli` import nothing of `flags/` or `trainer/run/`; model code never
reads flags. Static (the source is parsed, nothing imported): once, on the TF 2.15 runtime."""

import ast
import os

import pytest
import tensorflow.compat.v1 as tf

from helpers import REPO

PACKAGES = ('trainer', 'flags', 'models', 'keras_models')
MAX_LINES = 400

pytestmark = pytest.mark.skipif(not tf.__version__.startswith('2.'),
                                reason='runtime-independent; run on TF 2.15')


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
    ('trainer/prepare', ('flags', 'trainer.run')),
    ('trainer/cli', ('flags', 'trainer.run')),
    ('models', ('flags', 'absl.flags', 'trainer.run')),
])
def test_a_room_imports_nothing_above_it(room, forbidden):
  found = {path: name for path in _modules(room) for name in _imports(path)
           if any(name == f or name.startswith(f + '.') for f in forbidden)}
  assert not found, found
