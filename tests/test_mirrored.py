"""Single-machine synchronous data parallelism (--num_gpus / --mirrored_devices, MirroredStrategy).

There is no GPU here: the same code path runs on two CPU devices of one session
(--mirrored_devices=/cpu:0,/cpu:1), which is what these tests use.
"""

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from trainer.data.data_config import DataConfig
from trainer.models.model_config import ModelConfig
from trainer.run import estimator as estimator_lib
from trainer.run.run_config import Config

from helpers import ok
from helpers import refused
from helpers import results_of
from helpers import run_main
from helpers import split_cases
from helpers import TINY

CPUS = ('/cpu:0', '/cpu:1')


def _text_config(model_dir, mirrored_devices, gradient_clip_norm):
  """A tiny BiLSTM on fixed synthetic token ids: no batch norm and no dropout, so one step on two
  replicas of 4 examples must equal one step on the 8 examples together."""
  model = ModelConfig(
      model='bilstm', num_classes=2, vocab_size=30, max_seq_length=6, embedding_dim=8,
      lstm_hidden_units=8, dropout_rate=0.0, train_batch_size=8, num_train_examples=64,
      optimizer='momentum', momentum=0.9, lr_schedule='constant', base_learning_rate=0.5,
      weight_decay=1e-3, moving_average_decay=0.9, gradient_clip_norm=gradient_clip_norm,
      model_dir=model_dir)
  data = DataConfig(data_dir=None, num_classes=2, num_train_examples=64, num_eval_examples=16,
                    image_size=0, fake_data=True, modality='text', max_seq_length=6,
                    vocab_size=30)
  return Config(model=model, data=data, mode='train', model_dir=model_dir, train_steps=2,
                eval_batch_size=8, steps_per_eval=1, iterations_per_loop=1,
                save_checkpoints_steps=1, keep_checkpoint_max=5,
                mirrored_devices=mirrored_devices)


def _train_to(config, step):
  estimator = estimator_lib.build_estimator(config)
  estimator.train(estimator_lib.input_fns(config, estimator)[0], max_steps=step)


def _variables(model_dir):
  checkpoint = tf.train.latest_checkpoint(model_dir)
  return {name: tf.train.load_variable(checkpoint, name)
          for name, _ in tf.train.list_variables(checkpoint)}


@pytest.mark.parametrize('gradient_clip_norm', split_cases(
    [1e-3], [0.0], 'the other runtime checks the same step with the other clip'))
def test_a_step_on_two_replicas_equals_a_step_on_the_whole_batch(tmp_path, gradient_clip_norm):
  """Gradients averaged (not summed) over replicas, the clip applied to the averaged gradient,
  weight decay counted once, and the EMA shadows and momentum slots updated as on one device."""
  single, mirrored = str(tmp_path / 'single'), str(tmp_path / 'mirrored')
  # Step 1 on one device; both runs take step 2 from that same checkpoint on the same examples
  # (the fake input restarts at example 0 with each train() call).
  _train_to(_text_config(single, (), gradient_clip_norm), 1)
  shutil.copytree(single, mirrored)
  before = _variables(single)
  _train_to(_text_config(single, (), gradient_clip_norm), 2)
  _train_to(_text_config(mirrored, CPUS, gradient_clip_norm), 2)
  one, two = _variables(single), _variables(mirrored)

  assert one['global_step'] == two['global_step'] == 2
  assert sorted(one) == sorted(two)
  assert any(name.endswith('/ExponentialMovingAverage') for name in one)
  for name in one:
    np.testing.assert_allclose(two[name], one[name], rtol=1e-4, atol=1e-6, err_msg=name)
  weights = [name for name in one if name != 'global_step'
             and not name.endswith(('/ExponentialMovingAverage', '/Momentum'))]
  moved = np.sqrt(sum(np.sum(np.square(one[n] - before[n])) for n in weights))
  assert moved > 1e-4  # the step did something
  if gradient_clip_norm:
    # Plain momentum after one earlier step: the update is lr * (clipped g + 0.9 * previous
    # clipped g), at most 0.5 * 1.9 * 1e-3 in norm.
    assert moved <= 0.5 * 1.9 * gradient_clip_norm * (1 + 1e-3)


@pytest.mark.one_runtime('TF 1.15\'s MirroredStrategy step (averaged gradients, the clip, weight '
                         'decay, EMA shadows, momentum) is checked against one device\'s in '
                         'test_a_step_on_two_replicas_...[0.001]; its evaluation, export and '
                         'batch-norm merge run on TF 2.15 only')
def test_trains_evaluates_and_exports_on_two_replicas(small_dir, tmp_path):
  """The whole CLI run with batch norm, the weight EMA, clipping and TensorBoard summaries."""
  model_dir = str(tmp_path / 'model')
  ok(run_main('--mirrored_devices=/cpu:0,/cpu:1', '--train_steps=12', '--steps_per_eval=6',
              '--moving_average_decay=0.99', '--gradient_clip_norm=5', '--data_dir=' + small_dir,
              '--model_dir=' + model_dir, '--export_dir=' + str(tmp_path / 'export'),
              '--mode=train_and_eval', *TINY))
  results = results_of(model_dir)
  assert results['global_step'] == 12
  assert results['mirrored_devices'] == list(CPUS)
  assert results['num_eval_examples'] == 300
  assert os.path.exists(os.path.join(results['export_path'], 'saved_model.pb'))
  checkpoint = tf.train.latest_checkpoint(model_dir)
  names = [name for name, _ in tf.train.list_variables(checkpoint)]
  # Batch-norm statistics are per replica while training; the checkpoint holds one copy (their
  # mean) and its moving average, under the single-device names.
  assert 'batch_normalization/moving_mean/ExponentialMovingAverage' in names
  assert not [name for name in names if 'replica_' in name]
  assert tf.io.gfile.glob(os.path.join(model_dir, 'events.out.tfevents.*'))


def test_refuses_bad_device_choices_before_training(small_dir, tmp_path):
  common = ['--data_dir=' + small_dir, '--model_dir=' + str(tmp_path / 'm'), '--train_steps=1']
  refused(run_main('--num_gpus=2', *common), 'GPU 1', 'TensorFlow sees 0 GPU')
  refused(run_main('--num_gpus=1', '--mirrored_devices=/cpu:0', *common), 'pass one')
  refused(run_main('--mirrored_devices=/cpu:0,/cpu:1', '--train_batch_size=33', *common),
          'not divisible by the 2 MirroredStrategy replicas')
  refused(run_main('--mirrored_devices=/tpu:0', *common), 'like /gpu:0,/gpu:1')
  refused(run_main('--num_gpus=2', '--use_tpu', '--tpu=grpc://127.0.0.1:1',
                   '--data_dir=gs://b/d', '--model_dir=gs://b/m', '--train_steps=1'),
          '--num_cores')
  cluster = {'chief': ['127.0.0.1:2222'], 'worker': ['127.0.0.1:2223']}
  refused(run_main('--mirrored_devices=/cpu:0,/cpu:1', *common,
                   env={'TF_CONFIG': json.dumps({'cluster': cluster,
                                                 'task': {'type': 'chief', 'index': 0}})}),
          'MirroredStrategy', 'Unset TF_CONFIG')
  assert not os.path.exists(str(tmp_path / 'm' / 'checkpoint'))
