"""Training stops before its next checkpoint when it lost model_dir's writer lease
(`trainer.storage.lease`): another run took the directory over, and its checkpoints must not be
written over.

`LeaseHook` raises `lease.LeaseLost` after the step in which the heartbeat found the lease lost
(its exception ends the training session without the Estimator's final save);
`LeaseSaverListener` asks the storage before each checkpoint the Estimator saves, so a takeover
the heartbeat has not seen yet still stops the save.
"""

import tensorflow.compat.v1 as tf


class LeaseHook(tf.train.SessionRunHook):
  """Raises LeaseLost after a step once `lease.lost` is set (no storage call per step)."""

  def __init__(self, lease):
    self._lease = lease

  def after_run(self, run_context, run_values):
    del run_context, run_values
    if self._lease.lost:
      self._lease.check()


class LeaseSaverListener(tf.train.CheckpointSaverListener):
  """Checks the lease with the storage before each checkpoint save (raises LeaseLost)."""

  def __init__(self, lease):
    self._lease = lease

  def before_save(self, session, global_step_value):
    del session, global_step_value
    self._lease.check()
