"""Write aside, then rename into place: how every writer of the pipeline writes a file (run
outputs and results, Keras checkpoints and models, TFRecord shards, the vocabulary, the arrays,
the writer's lease), so that a writer killed at any moment never leaves half a file under the
final name, and one cleaner of what such a writer left.

The file NAME in DIR is written as DIR/.partial-HEX.NAME (`aside_name`): hidden, so no reader's
pattern (train-*, ckpt-*, events.*) takes it, and ending in NAME, so writers that read the
extension take it (Keras: `.keras`, `.weights.h5`). Earlier versions wrote NAME.partial-HEX[.EXT],
for shards .NAME.tmp-HEX32, for a lease taken over NAME.stale-HEX: `final_name` reads those too,
so `remove_leftovers` removes them (not the Keras trainer's checkpoints/tmp-HEX.* of versions
before 2026-11-29: delete those by hand).

A writer that holds a directory's lease has every rename into that directory checked first
(`commits_checked`): one that lost its lease makes nothing more visible there.
"""

import contextlib
import os
import re
import time
import uuid

from absl import logging

from trainer.storage import gfile

_ASIDE = re.compile(r'^\.partial-[0-9a-f]{12}\.(.+)$')
# Earlier versions' names: NAME.partial-HEX[.EXT] (groups: NAME, .EXT), shards' .NAME.tmp-<32 hex>,
# a lease moved aside by a taker, NAME.stale-HEX.
_EARLIER = (re.compile(r'^(.+)\.partial-[0-9a-f]{12}(\.\w+)?$'),
            re.compile(r'^\.(.+)\.tmp-[0-9a-f]{32}()$'),
            re.compile(r'^(.+)\.stale-[0-9a-f]{12}()$'))
# directory (with a trailing '/') -> check(path), called before a staged write of this process is
# renamed onto `path` in that directory or below (`commits_checked`).
_COMMIT_CHECKS = {}


def aside_name(path):
  """The hidden sibling `path` is written under: DIR/.partial-HEX.NAME (str)."""
  directory, name = os.path.split(path)
  aside = '.partial-%s.%s' % (uuid.uuid4().hex[:12], name)
  return '%s/%s' % (directory.rstrip('/'), aside) if directory else aside


def final_name(name):
  """The name a file written aside was to get (str), or None when `name` is not one (this
  version's or an earlier version's scheme)."""
  match = _ASIDE.match(name)
  if match:
    return match.group(1)
  for pattern in _EARLIER:
    match = pattern.match(name)
    if match:
      return match.group(1) + (match.group(2) or '')
  return None


@contextlib.contextmanager
def staged_file(path, mode='w'):
  """Opens `aside_name(path)` for writing and renames it onto `path` when the block ends without
  an error (removing it otherwise), so `path` is never half written.

  Yields:
    a gfile.GFile open in `mode` ('w' or 'wb').
  """
  with staged_path(path) as temporary:
    with gfile.GFile(temporary, mode) as f:
      yield f


@contextlib.contextmanager
def staged_path(path):
  """`staged_file` for a writer that takes a path (Keras' save_weights and model.save, a
  TFRecordWriter): yields `aside_name(path)`, renamed onto `path` when the block ends without an
  error (removed otherwise).

  Yields:
    str, the temporary path to write.
  """
  temporary = aside_name(path)
  try:
    yield temporary
    _check_commit(path)
    gfile.rename(temporary, path, overwrite=True)
  finally:
    if gfile.exists(temporary):
      gfile.remove(temporary)


def discard(path):
  """Removes `path`, a staged file or folder its writer gave up (local or gs://), if it is there.
  A storage error is logged, not raised: what made the writer give up, or the write that landed,
  is what its caller reports."""
  try:
    if gfile.isdir(path):
      gfile.rmtree(path)
    elif gfile.exists(path):
      gfile.remove(path)
  except (gfile.OpError, OSError) as e:
    logging.warning('Could not remove the staged %s (%s); a later run of this command removes '
                    'it.', path, str(e).strip().split('\n')[0])


@contextlib.contextmanager
def commits_checked(directory, check):
  """Within the block, every staged write of this process into `directory` (or below) calls
  `check(final path)` just before its rename; an exception it raises (a lost lease's
  LeaseLost) leaves the file unwritten and goes to the writer. For a command whose writes go
  through several modules (trainer.prepare's converters): the lease is checked at the moment a
  write would become visible, by the one function that makes it so."""
  key = directory.rstrip('/') + '/'
  _COMMIT_CHECKS[key] = check
  try:
    yield
  finally:
    _COMMIT_CHECKS.pop(key, None)


def _check_commit(path):
  for directory, check in list(_COMMIT_CHECKS.items()):
    if path.startswith(directory):
      check(path)


def remove_leftovers(directory, of=None, but=(), older_than_secs=0):
  """Deletes the files a killed writer left aside in `directory` (local or gs://), which no
  reader takes for outputs. For the one writer of the directory (the holder of its writer lease,
  `trainer.storage.lease`), so that no live writer's file is removed.

  Args:
    directory: str; a missing directory has none.
    of: only the files written aside for final names that start with this (str), or None: all.
    but: final-name prefixes whose files are left (tuple of str): another writer's, which clears
      its own.
    older_than_secs: only files written longer ago than this (a live writer keeps its file for
      less).

  Returns:
    the names removed (list of str).
  """
  if not gfile.isdir(directory):
    return []
  left = []
  for name in sorted(gfile.listdir(directory)):
    final = final_name(name.rstrip('/'))
    if final is None or (of and not final.startswith(of)) or final.startswith(tuple(but)):
      continue
    path = '%s/%s' % (directory.rstrip('/'), name)
    try:
      if gfile.isdir(path):  # a staged folder (model_serving/): a live writer's is not this old
        if older_than_secs:
          continue
        gfile.rmtree(path)
        left.append(name)
        continue
      if older_than_secs and time.time() - gfile.mtime(path) <= older_than_secs:
        continue
      gfile.remove(path)
    except (gfile.OpError, OSError):  # removed meanwhile by another cleaner
      continue
    left.append(name)
  if left:
    logging.info('Removed %d files a killed writer left aside in %s: %s', len(left), directory,
                 ', '.join(left))
  return left
