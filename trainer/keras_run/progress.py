"""The callback that runs a Keras 3 training run's periodic work: every `log_every_steps` (one
Keras "epoch" of `fit`) a log line with the step, the loss, the learning rate, examples/sec and
the ETA, and the same scalars in TensorBoard (model_dir/train, written with TensorBoard's own
writer, which needs no TensorFlow); a checkpoint every `save_every_steps`; and on SIGTERM or a
first Ctrl-C a stop after the step in flight, with a checkpoint at that step (the caller then
exits with status 75, `trainer.errors.EXIT_RESUMABLE`). In a multi-process run a SIGTERM reaches
each host on its own: the processes agree at the end of each logged period whether any of them
got one, and all stop there, at one step, with one checkpoint. One that arrives after the last
period (in the final evaluation or save) is not handled: that process dies."""

import os
import time

from absl import logging
import keras
from tensorboard import summary as tensorboard_summary


class Progress(keras.callbacks.Callback):
  """Logs, checkpoints and stops (see the module docstring). `history` collects one dict per
  log line: step, loss, learning_rate, examples_per_sec (and accuracy: the training batches').
  `summary_dir`: where the TensorBoard events go (None: nowhere, as on the other hosts of a
  multi-host run)."""

  def __init__(self, checkpoints, sigterm, total_steps, batch_size, save_every_steps,
               summary_dir=None, any_everywhere=None):
    """`any_everywhere`: a collective telling whether a bool is true in any process of the run
    (trainer.keras_run.devices.Devices.any_everywhere; None: one process, the bool itself)."""
    super().__init__()
    self._any_everywhere = any_everywhere or (lambda flag: flag)
    self._summary_dir = summary_dir
    self._writer = None
    self._checkpoints = checkpoints
    self._sigterm = sigterm
    self._total = total_steps
    self._batch = batch_size
    self._save_every = save_every_steps
    self.history = []
    self.stopped_at = None
    self._start = self._period_start = None
    self._period_step = None
    self._trained = 0

  def _step(self):
    return int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))

  def on_epoch_begin(self, epoch, logs=None):
    self._period_start = time.time()
    self._start = self._start or self._period_start
    self._period_step = self._step() if self._period_step is None else self._period_step

  def on_train_batch_end(self, batch, logs=None):
    if self._sigterm.requested and not self._sigterm.at_period_end:
      self.model.stop_training = True

  def on_epoch_end(self, epoch, logs=None):
    step = self._step()
    seconds = max(time.time() - self._period_start, 1e-9)
    steps = step - self._period_step
    self._trained += steps
    rate = steps * self._batch / seconds
    elapsed = time.time() - self._start
    eta = (self._total - step) * elapsed / max(self._trained, 1)
    learning_rate = float(keras.ops.convert_to_numpy(
        self.model.optimizer.learning_rate))
    entry = {'step': step, 'loss': float(logs['loss']), 'learning_rate': learning_rate,
             'examples_per_sec': rate}
    accuracy = logs.get('accuracy', logs.get('logits_accuracy'))
    if accuracy is not None:
      entry['accuracy'] = float(accuracy)
    self.history.append(entry)
    self._summarize(entry)
    logging.info('step %d/%d: loss %.4f, learning rate %.4g, %.1f examples/sec, ETA %.0f s',
                 step, self._total, entry['loss'], learning_rate, rate, eta)
    self._period_step = step
    requested = self._any_everywhere(self._sigterm.requested)  # every process, at this step
    if requested and not self._sigterm.requested:
      self._sigterm.cause = 'preempted (SIGTERM to another process of the run)'
    if requested:
      self._checkpoints.save(self.model, step)
      self.stopped_at = step
      self.model.stop_training = True
    elif step % self._save_every == 0 or step >= self._total:
      self._checkpoints.save(self.model, step)

  def _summarize(self, entry):
    if self._summary_dir is None:
      return
    if self._writer is None:
      self._writer = tensorboard_summary.Writer(tensorboard_summary.DirectoryOutput(
          os.path.join(self._summary_dir, 'train')))
    for name, value in entry.items():
      if name != 'step':
        self._writer.add_scalar(name, value, step=entry['step'])
    self._writer.flush()

  def close(self):
    """Closes the TensorBoard writer (after the run's last `fit`, or on its way out)."""
    if self._writer is not None:
      self._writer.close()
      self._writer = None
