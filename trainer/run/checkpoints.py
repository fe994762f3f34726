"""Checkpoint integrity: before a run reads model_dir's newest checkpoint (to resume training, to
evaluate or to export), check that it is whole, and fall back to the newest one that is.

A job killed while writing a checkpoint, or an object store that lost a write, can leave the
newest checkpoint with a truncated or missing data file beside intact older ones; TensorFlow
would stop the run on it with a raw `OutOfRangeError`/`DataLossError`. Here a damaged checkpoint's
files are moved aside into `<model_dir>/damaged/` (never deleted), the `checkpoint` state file
is rewritten to name the newest intact one (so TensorFlow's own lookups agree), and the run goes
on from it with a warning naming both.

What "intact" means (`checkpoint_damage`): the index reads; every data shard it names exists;
the data files hold exactly the bytes the index's tensors need (numeric tensors are stored
unpadded); and, for checkpoints up to `FULL_READ_BYTES`, every tensor reads back with its
checksum. A larger checkpoint is checked by size only: a truncated or missing file is caught, a
flipped bit in a file of the right size is not. A remote (gs://) checkpoint's files are read whole
into a temporary local copy (at most FULL_READ_BYTES in TMPDIR) and its tensors checked there.
"""

import os
import re
import tempfile

from absl import logging
from google.protobuf import text_format
import numpy as np
import tensorflow.compat.v1 as tf

from trainer.errors import PipelineError
from trainer.storage import patterns
from trainer.storage import state_fence

DAMAGED_DIR = 'damaged'
FULL_READ_BYTES = 512 * 2**20
_SHARD = re.compile(r'\.data-(\d{5})-of-(\d{5})$')
# The folder a sharded Saver.save writes its files into before merging them into the checkpoint's
# and deleting it: PREFIX_temp_<uuid hex> on TF 1.15, PREFIX_temp on TF 2.x (saver.py,
# _AddShardedSaveOpsForV2). A save killed before its merge leaves it, and no later save removes it.
# A checkpoint file named by its run on gs:// (trainer/run/fenced_saver.py): group 1 the prefix.
_RUN_NAMED = re.compile(r'^(model\.ckpt-%s-\d+)\.(index|meta|data-\d{5}-of-\d{5})$'
                        % state_fence.RUN_NAME_PATTERN)
_UNFINISHED_SAVE = re.compile(r'^model\.ckpt-[\w-]+_temp(_[0-9a-f]{32})?/?$')


def checkpoint_files(prefix):
  """The files of the checkpoint `prefix` that exist: index, data shards and graph (.meta).
  Only the suffix is a pattern: a directory such as `runs/exp[12]` never matches `runs/exp1`."""
  return _files_with_suffix(prefix, '.*')


def _files_with_suffix(prefix, suffix_pattern):
  directory, name = patterns.split_prefix(prefix)
  return patterns.files_matching(directory, patterns.glob_escape(name) + suffix_pattern)


def checkpoint_damage(prefix):
  """What is wrong with the checkpoint `prefix` (a path without suffix, local or gs://), or None
  when it is intact (see the module docstring for what is checked)."""
  if not tf.io.gfile.exists(prefix + '.index'):
    return 'its index file %s.index is missing' % prefix
  data_files = _files_with_suffix(prefix, '.data-*')
  shards = [_SHARD.search(f) for f in data_files]
  if not data_files or not all(shards):
    return 'its data files are missing' if not data_files else 'it has unexpected data files'
  expected_shards = int(shards[0].group(2))
  if sorted(int(m.group(1)) for m in shards) != list(range(expected_shards)):
    return 'it has %d of its %d data files' % (len(data_files), expected_shards)
  try:
    reader = tf.train.NewCheckpointReader(prefix)
    dtypes = reader.get_variable_to_dtype_map()
    shapes = reader.get_variable_to_shape_map()
  except (tf.errors.OpError, ValueError) as e:
    return 'its index cannot be read (%s)' % _damage_message(e)
  size = sum(tf.io.gfile.stat(f).length for f in data_files)
  numeric = {name: dtype for name, dtype in dtypes.items()
             if dtype.is_numpy_compatible and dtype != tf.string}
  if len(numeric) == len(dtypes):  # strings and variants are stored with lengths: no size check
    needed = sum(int(np.prod(shapes[name])) * dtype.size for name, dtype in numeric.items())
    if size != needed:
      return 'its data files hold %d bytes where its index needs %d' % (size, needed)
  if size <= FULL_READ_BYTES:
    if '://' not in prefix:
      return _unreadable_tensor(reader, numeric)
    # Each tensor read on gs:// is a request of its own (a small ResNet-18's check took 5-9 s on
    # the storage emulator here, BENCHMARKS.md); the files read whole are a few requests. The same
    # bytes are checked, in a local copy; messages name the storage's paths, not the copy's.
    try:
      with tempfile.TemporaryDirectory(prefix='checkpoint-check-') as local_dir:
        shown = (local_dir, os.path.dirname(prefix))
        try:
          local = _local_copy(prefix, [prefix + '.index'] + data_files, local_dir)
          local_reader = tf.train.NewCheckpointReader(local)
        except (tf.errors.OpError, ValueError) as e:
          return 'its files do not read back (%s)' % _damage_message(e, shown)
        return _unreadable_tensor(local_reader, numeric, shown)
    except OSError as e:  # the local disk, not the checkpoint: the same check, read remotely
      logging.warning('Cannot copy checkpoint %s into %s to check it (%s): reading each tensor '
                      'from storage instead, one request each (slower).', prefix,
                      tempfile.gettempdir(), e)
      return _unreadable_tensor(reader, numeric)
  return None


def _unreadable_tensor(reader, names, shown=None):
  """What is wrong with the first of `names` that `reader` cannot read back, or None (`shown`:
  as _damage_message's)."""
  for name in names:
    try:
      reader.get_tensor(name)
    except (tf.errors.OpError, ValueError) as e:
      return 'tensor %s does not read back (%s)' % (name, _damage_message(e, shown))
  return None


def _local_copy(prefix, paths, local_dir):
  """Copies `paths` (the checkpoint `prefix`'s files) into `local_dir`; returns the copy's prefix
  there."""
  for path in paths:
    tf.io.gfile.copy(path, os.path.join(local_dir, os.path.basename(path)))
  return os.path.join(local_dir, os.path.basename(prefix))


# Errors that say the files are bad. Any other (a storage outage, a refused permission) is raised:
# it must not move an intact checkpoint aside.
_DAMAGE_ERRORS = (tf.errors.DataLossError, tf.errors.OutOfRangeError, tf.errors.NotFoundError,
                  tf.errors.InvalidArgumentError, tf.errors.FailedPreconditionError, ValueError)
_DAMAGE_WORDS = ('corrupt', 'checksum', 'magic', 'data loss', 'truncated', 'read less bytes')


def _damage_message(error, shown=None):
  """The first line of `error` when it says the checkpoint's files are bad; re-raises others.
  `shown`: (a local copy's directory, the storage directory to name in its place), or None."""
  message = str(error)
  if shown:
    message = message.replace(*shown)
  message = message.strip().split('\n')[0][:300]
  if isinstance(error, _DAMAGE_ERRORS) or any(w in message.lower() for w in _DAMAGE_WORDS):
    return message
  raise error


def step_of(prefix):
  """The global step in a checkpoint prefix's name ('.../model.ckpt-1000' -> 1000), -1 if none."""
  match = re.search(r'-(\d+)$', prefix)
  return int(match.group(1)) if match else -1


def same_checkpoint(prefix, other):
  """Whether checkpoints `prefix` and `other` (prefixes, local or gs://) hold the same weights:
  the same step and byte-equal .index files (which hold each tensor's size and crc32c), so a
  checkpoint retrained at a step after its first one was moved aside is told apart (bool)."""
  if step_of(prefix) != step_of(other):
    return False
  indexes = []
  for path in (prefix, other):
    with tf.io.gfile.GFile(path + '.index', 'rb') as f:
      indexes.append(f.read())
  return indexes[0] == indexes[1]


def nonfinite_variables(prefix):
  """The names of the floating-point variables of checkpoint `prefix` that hold a NaN or an
  infinity (a diverged run's weights), in name order; [] for finite weights."""
  reader = tf.train.load_checkpoint(prefix)
  return sorted(name for name, dtype in reader.get_variable_to_dtype_map().items()
                if dtype.is_floating and not np.all(np.isfinite(reader.get_tensor(name))))


def newest_intact_checkpoint(model_dir, move_aside=True, finite=False, fence=None):
  """The newest intact checkpoint in `model_dir` (the prefix), or None when it holds none.

  With `finite`, a checkpoint whose weights hold a NaN or an infinity counts as damaged (after a
  diverged run: every variable of each newer checkpoint is read).

  With `move_aside` (a job that owns model_dir: training), newer damaged checkpoints are moved
  into <model_dir>/damaged/ with a warning, and the `checkpoint` state file is rewritten to list
  only what is left, so that Estimator's resume, `tf.train.latest_checkpoint` and the Saver's
  `keep_checkpoint_max` see the same. Without it (an evaluation beside a training job) they are
  only skipped, with a warning. `fence`: the run's claimed StateFence on a gs:// model_dir's
  state file, which then writes it, before any file is moved: a run that lost the lease is
  refused there and moves none of the new holder's files.

  Raises:
    PipelineError: model_dir has checkpoints and none of them is intact.
    lease.LeaseLost: with `fence`, this run lost the lease (nothing was moved).
  """
  state = tf.train.get_checkpoint_state(model_dir)
  if not state or not state.model_checkpoint_path:
    return None
  listed = list(state.all_model_checkpoint_paths)
  if state.model_checkpoint_path not in listed:
    listed.append(state.model_checkpoint_path)
  listed.sort(key=step_of)
  damaged = []
  intact = None
  for prefix in reversed(listed):
    problem = checkpoint_damage(prefix)
    if problem is None and finite:
      bad = nonfinite_variables(prefix)
      if bad:
        problem = 'its weights hold NaN or Inf (%d variables, e.g. %s): the run had diverged' % (
            len(bad), bad[0])
    if problem is None:
      intact = prefix
      break
    damaged.append((prefix, problem))
  # The paths as get_checkpoint_state gave them (joined to model_dir), as the Saver passes them:
  # TensorFlow stores them relative to a relative or gs:// model_dir.
  kept = [p for p in listed if intact and step_of(p) <= step_of(intact)]
  if damaged and move_aside and fence is not None:
    if intact:
      fence.write(text_format.MessageToString(tf.train.generate_checkpoint_state_proto(
          model_dir, intact, all_model_checkpoint_paths=kept)))
    else:
      fence.confirm()
  for prefix, problem in damaged:
    moved = ('Its files were moved to %s' % _move_aside(model_dir, prefix) if move_aside else
             'Skipped')
    logging.warning('Checkpoint %s is damaged: %s. %s; %s', prefix, problem, moved,
                    'going on from %s.' % intact if intact else 'no older checkpoint is intact.')
  if not intact:
    raise PipelineError(
        'no intact checkpoint in %s: %s.%s Point --model_dir at an empty directory to start '
        'over, or put an intact checkpoint back.' % (
            model_dir, '; '.join('%s: %s' % (os.path.basename(p), why) for p, why in damaged),
            ' The damaged files are in %s.' % _damaged_dir(model_dir) if move_aside else ''))
  if damaged and move_aside and fence is None:
    tf.train.update_checkpoint_state(model_dir, intact, all_model_checkpoint_paths=kept)
  return intact


def remove_unfinished_saves(model_dir):
  """Deletes the temporary folders of checkpoint saves that never finished (a process killed
  inside its save): their partial files name no checkpoint and are never read or removed by
  TensorFlow. Only for the run that holds model_dir's lease: no live run saves there (on gs://
  a stalled holder that lost the lease still might: its save then fails, and a folder it leaves
  goes at the next run's start). Returns the folder names removed (each logged)."""
  removed = []
  for name in sorted(tf.io.gfile.listdir(model_dir)):
    path = model_dir.rstrip('/') + '/' + name.rstrip('/')
    if _UNFINISHED_SAVE.match(name) and tf.io.gfile.isdir(path):
      logging.warning('Deleting %s: the files of a checkpoint save that never finished (its '
                      'process was killed inside it).', path)
      tf.io.gfile.rmtree(path)
      removed.append(name.rstrip('/'))
  return removed


def remove_orphans(directory, keep=()):
  """Deletes the files of run-named checkpoints (gs://: model.ckpt-RUN-STEP,
  trainer/run/fenced_saver.py) in `directory` that neither its `checkpoint` state file nor `keep`
  (prefix basenames) names: a save interrupted before its state write, or the files of a run that
  stalled inside a save and lost the lease (its state write was refused); nothing reads them.
  Safe because the Saver names every checkpoint it keeps (keep_checkpoint_max > 0, no
  keep_checkpoint_every_n_hours: the trainer's settings, and the only legacy Savers fenced,
  trainer.run.fenced_saver.why_not_fenced). Only for the run that holds the lease
  and has claimed its fences. Deletes nothing without a state file that reads and names a
  checkpoint (a directory with none yet: an earlier holder's first state write could still name
  them), and never other names. A storage error ends the cleanup with a warning, never the run.
  Returns the prefixes removed (each logged)."""
  directory = directory.rstrip('/')
  try:
    state = (tf.train.get_checkpoint_state(directory)
             if tf.io.gfile.exists(directory + '/' + state_fence.STATE_FILE) else None)
    names = tf.io.gfile.listdir(directory) if state and state.model_checkpoint_path else []
  except (tf.errors.OpError, ValueError) as e:
    logging.warning('Not looking for orphaned checkpoints in %s: %s', directory, e)
    return []
  named = set(keep)
  if names:
    named.update(os.path.basename(p) for p in
                 list(state.all_model_checkpoint_paths) + [state.model_checkpoint_path])
  orphans = {}
  for name in names:
    match = _RUN_NAMED.match(name)
    if match and match.group(1) not in named:
      orphans.setdefault(match.group(1), []).append(name)
  for prefix, files in sorted(orphans.items()):
    logging.warning('Deleting %s/%s: a checkpoint no state file names (a save interrupted before '
                    'its state write, or a run that lost this directory\'s lease inside it).',
                    directory, prefix)
    for name in files:
      try:
        tf.io.gfile.remove(directory + '/' + name)
      except tf.errors.NotFoundError:
        pass  # removed meanwhile
      except tf.errors.OpError as e:
        logging.warning('Not deleting the rest of the orphaned checkpoints in %s: %s',
                        directory, e)
        return sorted(p for p in orphans if p <= prefix)
  return sorted(orphans)


def _damaged_dir(model_dir):
  return model_dir.rstrip('/') + '/' + DAMAGED_DIR


def _move_aside(model_dir, prefix):
  """Moves the files of `prefix` into <model_dir>/damaged/ (renamed with a numbered suffix if a
  file of that name is already there); returns that directory."""
  target = _damaged_dir(model_dir)
  tf.io.gfile.makedirs(target)
  for path in checkpoint_files(prefix):
    destination = target + '/' + os.path.basename(path)
    suffix = 1
    while tf.io.gfile.exists(destination):
      destination = '%s/%s.%d' % (target, os.path.basename(path), suffix)
      suffix += 1
    tf.io.gfile.rename(path, destination)
  return target
