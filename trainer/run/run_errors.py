"""TensorFlow errors during a run, re-raised as PipelineErrors that say what was wrong and what to
do. Checkpoints already written stay; the messages say how the run resumes."""

import contextlib
import errno
import os
import re
import shutil

from absl import logging
import tensorflow.compat.v1 as tf

from trainer.errors import PipelineError
from trainer.run import checkpoints

# What the operating system says when a write finds no room (ENOSPC, EDQUOT), as TensorFlow's
# file system errors and Python's OSError word it.
_NO_SPACE = ('No space left on device', 'Disk quota exceeded')


@contextlib.contextmanager
def explain_checkpoint_mismatch(config):
  """A checkpoint written with another --moving_average_decay setting (or another model) lacks
  variables this graph restores, or (TF 1.15) has one of another shape: say which setting to use
  instead of TF's key listing. (`trainer.run.input_checks` refuses most such runs before any work;
  this covers what it cannot see, e.g. a run without model_config.json.)"""
  try:
    yield
  except tf.errors.NotFoundError as e:
    if 'ExponentialMovingAverage' in e.message:
      raise PipelineError(
          'the checkpoint in %s has no moving averages of the weights (it was trained with '
          '--moving_average_decay=0), but this run uses --moving_average_decay=%s. Pass '
          '--moving_average_decay=0 to continue or evaluate it, or use a new --model_dir.'
          % (config.model_dir, config.model.moving_average_decay))
    if 'not found in checkpoint' in e.message:
      raise PipelineError(
          'the checkpoint in %s does not match this model (%s); was it written with another '
          '--model, --resnet_depth or --num_classes? Use the same flags or a new --model_dir.'
          % (config.model_dir, e.message.splitlines()[0][:300]))
    raise
  except tf.errors.InvalidArgumentError as e:  # TF 1.15's restore of another shape
    found = re.search(r'lhs shape= *(\[[\d, ]*\]) rhs shape= *(\[[\d, ]*\])', e.message)
    if 'Assign requires shapes' not in e.message or not found:
      raise
    raise PipelineError(
        'the checkpoint in %s is of another network: a variable has shape %s there and %s in '
        'this network (was it written with another --model, --resnet_depth or --num_classes?). '
        'Use the same flags, a new --model_dir, or --model_dir=NEW_DIR --init_checkpoint=%s to '
        'start from its weights.' % (config.model_dir, found.group(2), found.group(1),
                                     config.model_dir))


@contextlib.contextmanager
def explain_warm_start_errors():
  """`models.warm_start` refusals (not a checkpoint, another model, a reference ResNet-18/34)
  become PipelineErrors with their message."""
  try:
    yield
  except ValueError as e:
    # TF 2.15's autograph (MirroredStrategy) puts 'in user code:' and a traceback first.
    found = re.search(r'^(?:\w+Error: )?(init_checkpoint .*)$', str(e), re.MULTILINE)
    if found:
      raise PipelineError(found.group(1))
    raise


@contextlib.contextmanager
def explain_tpu_shape_errors(config):
  """TPUEstimator's refusals of a batch that does not divide over the slice's cores, or of a
  --num_cores that is not the slice's, become PipelineErrors naming the flag to change."""
  try:
    yield
  except ValueError as e:
    message = str(e)
    if 'must be divisible by number of replicas' in message:
      raise PipelineError('%s: each of the TPU slice\'s cores needs the same per-core batch. '
                          'Use --train_batch_size and --eval_batch_size that divide by the '
                          'number of cores.' % message)
    if 'num_shards is not set correctly' in message:
      raise PipelineError('--num_cores=%s is not the number of cores of the TPU slice (%s). '
                          'Pass the slice\'s count, or leave --num_cores out to take it from '
                          'the TPU.' % (config.num_cores, message))
    raise


@contextlib.contextmanager
def explain_input_errors(config, split):
  """Turns failures of the input pipeline (corrupt records, undecodable images, labels out of
  range) into a PipelineError naming the data and what to do; checkpoints already written stay.
  A legacy job's input_fn reads data of its own: its errors pass through as they are."""
  if config.model.is_model_fn:
    yield
    return
  try:
    yield
  except tf.errors.DataLossError as e:
    pattern = config.data.file_pattern(is_training=split == 'train')
    raise PipelineError(
        'corrupt TFRecord data in the %s split (%s): %s. Re-create or remove the damaged shard '
        '(e.g. re-run `python -m trainer.prepare`); training resumes from the last checkpoint in '
        '%s.' % (split, _locate_corrupt_shard(pattern), e.message.splitlines()[0],
                 config.model_dir))
  except tf.errors.InvalidArgumentError as e:
    if 'class/label' in e.message or 'text/token_ids' in e.message:
      # TF 2.x puts 'Graph execution error:' first; the failed check is on a later line.
      lines = [l for l in e.message.splitlines() if 'outside [0' in l] or e.message.splitlines()
      raise PipelineError('a label or token id in the %s split under %s is out of range: %s' % (
          split, config.data.data_dir, lines[0].strip()[:500]))
    if 'IteratorGetNext' in e.message:
      raise PipelineError('a record in the %s split under %s could not be parsed or decoded: %s. '
                          'Check that the shards hold tf.train.Examples in the ImageNet schema '
                          '(image/encoded, image/class/label) or, for text, text/token_ids and '
                          'text/class/label.' % (
                              split, config.data.data_dir, e.message.splitlines()[0]))
    raise


def _locate_corrupt_shard(pattern, max_bytes=2 << 30):
  """Names the first shard matching `pattern` whose records fail their CRC check (TF's error
  does not say which file); gives up after reading max_bytes."""
  scanned = 0
  for path in sorted(tf.io.gfile.glob(pattern)):
    if scanned > max_bytes:
      break
    try:
      for record in tf.io.tf_record_iterator(path):
        scanned += len(record)
    except tf.errors.DataLossError:
      return 'shard ' + path
  return 'shards %s; the damaged one was not found in the first %d MiB' % (pattern, max_bytes >> 20)


def storage_outage_message(error):
  """The user's message for a TensorFlow error that is an object-store outage outlasting TF's own
  retries (about 90 s per request on TF 1.15, 200 s on TF 2.15), or None for any other error.

  During training Estimator's session recovers from such errors by itself (it restores the
  newest checkpoint and goes on, docs/reliability.md); this is for what comes after (evaluation,
  export, results.json), where the error would otherwise end the run with a traceback."""
  if not isinstance(error, (tf.errors.UnavailableError, tf.errors.AbortedError)):
    return None
  # TF 2.15 puts 'Graph execution error:' and the op's origin first: look at every line.
  lines = [line.strip() for line in str(error.message or '').splitlines()]
  found = [line for line in lines if 'HTTP request' in line or 'retry attempts failed' in line]
  if not found:
    return None
  return ('the storage did not answer within TensorFlow\'s retries (%s). Checkpoints written '
          'before stay; run the same command again to resume from the newest intact one.'
          % found[0][:300])


@contextlib.contextmanager
def explain_divergence(config, progress, owns_model_dir=True, fence=None):
  """A training loss that became NaN or Inf (TensorFlow's NanTensorHook stops the session)
  becomes a PipelineError with the step, the last finite loss and what to try; checkpoints whose
  weights are no longer finite (saved after the divergence began, some in the very step that
  stopped it) are moved into model_dir/damaged/, so the newest finite one is what a rerun
  resumes.

  progress: the run's `trainer.run.hooks.ProgressHook` (its last finite loss; None on a TPU,
  whose loss the hook does not read). owns_model_dir: False for a cluster's worker, which
  leaves the checkpoints to the chief (it only names the newest finite one). fence: the run's
  claimed StateFence on a gs:// model_dir's state file, which rewrites it
  (`checkpoints.newest_intact_checkpoint`)."""
  try:
    yield
  except tf.train.NanLossDuringTrainingError:
    finite = progress.last_finite_loss if progress else None
    kept = checkpoints.newest_intact_checkpoint(config.model_dir, move_aside=owns_model_dir,
                                                finite=True, fence=fence)
    model = config.model
    if model.is_model_fn:  # its optimizer is its own
      advice = ('Lower the learning rate or clip the gradients in --model_fn=%s'
                % model.model)
    else:
      advice = ('Try a lower --base_learning_rate (this run: %g), --gradient_clip_norm=1.0 (this '
                'run: %s) or a longer --warmup_epochs (this run: %s)'
                % (model.base_learning_rate, model.gradient_clip_norm or 'none',
                   model.warmup_epochs))
    raise PipelineError(
        'training diverged: the loss became NaN or Inf at step %s (%s). The newest checkpoint '
        'with finite weights is kept: %s. %s, and run again: it resumes from the kept '
        'checkpoint.' % (
            progress.latest_step if progress and progress.latest_step is not None else '?',
            'the last finite loss was %.4g at step %d' % (finite[1], finite[0]) if finite else
            'no finite loss was read before it',
            kept or 'none (no checkpoint before the divergence)', advice))


def _no_space(error):
  if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
    return True
  return isinstance(error, (tf.errors.OpError, OSError)) and any(
      text in str(error) for text in _NO_SPACE)


def _checkpoint_bytes(prefix):
  return sum(tf.io.gfile.stat(p).length for p in checkpoints.checkpoint_files(prefix))


def _remove_unfinished_saves(model_dir):
  """Deletes what a checkpoint save cut short by the full disk left: the Saver's
  `<prefix>_temp_<hex>/` (TF 1.15) or `<prefix>_temp/` (TF 2.15) folders (this run holds
  model_dir's lease: no other save is running)."""
  for name in tf.io.gfile.listdir(model_dir):
    if re.search(r'_temp(_[0-9a-f]{32})?/?$', name):  # TF 1.15's Saver; TF 2.15's
      tf.io.gfile.rmtree('%s/%s' % (model_dir.rstrip('/'), name.rstrip('/')))


@contextlib.contextmanager
def explain_full_disk(config):
  """A write into model_dir that found its disk full (ENOSPC, EDQUOT: a checkpoint, an events
  file, results.json) becomes a PipelineError naming the directory and the space a checkpoint
  needs; the unfinished save is deleted and the newest intact checkpoint kept, so that the same
  command resumes once there is room."""
  try:
    yield
  except (tf.errors.OpError, OSError) as e:
    if not _no_space(e):
      raise
    model_dir = config.model_dir
    _remove_unfinished_saves(model_dir)
    kept = checkpoints.newest_intact_checkpoint(model_dir, move_aside=True)
    need = _checkpoint_bytes(kept) if kept else None
    try:
      free = shutil.disk_usage(model_dir).free if os.path.isdir(model_dir) else None
    except OSError:
      free = None
    logging.error('No space left in %s: %s', model_dir, str(e).splitlines()[0][:300])
    raise PipelineError(
        'the disk of --model_dir=%s is full (%s). %s Free at least %s there%s, or choose '
        'another --model_dir; then run the same command again: it resumes from the newest intact '
        'checkpoint%s.' % (
            model_dir, 'no space left on device' if 'quota' not in str(e) else 'disk quota '
            'exceeded',
            'Each checkpoint of this network takes %.1f MiB, and up to --keep_checkpoint_max=%d '
            'are kept, with the TensorBoard events beside them.' % (need / 2.0**20,
                                                                    config.keep_checkpoint_max)
            if need else 'No checkpoint was saved yet.',
            '%.1f MiB' % (2 * need / 2.0**20) if need else 'room for one checkpoint',
            ' (%.1f MiB are free now)' % (free / 2.0**20) if free is not None else '',
            ', step %d, which is kept' % checkpoints.step_of(kept) if kept else
            ' (none yet: it starts over)'))
