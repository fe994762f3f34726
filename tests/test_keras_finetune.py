"""Training goes on after Estimator (Keras runtime): a ResNet trained by the pipeline (TF 1.15),
converted to Keras 3, fine-tunes with model.fit under MirroredStrategy on two logical CPUs on
real Fashion-MNIST: the evaluation loss falls and the accuracy holds or rises. InceptionV3's two
heads train too."""

import json
import os
import subprocess
import sys
import types

import numpy as np
import pytest

keras = pytest.importorskip('keras', minversion='3', reason='the Keras 3 runtime (.venv-keras)')

# pylint: disable=g-import-not-at-top,wrong-import-position
from flags import keras_flags
from helpers import REPO
from helpers import refused
from keras_models import datasets
from keras_runs import export_keras
from trainer import export_keras as export_keras_lib
from trainer import finetune_keras


def _finetune(*args):
  env = dict(os.environ, KERAS_BACKEND='tensorflow')
  return subprocess.run([sys.executable, '-m', 'trainer.finetune_keras'] + list(args), cwd=REPO,
                        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        universal_newlines=True, timeout=900)


def test_a_converted_resnet_fine_tunes_with_model_fit_on_two_replicas(pipeline_runs, small_dir,
                                                                     tmp_path):
  run = pipeline_runs('resnet')
  proc, _ = export_keras('--model_dir=' + run['model_dir'], '--serving_dir=',
                         '--output=' + str(tmp_path / 'resnet.keras'))
  assert proc.returncode == 0, proc.stderr[-3000:]
  output = str(tmp_path / 'tuned.keras')
  proc = _finetune('--model=' + str(tmp_path / 'resnet.keras'), '--data_dir=' + small_dir,
                   '--output=' + output, '--steps=120', '--batch_size=32', '--cpu_replicas=2',
                   '--log_every_steps=40', '--learning_rate=0.02')
  assert proc.returncode == 0, proc.stderr[-3000:]
  with open(str(tmp_path / 'tuned.results.json')) as f:
    results = json.load(f)
  print('fine-tuning: %s' % json.dumps({k: results[k] for k in ('before', 'after', 'train_loss',
                                                                'examples_per_sec')}))
  assert results['replicas'] == 2 and results['steps'] == 120
  assert results['after']['loss'] < results['before']['loss']
  assert results['after']['accuracy'] >= results['before']['accuracy']
  assert results['train_loss'][-1] < results['train_loss'][0]
  assert keras.saving.load_model(output).count_params() > 0

  proc = _finetune('--model=' + output, '--data_dir=' + small_dir,
                   '--output=' + str(tmp_path / 'x.h5'))
  refused(proc, 'give a path ending in .keras')


def test_inceptions_two_heads_train_and_its_eval_loss_is_the_main_heads(pipeline_runs, tiny_dir,
                                                                        tmp_path):
  """InceptionV3's auxiliary head learns the labels too; the evaluation's loss is the main
  head's cross-entropy (the pipeline's eval_loss), not the training loss with the aux term."""
  run = pipeline_runs('inception_v3')
  converted = str(tmp_path / 'inception.keras')
  export_keras_lib.convert(types.SimpleNamespace(
      model_dir=run['model_dir'], checkpoint=None, use_moving_average=None, output=converted,
      serving_dir='', check_predictions=None, check_input=None, tolerance=1e-4, overwrite=False,
      **{name: None for name in keras_flags.SETTINGS}, data_dir=None))
  results = finetune_keras.finetune(types.SimpleNamespace(
      model=converted, data_dir=tiny_dir, output=str(tmp_path / 'tuned.keras'), steps=4,
      batch_size=8, optimizer='momentum', learning_rate=0.001, aux_loss_weight=0.4,
      cpu_replicas=0, log_every_steps=2, seed=1, crop_padding=None, overwrite=False))
  assert results['steps'] == 4 and len(results['train_loss']) == 2
  model = keras.saving.load_model(converted)
  data = datasets.data_config(tiny_dir, tuple(model.input.shape[1:]))
  images, labels = zip(*datasets.eval_dataset(data, 25).as_numpy_iterator())
  logits = model.predict(np.concatenate(images), verbose=0)['logits']
  labels = np.concatenate(labels)
  shifted = logits - logits.max(axis=1, keepdims=True)
  xent = np.log(np.exp(shifted).sum(axis=1)) - shifted[np.arange(len(labels)), labels]
  assert len(labels) == 50
  assert abs(results['before']['loss'] - xent.mean()) < 1e-4
