"""A training Saver whose checkpoints on gs:// become visible only through the state fence
(`trainer.storage.state_fence`), and whose files carry the run's name, so that a stalled run that
lost the writer's lease can neither name its checkpoint in the `checkpoint` state file nor
overwrite the files of the run that took over.

On gs:// a run's checkpoint prefixes are
`model.ckpt-<run>-<step>` (run: the first 8 hex digits of its lease token) instead of
`model.ckpt-<step>`: TensorFlow finds them through the state file (`tf.train.latest_checkpoint`),
and the step stays last. Local model_dirs keep TensorFlow's names and its own state writes (a
local lease is a lock; a /gcs/ model_dir is written as gs://).

Used on the TPUEstimator road (a TPU, or the CPU/GPU in one process) and with MirroredStrategy
(whose Estimator takes the first replica's scaffold's Saver): `model_fn_with` wraps the run's
model_fn so that the training spec's scaffold makes it the graph's Saver, which the Estimator's
CheckpointSaverHook, the preemption save and TPU's GracefulShutdownHook all use; and by a
TF_CONFIG cluster's chief, the one task that saves (the other tasks keep TensorFlow's Saver).
"""

import os

from absl import logging
from google.protobuf import text_format
import tensorflow.compat.v1 as tf

# The Saver the Estimator makes when a model_fn gives none (estimator.py,
# _train_with_estimator_spec): the same settings, so that only the state write differs.
_ESTIMATOR_SAVER = dict(sharded=True, defer_build=True, save_relative_paths=True)
_KEEP_EVERY_DEFAULT_HOURS = 10000.0  # tf.train.Saver's keep_checkpoint_every_n_hours: never


def _relative(path, directory, relative):
  # As update_checkpoint_state_internal (checkpoint_management.py) records paths.
  return os.path.relpath(path, directory) if relative and os.path.isabs(path) else path


class FencedSaver(tf.train.Saver):
  """tf.train.Saver whose save() names the run in its files and writes the state file through
  `fence` (a state_fence.StateFence); raises lease.LeaseLost when another run wrote it since and
  this run lost its lease (before any old checkpoint is deleted)."""

  def __init__(self, fence, **kwargs):
    super(FencedSaver, self).__init__(**kwargs)
    self._fence = fence

  def save(self, sess, save_path, global_step=None, latest_filename=None,
           meta_graph_suffix='meta', write_meta_graph=True, write_state=True,
           strip_default_attrs=False, save_debug_info=False):
    return _fenced_save(self, self._fence, super(FencedSaver, self).save, sess, save_path,
                        global_step, latest_filename, meta_graph_suffix, write_meta_graph,
                        write_state, strip_default_attrs, save_debug_info)


def why_not_fenced(saver):
  """Why a legacy model_fn's own `saver` cannot save through the fence (str), or None. The
  fence's state file lists the Saver's kept checkpoints (`last_checkpoints`), and the next run
  deletes every run-named checkpoint it does not list (`trainer.run.checkpoints.remove_orphans`):
  a Saver that keeps checkpoints outside that list (max_to_keep 0 or None: all of them;
  keep_checkpoint_every_n_hours) would lose them."""
  # pylint: disable=protected-access  # the Saver's own settings, as it reads them
  if not isinstance(saver, tf.train.Saver):
    return 'it is a %s, not a tf.train.Saver' % type(saver).__name__
  if not saver._max_to_keep:
    return 'it keeps every checkpoint (max_to_keep=%s)' % saver._max_to_keep
  if saver._keep_checkpoint_every_n_hours != _KEEP_EVERY_DEFAULT_HOURS:
    return ('it keeps a checkpoint every %g hours beside its newest %d'
            % (saver._keep_checkpoint_every_n_hours, saver._max_to_keep))
  return None


def fence_own_saver(saver, fence):
  """A legacy model_fn's own tf.train.Saver (one `why_not_fenced` accepts) made to save as a
  FencedSaver does (its files named by the run, the state file through `fence`), its own
  settings (variables, max_to_keep, sharding) kept; a save elsewhere than model_dir or under
  another state file name stays its own. Returns `saver`, changed in place (once: a Saver the
  model_fn returns again, e.g. for each MirroredStrategy replica, is left as it is)."""
  unfenced = saver.save
  if getattr(unfenced, 'fence', None) is not None:
    return saver
  model_dir = fence.path.rpartition('/')[0]

  def save(sess, save_path, global_step=None, latest_filename=None, meta_graph_suffix='meta',
           write_meta_graph=True, write_state=True, strip_default_attrs=False,
           save_debug_info=False):
    if latest_filename or os.path.dirname(save_path).rstrip('/') != model_dir:
      return unfenced(sess, save_path, global_step, latest_filename, meta_graph_suffix,
                      write_meta_graph, write_state, strip_default_attrs, save_debug_info)
    return _fenced_save(saver, fence, unfenced, sess, save_path, global_step, latest_filename,
                        meta_graph_suffix, write_meta_graph, write_state, strip_default_attrs,
                        save_debug_info)
  save.fence = fence
  saver.save = save
  return saver


def _fenced_save(saver, fence, unfenced_save, sess, save_path, global_step, latest_filename,
                 meta_graph_suffix, write_meta_graph, write_state, strip_default_attrs,
                 save_debug_info):
  """Saver.save through `fence`: `unfenced_save` (the Saver's own) writes the files under the
  run's name without the state file, which `fence` then writes; old checkpoints are deleted
  only after that write (lease.LeaseLost: not at all)."""
  save_path = '%s-%s' % (save_path, fence.run_name)
  path = unfenced_save(
      sess, save_path, global_step=global_step, latest_filename=latest_filename,
      meta_graph_suffix=meta_graph_suffix, write_meta_graph=write_meta_graph,
      write_state=False, strip_default_attrs=strip_default_attrs,
      save_debug_info=save_debug_info)
  if write_state and path:
    directory = os.path.dirname(save_path)
    # pylint: disable=protected-access  # the Saver's own list of kept checkpoints
    relative = saver._save_relative_paths
    saver._RecordLastCheckpoint(path)
    state = tf.train.generate_checkpoint_state_proto(
        directory, _relative(path, directory, relative),
        all_model_checkpoint_paths=[_relative(p, directory, relative)
                                    for p in saver.last_checkpoints])
    fence.write(text_format.MessageToString(state))
    saver._MaybeDeleteOldCheckpoints(meta_graph_suffix=meta_graph_suffix)
    # pylint: enable=protected-access
  return path


def model_fn_with(model_fn, fence, keep_checkpoint_max):
  """`model_fn` (features, labels, mode, params, config) whose training spec saves through a
  FencedSaver: a TPUEstimatorSpec's scaffold_fn, or an EstimatorSpec's scaffold, wrapped by
  `scaffold_fn_with`. Other modes' specs are `model_fn`'s own."""
  def fenced_model_fn(features, labels, mode, params, config):  # the Estimator reads the names
    spec = model_fn(features, labels, mode, params, config)
    if mode != tf.estimator.ModeKeys.TRAIN:
      return spec
    if hasattr(spec, 'scaffold_fn'):  # a TPUEstimatorSpec
      return spec._replace(scaffold_fn=scaffold_fn_with(spec.scaffold_fn, fence,
                                                        keep_checkpoint_max))
    return spec._replace(scaffold=scaffold_fn_with(lambda: spec.scaffold, fence,
                                                   keep_checkpoint_max)())
  return fenced_model_fn


def scaffold_fn_with(scaffold_fn, fence, keep_checkpoint_max):
  """A TPUEstimatorSpec scaffold_fn that returns `scaffold_fn`'s Scaffold (or a new one) with a
  FencedSaver as the graph's Saver (also in the SAVERS collection, where hooks that make their
  own saver look first). A model_fn that brings its own tf.train.Saver (a legacy --model_fn)
  keeps it, fenced (`fence_own_saver`) where `why_not_fenced` allows, else unfenced with a
  warning saying why."""
  def fenced_scaffold_fn():
    scaffold = scaffold_fn() if scaffold_fn else None
    savers = tf.get_collection(tf.GraphKeys.SAVERS)
    if (scaffold is None or scaffold.saver is None) and [type(s) for s in savers] == [FencedSaver]:
      # MirroredStrategy calls the model_fn once per replica: the first made the graph's Saver.
      return tf.train.Scaffold(saver=savers[0], copy_from_scaffold=scaffold)
    own = scaffold.saver if scaffold is not None and scaffold.saver is not None else (
        savers[0] if len(savers) == 1 else None)
    if own is not None and not isinstance(own, FencedSaver) and why_not_fenced(own) is None:
      fence_own_saver(own, fence)
      return scaffold or tf.train.Scaffold()
    if (scaffold is not None and scaffold.saver is not None) or savers:
      logging.warning('The model_fn brings its own Saver, and %s: its checkpoints on gs:// are '
                      'written as it writes them, without the state file\'s fence '
                      '(docs/reliability.md).', why_not_fenced(own) if own is not None else
                      'there are several')
      return scaffold or tf.train.Scaffold()
    saver = FencedSaver(fence, max_to_keep=keep_checkpoint_max, **_ESTIMATOR_SAVER)
    tf.add_to_collection(tf.GraphKeys.SAVERS, saver)
    return tf.train.Scaffold(saver=saver, copy_from_scaffold=scaffold)
  return fenced_scaffold_fn
