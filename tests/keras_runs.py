"""Runs of this pipeline for the Keras 3 migration tests: trained and predicted by the pipeline's
own runtimes (TF 1.15 and TF 2.15, which have tf.estimator), converted by the Keras runtime
(TF 2.21 + Keras 3 + JAX, which has not). `make test` names the runtimes in PIPELINE_PYTHON_TF1 and
PIPELINE_PYTHON_TF2; by default they are the repository's .venv and .venv-tf2."""

import json
import os
import platform
import subprocess
import types

import pytest

import forked_main
from helpers import main_args
from helpers import ok
from helpers import REPO
from helpers import TINY_BY_MODEL
from helpers import USER_NETWORK

# The Keras runtime's interpreter, for the tests that run on another one (the docs' checks), and
# the commands that need it.
KERAS_PYTHON = os.environ.get('KERAS_PYTHON', os.path.join(REPO, '.venv-keras', 'bin', 'python'))
KERAS_COMMANDS = ('trainer.export_keras', 'trainer.train_keras', 'trainer.train_torch')
PIPELINE_PYTHONS = {
    'tf1': os.environ.get('PIPELINE_PYTHON_TF1', os.path.join(REPO, '.venv', 'bin', 'python')),
    'tf2': os.environ.get('PIPELINE_PYTHON_TF2', os.path.join(REPO, '.venv-tf2', 'bin', 'python')),
    # intel-tensorflow 1.15.2, the main job's runtime on x86-64 Linux (`make test` creates it
    # there; elsewhere there is none and stock TF 1.15 stands in).
    'tf1-mkl': os.environ.get('PIPELINE_PYTHON_TF1_MKL', os.path.join(
        REPO, '.venv-mkl' if platform.system() == 'Linux' and platform.machine() == 'x86_64'
        else '.venv', 'bin', 'python')),
}
# Each network trains on real data on one of the two runtimes (both must convert), at the tests'
# tiny settings, long enough for logits that are not all alike: (runtime, network, data fixture,
# steps, network flags, flags of the training run only). The ResNets keep weight moving averages
# (the pipeline predicts with them, so the converter must read them), InceptionV3 does not (its
# recipe's 0.9999 would leave them at the initial weights after 10 steps); the BiLSTMs cover stacked
# layers and the pooling modes; two runs export today's SavedModel to compare the serving exports.
RUNS = {
    'resnet': ('tf1', 'resnet', 'small_dir', 30, ['--moving_average_decay=0.9'], ['--export_dir']),
    'cnn': ('tf2', 'cnn', 'small_dir', 20, [], []),
    'bilstm': ('tf1', 'bilstm', 'text_small_dir', 20, ['--lstm_layers=2', '--lstm_pooling=max'],
               ['--export_dir']),
    'bilstm_final': ('tf2', 'bilstm', 'text_small_dir', 20, ['--lstm_pooling=final'], []),
    # A network this pipeline never saw (examples/mobilenet.py), converted through its Keras twin.
    'mobilenet': ('tf2', USER_NETWORK, 'small_dir', 40, [], ['--base_learning_rate=0.01']),
}
# The Keras twin of each run of a user's network (trainer.export_keras --keras_network).
KERAS_TWINS = {'mobilenet': 'examples.mobilenet_keras:mobilenet'}
# The image networks on an image folder (3-channel PNGs of grey images, as `trainer.prepare
# image_folder` stores a folder tree: crop-and-resize preprocessing), trained by intel-tensorflow,
# whose fused Conv2D + BiasAdd + Elu computed the CNN's ELU as ReLU (trainer/run/tf_build.py).
# InceptionV3 trains only here (its graph is the suite's costliest: one run of it, not two): its
# conversion runs on all three backends, TF 2.15's checkpoints of the same format being the other
# runs'; TF 2.15 trains, exports and predicts it in tests/test_main.py.
FOLDER_RUNS = {
    'cnn_folder': ('tf1-mkl', 'cnn', 'folder_dir', 20, [], []),
    'resnet_folder': ('tf1-mkl', 'resnet', 'folder_dir', 20, ['--moving_average_decay=0.9'], []),
}
RUNS.update(FOLDER_RUNS)
RUNS['inception_v3'] = ('tf1-mkl', 'inception_v3', 'folder_dir', 10, ['--moving_average_decay=0'],
                        ['--base_learning_rate=0.035', '--gradient_clip_norm=5',
                         '--warmup_epochs=0'])
# A ResNet-50 (bottleneck blocks), converted to PyTorch only (tests/test_keras_to_pytorch.py): the
# Keras converter reads the same layout as the ResNet-18's, which its tests cover.
PYTORCH_RUNS = {
    'resnet50': ('tf2', 'resnet', 'tiny_dir', 10, ['--resnet_depth=50', '--moving_average_decay=0.9'],
                 []),
}
RUNS.update(PYTORCH_RUNS)


def pipeline(runtime, module, *args, timeout=900):
  """Runs `python -m MODULE ARGS` on a pipeline runtime ('tf1' or 'tf2'); returns the
  CompletedProcess."""
  python = PIPELINE_PYTHONS[runtime]
  if not os.path.exists(python):
    pytest.fail('the pipeline runtime %s (%s) is missing: `make test` creates it' % (runtime,
                                                                                       python))
  env = {k: v for k, v in os.environ.items() if not k.startswith('KERAS_')}
  # make test TEST_MAX_ISA's cap of the Keras runtime's XLA: the pipeline runtimes' XLA is older
  # and stops at a flag it does not know.
  env['XLA_FLAGS'] = ' '.join(f for f in env.get('XLA_FLAGS', '').split()
                              if not f.startswith('--xla_cpu_max_isa='))
  args = main_args(args) if module == 'trainer.main' else list(args)
  return subprocess.run([python, '-m', module] + args, cwd=REPO, env=env,
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                        timeout=timeout)


def train_and_predict(name, data_dir, model_dir):
  """Trains RUNS[name] into model_dir and predicts its data's validation split with logits.

  Returns:
    dict: model_dir, data_dir, runtime, predict_input, predictions (the JSON-lines path),
    export_dir (today's SavedModel, or None).
  """
  runtime, network, _, steps, network_args, train_args = RUNS[name]
  export_dir = os.path.join(model_dir, 'export') if '--export_dir' in train_args else None
  train_args = ['--export_dir=' + export_dir if a == '--export_dir' else a for a in train_args]
  common = list(TINY_BY_MODEL[network][0]) + network_args + ['--seed=1',
      '--data_dir=' + data_dir, '--model_dir=' + model_dir]
  # One checkpoint kept (the tests convert the last): InceptionV3's step-0 one is 258 MB.
  ok(pipeline(runtime, 'trainer.main', *common, '--mode=train', '--train_steps=%d' % steps,
              '--skip_host_call', '--keep_checkpoint_max=1', *train_args))
  predict_input = os.path.join(data_dir, 'validation-*')
  predictions = os.path.join(model_dir, 'predictions.jsonl')
  ok(pipeline(runtime, 'trainer.main', *common, '--mode=predict', '--predict_logits',
              '--predict_input=' + predict_input, '--predict_output=' + predictions))
  return {'model_dir': model_dir, 'data_dir': data_dir, 'runtime': runtime,
          'predict_input': predict_input, 'predictions': predictions, 'export_dir': export_dir}


def export_keras(*args, backend='tensorflow', timeout=600):
  """Runs `python -m trainer.export_keras ARGS` on this (the Keras) runtime with KERAS_BACKEND
  `backend`; returns (CompletedProcess, the printed summary dict or None)."""
  env = dict(os.environ, KERAS_BACKEND=backend)
  # Forked from a process that imported the command (tests/forked_main.py) on the TensorFlow
  # backend; a fresh interpreter on the others.
  proc = forked_main.run(['-m', 'trainer.export_keras'] + list(args), env, timeout)
  lines = proc.stdout.strip().splitlines()
  return proc, (json.loads(lines[-1]) if proc.returncode == 0 and lines else None)


def export_flags(**values):
  """trainer.export_keras's parsed flag values as `export_keras.convert` reads them, for a
  conversion in the test's own process (the command line has tests of its own): every flag unset
  but the defaults below and `values` (serving_dir '': no serving SavedModel beside a .keras)."""
  from trainer.flags import keras_flags  # pylint: disable=g-import-not-at-top  # Keras suite only
  unset = keras_flags.SETTINGS + ('model_dir', 'checkpoint', 'use_moving_average',
                                  'check_predictions', 'check_input', 'data_dir', 'upgrade')
  flags = dict({name: None for name in unset}, tolerance=1e-4, overwrite=False, serving_dir='')
  flags.update(values)
  return types.SimpleNamespace(**flags)
