"""User paths are data, never patterns.

`tf.io.gfile.glob` reads `*`, `?` and `[...]` anywhere in its argument, so a model_dir named
`exp[12]` would also match a sibling `exp1`. Every glob this pipeline builds from a user's path
goes through `files_matching` (the pipeline's own file-name pattern, matched against a listing of
the user's directory) or escapes the user's part with `glob_escape`.
"""

import fnmatch
import re

import tensorflow.compat.v1 as tf

from trainer.errors import PipelineError

# The characters TensorFlow's glob (fnmatch(3) on each path component, local and gs://) treats
# as special. Each is matched literally inside a one-character bracket expression.
_GLOB_SPECIAL = re.compile(r'([*?\[])')


def glob_escape(path):
  """`path` with every glob character made literal ('exp[12]' -> 'exp[[]12]'), so that
  `tf.io.gfile.glob(glob_escape(user_path) + '/train-*')` matches only inside `user_path`.

  Args:
    path: str, a local or gs:// path.

  Returns:
    str, the escaped path (the `gs://` scheme is left as it is).
  """
  return _GLOB_SPECIAL.sub(r'[\1]', path)


def files_matching(directory, name_pattern):
  """The files directly in `directory` whose names match `name_pattern` (fnmatch, case
  sensitive), sorted; [] when `directory` does not exist.

  Only the name pattern, which the pipeline owns ('train-*', 'model.ckpt-100.*'), is a pattern:
  `directory` is listed as it is written, whatever characters it holds.

  Args:
    directory: str, a local or gs:// directory.
    name_pattern: str, a file-name pattern without '/'.

  Returns:
    list of str paths `directory/name`.
  """
  if '/' in name_pattern:
    raise ValueError('name_pattern must be a file name pattern, got %r' % name_pattern)
  if not tf.io.gfile.isdir(directory):
    return []
  names = (name.rstrip('/') for name in tf.io.gfile.listdir(directory))
  return sorted('%s/%s' % (directory.rstrip('/'), name) for name in names
                if fnmatch.fnmatchcase(name, name_pattern))


def split_prefix(prefix):
  """(directory, name) of a path such as a checkpoint prefix '/runs/exp[1]/model.ckpt-100'."""
  directory, _, name = prefix.rstrip('/').rpartition('/')
  return directory or '.', name


_GLOB_CHARACTERS = '*?['


def check_checkpoint_path(path, flag):
  """Refuses a checkpoint directory or prefix holding `*`, `?` or `[`.

  TensorFlow's own checkpoint code (TF 1.15 and 2.15) globs these paths without escaping them:
  `tf.train.latest_checkpoint` and `Saver.restore` look for `<prefix>.index` with
  `get_matching_files`, and the Saver deletes old checkpoints by the pattern
  `<prefix>.data-?????-of-?????`. With model_dir `runs/exp[12]` it finds no checkpoint of its
  own (a resumed run silently starts over) and deletes `runs/exp1`'s files (seen on both
  runtimes). No escaping on this side can reach into TensorFlow, so such paths are refused.
  Spaces, `]` and non-ASCII letters are fine.

  Args:
    path: str or None (nothing to check), local or gs://.
    flag: str, the flag or variable that named it.

  Raises:
    PipelineError: the path holds a glob character.
  """
  if not path:
    return
  found = sorted({c for c in path if c in _GLOB_CHARACTERS})
  if found:
    raise PipelineError(
        '%s=%s holds %s: TensorFlow\'s checkpoint code reads these as wildcards (it would find '
        'or delete the checkpoints of other directories that match, and miss its own). Choose a '
        'path without * ? [ (spaces and non-ASCII letters are fine).'
        % (flag, path, ' '.join(repr(c) for c in found)))
