"""Scenarios of tests/test_keras_train.py that run in a fresh process each, as each run of the
command is one: resume, and the input stream a run trains on. The module imports no TensorFlow,
so that the resume also runs where TensorFlow cannot be imported (tests/without_tensorflow)."""

import json
import os
import pathlib
import signal
import types

import keras
import numpy as np
import pytest

from trainer.errors import Preempted
from trainer.flags import to_keras_config
from trainer.keras_run import job


def results(model_dir):
  with open(os.path.join(model_dir, job.RESULTS_FILE)) as f:
    return json.load(f)


def weights(model_dir):
  return keras.saving.load_model(os.path.join(model_dir, job.MODEL_FILE)).get_weights()


def flags(model_dir, data_dir, **overrides):
  """The run config of test_keras_train._RUN's flag values as trainer.train_keras parses them
  (defaults elsewhere), through the command's own conversion (flags/to_keras_config.py)."""
  values = dict(
      model_dir=model_dir, data_dir=data_dir, init_model=None, model='cnn', resnet_depth=18,
      image_size=None, embedding_dim=256, lstm_hidden_units=128, overwrite=False, train_steps=6,
      train_epochs=1.0, train_batch_size=8, eval_batch_size=25, optimizer='momentum',
      momentum=0.9, nesterov=False, base_learning_rate=0.05, lr_schedule='step', warmup_epochs=0.,
      lr_decay_epochs=['0.5'], lr_decay_factor=0.1, weight_decay=1e-4, label_smoothing=0.1,
      gradient_clip_norm=5.0, aux_loss_weight=0.4, dtype_policy='float32', crop_padding=None,
      cache_decoded=False, log_every_steps=2, save_checkpoints_steps=2, keep_checkpoints=2,
      cpu_replicas=0, data_parallel=True, multi_host=False, multi_host_timeout=300, seed=3,
      lease_expiry_secs=180)
  values.update(overrides)
  return to_keras_config.keras_run_config(types.SimpleNamespace(**values))


class At(keras.callbacks.Callback):
  """Calls `action` once, after the optimizer's step `step`."""

  def __init__(self, step, action):
    super().__init__()
    self._step, self._action = step, action

  def on_train_batch_end(self, batch, logs=None):
    if int(keras.ops.convert_to_numpy(self.model.optimizer.iterations)) == self._step:
      self._action()


class Killed(Exception):
  """Stands for kill -9: the run ends at once, nothing saved."""


def kill():
  raise Killed()


def resume_scenario(tiny_dir, tmp_dir, tolerance, loss_tolerance=None, **overrides):
  """Trains 6 steps whole, and again stopped by SIGTERM after step 3 and killed after step 5,
  then resumed; the weights must agree within `tolerance` (0: bit for bit), and the loss of the
  last period (steps 5-6) within `loss_tolerance` (default: `tolerance`). Prints RESUMED within
  that tolerance. `overrides`: flag values of all three runs (cpu_replicas)."""
  tmp_path = pathlib.Path(tmp_dir)
  whole = str(tmp_path / 'whole')
  job.train(flags(whole, tiny_dir, **overrides))
  stopped = str(tmp_path / 'stopped')
  with pytest.raises(Preempted, match='checkpoint at step 3'):
    job.train(flags(stopped, tiny_dir, **overrides),
              callbacks=[At(3, lambda: os.kill(os.getpid(), signal.SIGTERM))])
  with pytest.raises(Killed):
    job.train(flags(stopped, tiny_dir, **overrides), callbacks=[At(5, kill)])
  with open(os.path.join(stopped, 'checkpoints', 'checkpoint.json')) as f:
    assert json.load(f)['step'] == 4
  resumed = job.train(flags(stopped, tiny_dir, **overrides))
  assert resumed['resumed_from_step'] == 4
  largest = max(float(np.abs(a - b).max()) for a, b in zip(weights(stopped), weights(whole)))
  assert largest <= tolerance, 'resumed weights differ by %g > %g' % (largest, tolerance)
  # The loss of steps 5-6, which both runs train on the same batches: another batch moves it by
  # far more than the tolerance, where the weights (at the decayed rate) would move little.
  loss_tolerance = tolerance if loss_tolerance is None else loss_tolerance
  last = abs(resumed['train_log'][-1]['loss'] - results(whole)['train_log'][-1]['loss'])
  assert last <= loss_tolerance, 'the last period\'s loss differs by %g > %g' % (last,
                                                                                 loss_tolerance)
  assert [e['step'] for e in results(whole)['train_log']] == [2, 4, 6]
  print('RESUMED within %g (largest difference %g)' % (tolerance, largest))




class _Seen(keras.layers.Layer):
  """Passes its input on; in training, adds the sum of its pixels to `total`."""

  def build(self, shape):
    del shape
    self.total = self.add_weight(shape=(), initializer='zeros', trainable=False, name='total')

  def call(self, x, training=None):
    if training:
      self.total.assign(self.total + keras.ops.sum(keras.ops.cast(x, 'float32')))
    return x


def stream_scenario(data_dir):
  """Trains a probe model through job's input (trainer.keras_run.inputs) for 3 `fit` epochs of
  2 steps, as a run's logged periods; prints the pixel sum it trained on and that of the
  stream's first 6 batches (a fresh input, read directly)."""
  from trainer.keras_run import devices as devices_lib  # pylint: disable=g-import-not-at-top
  from trainer.keras_run import inputs  # pylint: disable=g-import-not-at-top
  devices = devices_lib.set_up()  # as the job's devices
  with devices.scope():
    image = keras.Input((28, 28, 3))
    model = keras.Model(image, keras.layers.Dense(10)(keras.layers.Flatten()(_Seen()(image))))
    model.compile(optimizer='sgd', loss=keras.losses.CategoricalCrossentropy(from_logits=True))
  f = flags(None, data_dir)
  expected = 0.0
  for batch, _ in zip(inputs.TFRecordInput(f, (28, 28, 3)).train(model, 8, 0), range(6)):
    images = batch[0].numpy() if hasattr(batch[0], 'numpy') else batch[0]
    expected += float(np.asarray(images, np.float64).sum())
  model.fit(inputs.TFRecordInput(f, (28, 28, 3)).train(model, 8, 0), epochs=3,
            steps_per_epoch=2, verbose=0)
  seen = float(keras.ops.convert_to_numpy(model.layers[1].total))
  print('TRAINED ON %.1f, THE STREAM HOLDS %.1f' % (seen, expected))
