"""Training goes on after Estimator (Keras runtime): a ResNet trained by the pipeline (TF 1.15),
converted to Keras 3, fine-tunes with `trainer.train_keras --init_model` under MirroredStrategy on
two logical CPUs on real Fashion-MNIST: scored on the evaluation split before and after, the loss
falls and the accuracy holds or rises. InceptionV3's two heads train too, and its scores are the
main head's."""

import json
import os
import subprocess
import sys
import types

import numpy as np
import pytest

keras = pytest.importorskip('keras', minversion='3', reason='the Keras 3 runtime (.venv-keras)')

# pylint: disable=g-import-not-at-top,wrong-import-position
from trainer import export_keras as export_keras_lib
from trainer.flags import keras_flags
from trainer.keras_models import datasets
from trainer.keras_run import job

from helpers import REPO
import keras_resume
from keras_runs import export_keras

# Fine-tuning as docs/migration.md shows it: a constant rate, no weight decay.
FINE_TUNING = ['--lr_schedule=constant', '--weight_decay=0', '--warmup_epochs=0']


@pytest.mark.xdist_group('resnet')
def test_a_converted_resnet_fine_tunes_on_two_replicas(pipeline_runs, small_dir, tmp_path):
  run = pipeline_runs('resnet')
  converted = str(tmp_path / 'resnet.keras')
  proc, _ = export_keras('--model_dir=' + run['model_dir'], '--serving_dir=',
                         '--output=' + converted)
  assert proc.returncode == 0, proc.stderr[-3000:]
  model_dir = str(tmp_path / 'tuned')
  proc = subprocess.run(
      [sys.executable, '-m', 'trainer.train_keras', '--init_model=' + converted,
       '--data_dir=' + small_dir, '--model_dir=' + model_dir, '--train_steps=60',
       '--train_batch_size=32', '--cpu_replicas=2', '--log_every_steps=20',
       '--save_checkpoints_steps=60', '--base_learning_rate=0.02', '--eval_batch_size=100'] +
      FINE_TUNING, cwd=REPO, env=dict(os.environ, KERAS_BACKEND='tensorflow'),
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=900)
  assert proc.returncode == 0, proc.stderr[-3000:]
  results = keras_resume.results(model_dir)
  print('fine-tuning: %s' % json.dumps({k: results[k] for k in (
      'before', 'accuracy', 'eval_loss', 'train_log')}))
  assert results['devices']['replicas'] == 2 and results['steps'] == 60
  assert results['init_model'] == converted and results['eval_examples'] == 300
  # Held-out accuracy rises; the held-out loss need not after 60 steps: on a Zen 3 (oneDNN held
  # to AVX2) this run went from 0.387 to 0.590 accuracy while its loss on the 300 examples went
  # from 1.607 to 1.712 (a few confident misses), where the AVX-512 hosts' runs had it fall.
  assert results['accuracy'] > results['before']['accuracy'], results
  losses = [e['loss'] for e in results['train_log']]
  assert len(losses) == 3 and losses[-1] < losses[0]
  assert 'before training: accuracy' in proc.stderr
  assert keras.saving.load_model(os.path.join(model_dir, job.MODEL_FILE)).count_params() > 0


@pytest.mark.xdist_group('inception_v3')
def test_inceptions_two_heads_train_and_its_scores_are_the_main_heads(pipeline_runs, tiny_dir,
                                                                       tmp_path):
  """InceptionV3's auxiliary head learns the labels too; the evaluation's loss is the main
  head's cross-entropy (the pipeline's eval_loss), not the training loss with the aux term."""
  run = pipeline_runs('inception_v3')
  converted = str(tmp_path / 'inception.keras')
  export_keras_lib.convert(types.SimpleNamespace(
      model_dir=run['model_dir'], checkpoint=None, use_moving_average=None, output=converted,
      serving_dir='', check_predictions=None, check_input=None, tolerance=1e-4, overwrite=False,
      **{name: None for name in keras_flags.SETTINGS}, data_dir=None))
  results = job.train(keras_resume.flags(
      str(tmp_path / 'tuned'), tiny_dir, init_model=converted, train_steps=4,
      lr_schedule='constant', base_learning_rate=0.001, weight_decay=0.0, label_smoothing=0.0))
  assert results['steps'] == 4 and len(results['train_log']) == 2
  model = keras.saving.load_model(converted)
  data = datasets.data_config(tiny_dir, tuple(model.input.shape[1:]))
  images, labels = zip(*datasets.eval_dataset(data, 25).as_numpy_iterator())
  logits = model.predict(np.concatenate(images), verbose=0)['logits']
  labels = np.concatenate(labels)
  shifted = logits - logits.max(axis=1, keepdims=True)
  xent = np.log(np.exp(shifted).sum(axis=1)) - shifted[np.arange(len(labels)), labels]
  assert len(labels) == 50 and results['eval_examples'] == 50
  assert abs(results['before']['loss'] - xent.mean()) < 1e-4
  assert results['before']['accuracy'] == float((logits.argmax(axis=1) == labels).mean())
