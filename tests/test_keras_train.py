"""Training with Keras 3 on every backend (`trainer.train_keras`, Keras runtime), on real
Fashion-MNIST, without an accelerator (data parallelism on forced JAX host devices:
tests/test_keras_multi_process.py): every backend trains on its input's batches in order; a run
stopped by SIGTERM or killed resumes to the weights of an uninterrupted run (bit for bit, on
TensorFlow from TFRecords and on JAX from arrays without TensorFlow), also when killed by the
random-kill harness (tests/kill_harness.py); torch trains from the command line; outputs are not
replaced without --overwrite. The CNN at batch 8 keeps every run to a few seconds
of steps."""

import json
import os
import re
import signal
import subprocess
import sys
import types
import uuid

import numpy as np
import pytest

keras = pytest.importorskip('keras', minversion='3', reason='the Keras 3 runtime (.venv-keras)')

# pylint: disable=g-import-not-at-top,wrong-import-position
from stalled_runs import stopped_at
from stalled_runs import storage_blob
from stalled_runs import take_over

from trainer.keras_run import job

from helpers import needs_gcs
from helpers import refused
from helpers import REPO
import keras_resume
from keras_runs import KERAS_TWINS

USER_KERAS_NETWORK = KERAS_TWINS['mobilenet']
# SGD with momentum and a step schedule: the ResNet recipe's, on the small CNN.
_RUN = ['--model=cnn', '--recipe=resnet', '--train_batch_size=8', '--eval_batch_size=25',
        '--log_every_steps=2', '--save_checkpoints_steps=2', '--base_learning_rate=0.05',
        '--warmup_epochs=0', '--weight_decay=1e-4', '--seed=3']


def _train(backend, model_dir, data_dir, *args, env=None):
  env = dict(os.environ, KERAS_BACKEND=backend, **(env or {}))
  return subprocess.run(
      [sys.executable, '-m', 'trainer.train_keras', '--model_dir=' + model_dir,
       '--data_dir=' + data_dir] + _RUN + list(args), cwd=REPO, env=env,
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=600)


def _resume_in_fresh_process(data_dir, tmp_path, tolerance, backend, without_tensorflow=False,
                             loss_tolerance=None, env=None, **overrides):
  tests = os.path.dirname(os.path.abspath(__file__))
  script = ('import sys; sys.path.insert(0, %r); import keras_resume; '
            'keras_resume.resume_scenario(%r, %r, %r, %r, **%r)'
            % (tests, data_dir, str(tmp_path), tolerance, loss_tolerance, overrides))
  env = dict(os.environ, KERAS_BACKEND=backend, **(env or {}))
  if without_tensorflow:
    env.update(_without_tensorflow())
  proc = subprocess.run([sys.executable, '-c', script], cwd=REPO, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, universal_newlines=True, timeout=600, env=env)
  assert proc.returncode == 0, proc.stderr[-4000:]
  assert 'RESUMED within' in proc.stdout
  print(proc.stdout.strip().splitlines()[-1])
  return proc


@pytest.mark.parametrize('cpu_replicas', [0, 2])
def test_a_run_resumes_after_sigterm_and_after_a_kill(tiny_dir, tmp_path, cpu_replicas):
  """TFRecords through tf.data, TensorFlow backend, in a fresh process as each run of the command
  is (a pytest worker that converted other models before differs in TensorFlow's process-wide
  random state). A SIGTERM after step 3 (off the checkpoint grid of 2) saves step 3 and stops; a
  kill after step 5 loses step 5 and resumes from the checkpoint at 4. Both end with the weights
  of the uninterrupted run bit for bit: the same batches, optimizer slots and learning rates (the
  step decay at epoch 0.5 = step 4 falls between the stops). The same under MirroredStrategy on
  2 logical CPUs, where Keras builds the model from a batch of a first iteration of the input
  and trains on a second (trainer/keras_run/inputs.py): until each iteration got a pipeline of
  its own, 4 of 12 resumes and 1 of 18 uninterrupted runs trained on other batches."""
  _resume_in_fresh_process(tiny_dir, tmp_path, 0.0, 'tensorflow', cpu_replicas=cpu_replicas)


def test_your_network_trains_on_two_jax_devices_and_resumes_bit_for_bit(tiny_arrays_dir,
                                                                         tmp_path):
  """A network this pipeline never saw (--network: examples/mobilenet_keras.py, the Keras twin
  of examples/mobilenet.py) trains with the run's recipe, data-parallel over two JAX devices,
  and a run stopped by SIGTERM and killed resumes to the uninterrupted run's weights."""
  two_devices = {'XLA_FLAGS': os.environ.get('XLA_FLAGS', '') +
                 ' --xla_force_host_platform_device_count=2'}
  _resume_in_fresh_process(tiny_arrays_dir, tmp_path, 0.0, 'jax', env=two_devices,
                           model=USER_KERAS_NETWORK, network_params='{"width": 0.5}')
  whole = keras_resume.results(os.path.join(str(tmp_path), 'whole'))
  assert whole['devices']['replicas'] == 2, whole['devices']


def test_arrays_train_without_tensorflow_and_resume_bit_for_bit(tiny_arrays_dir, tmp_path):
  """The arrays input on JAX in processes where `import tensorflow` fails: the same SIGTERM and
  kill as above, and the resumed run's weights equal the uninterrupted run's bit for bit (batch
  b of the arrays' stream depends on (seed, b) alone)."""
  _resume_in_fresh_process(tiny_arrays_dir, tmp_path, 0.0, 'jax', without_tensorflow=True)
  with open(os.path.join(str(tmp_path), 'whole', job.RESULTS_FILE)) as f:
    whole = json.load(f)
  assert whole['input'] == 'arrays' and whole['tensorflow_version'] is None
  assert whole['eval_examples'] == 50
  assert any(n.startswith('events.') for n in os.listdir(os.path.join(str(tmp_path), 'whole',
                                                                      'train')))


@pytest.mark.parametrize('backend', ['jax', 'torch', 'tensorflow'])
def test_every_backend_trains_on_the_streams_batches_in_order(tiny_dir, backend):
  """TFRecords through tf.data: 3 logged periods of 2 steps train on exactly the stream's first
  6 batches (the sum of their pixels), on every backend. Given the dataset itself, JAX and
  PyTorch restarted (and so reshuffled) it at each period."""
  tests = os.path.dirname(os.path.abspath(__file__))
  script = ('import sys; sys.path.insert(0, %r); import keras_resume; '
            'keras_resume.stream_scenario(%r)' % (tests, tiny_dir))
  proc = subprocess.run([sys.executable, '-c', script], cwd=REPO, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, universal_newlines=True, timeout=600,
                        env=dict(os.environ, KERAS_BACKEND=backend))
  assert proc.returncode == 0, proc.stderr[-4000:]
  line = proc.stdout.strip().splitlines()[-1]
  print(backend, line)
  seen, expected = (float(v) for v in re.findall(r'[\d.]+', line))
  assert seen == expected


def _without_tensorflow():
  """The environment of a process that cannot import TensorFlow (tests/without_tensorflow)."""
  tests = os.path.dirname(os.path.abspath(__file__))
  return {'PYTHONPATH': os.pathsep.join([os.path.join(tests, 'without_tensorflow'), REPO])}


def test_torch_trains_from_the_command_line_and_outputs_are_not_replaced(tiny_arrays_dir,
                                                                          tmp_path):
  """PyTorch from arrays, where TensorFlow cannot be imported (as on a GPU machine without it)."""
  model_dir = str(tmp_path / 'torch')
  proc = _train('torch', model_dir, tiny_arrays_dir, '--train_steps=2', env=_without_tensorflow())
  assert proc.returncode == 0, proc.stderr[-3000:]
  results = keras_resume.results(model_dir)
  assert results['devices']['backend'] == 'torch' and results['eval_examples'] == 50
  assert results['tensorflow_version'] is None and results['input'] == 'arrays'
  assert 0 <= results['accuracy'] <= 1 and len(results['train_log']) == 1
  assert os.path.exists(os.path.join(model_dir, job.MODEL_FILE))
  assert any(n.startswith('events.') for n in os.listdir(os.path.join(model_dir, 'train')))
  refused(_train('torch', model_dir, tiny_arrays_dir, '--train_steps=2'),
          'already holds', '--overwrite')
  refused(_train('torch', str(tmp_path / 'x'), tiny_arrays_dir, '--cpu_replicas=2'),
          '--cpu_replicas needs KERAS_BACKEND=tensorflow')


def test_killed_anywhere_the_run_ends_with_the_uninterrupted_weights_bit_for_bit(tiny_arrays_dir,
                                                                               tmp_path):
  """The random-kill harness (tests/kill_harness.py) on trainer.train_keras, JAX from arrays:
  kill -9 or SIGTERM after a logged period or before a staged rename (of a checkpoint's weights
  or state, model.keras, results.json), up to 4 times, each followed by the same command; the
  run ends with model.keras equal to an uninterrupted run's, bit for bit."""
  from kill_harness import KILLED  # pylint: disable=g-import-not-at-top
  from kill_harness import run_until_done  # pylint: disable=g-import-not-at-top
  whole, killed = str(tmp_path / 'whole'), str(tmp_path / 'killed')
  proc = _train('jax', whole, tiny_arrays_dir, '--train_steps=12')
  assert proc.returncode == 0, proc.stderr[-3000:]
  history = run_until_done(
      'trainer.train_keras', ['--model_dir=' + killed, '--data_dir=' + tiny_arrays_dir] + _RUN +
      ['--train_steps=12'], 21, {'keras_step': 3, 'rename': 4},
      env=dict(os.environ, KERAS_BACKEND='jax'))
  print('train_keras: %s' % history)
  assert sum(status in KILLED['trainer.train_keras'] for _, status in history) >= 2, history
  for a, b in zip(keras_resume.weights(whole), keras_resume.weights(killed)):
    np.testing.assert_array_equal(a, b)
  assert keras_resume.results(killed)['steps'] == 12
  left = [os.path.relpath(os.path.join(d, n), killed) for d, _, names in os.walk(killed)
          for n in names if 'partial' in n or n.startswith(('tmp-', 'writer.lease'))]
  assert not left, left


@needs_gcs
def test_on_gcs_a_stalled_run_names_no_checkpoint_after_a_takeover(tiny_arrays_dir):
  """gs://, JAX from arrays: trainer.train_keras stopped (SIGSTOP) inside its second checkpoint
  (step 4: weights written, lease checked, checkpoint.json not yet); another run takes the lease
  over and writes checkpoint.json (as its start does, claiming it). The stalled run, resumed, is
  refused and stops with LeaseLost (status 2): checkpoint.json stays the new holder's (with a
  staged write the stale one landed and the run trained on), and the stalled run's weights carry
  its run's name, so they can overwrite no other run's."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  model_dir = 'gs://bkt/keras-%s' % uuid.uuid4().hex[:12]
  theirs = json.dumps({'step': 4, 'weights': 'ckpt-0ther000-4.weights.h5', 'seeds': []}) + '\n'
  args = ['--model_dir=' + model_dir, '--data_dir=' + tiny_arrays_dir] + _RUN + [
      '--train_steps=12']
  with stopped_at('keras_checkpoint:2:STOP', args, 'trainer.train_keras',
                  dict(os.environ, KERAS_BACKEND='jax')) as stalled:
    take_over(model_dir)
    storage_blob(model_dir, 'checkpoints/checkpoint.json').upload_from_string(theirs)
    os.kill(stalled.proc.pid, signal.SIGCONT)
    assert stalled.proc.wait(120) == 2, stalled.stderr[-3000:]
  assert "this run lost the writer's lease of --model_dir=%s" % model_dir in stalled.stderr, \
      stalled.stderr[-3000:]
  state = storage_blob(model_dir, 'checkpoints/checkpoint.json').download_as_bytes().decode()
  assert state == theirs
  names = tf.io.gfile.listdir(model_dir + '/checkpoints')
  assert sorted(n for n in names if n.startswith('ckpt-')) == sorted(
      n for n in names if re.match(r'ckpt-[0-9a-f]{8}-[24]\.weights\.h5$', n)), names
  assert len([n for n in names if n.startswith('ckpt-')]) == 2, names


@needs_gcs
def test_on_gcs_a_stalled_run_replaces_no_newer_model_after_a_takeover(tiny_arrays_dir):
  """gs://, JAX from arrays: trainer.train_keras stopped (SIGSTOP) after training, its lease
  checked, right before it writes model.keras; another run takes the lease over (and, still
  training, has written no model.keras yet). The stalled run, resumed, is refused and stops with
  LeaseLost (status 2), writing no model.keras: a fenced file that does not exist yet is
  written only after a read of the lease (written after a check only, the stale one landed)."""
  model_dir = 'gs://bkt/keras-%s' % uuid.uuid4().hex[:12]
  args = ['--model_dir=' + model_dir, '--data_dir=' + tiny_arrays_dir] + _RUN + [
      '--train_steps=2']
  with stopped_at('keras_model:1:STOP', args, 'trainer.train_keras',
                  dict(os.environ, KERAS_BACKEND='jax')) as stalled:
    take_over(model_dir)
    os.kill(stalled.proc.pid, signal.SIGCONT)
    assert stalled.proc.wait(120) == 2, stalled.stderr[-3000:]
  assert "this run lost the writer's lease of --model_dir=%s" % model_dir in stalled.stderr, \
      stalled.stderr[-3000:]
  assert not storage_blob(model_dir, 'model.keras').exists()


def test_under_a_strategy_every_iteration_of_the_input_is_the_stream(tiny_dir):
  """What Keras' `fit` does under a tf.distribute strategy: one iteration of the training input
  to build the model, abandoned, then a second to train on. The second must begin with the
  stream's own first batches, however far the first one read (here past the 8-batch epoch of the
  64 training images, where a shared shuffle seed generator moves on)."""
  from trainer.keras_run import inputs  # pylint: disable=g-import-not-at-top
  config = keras_resume.flags(None, tiny_dir)
  probe = types.SimpleNamespace(output=None)  # one head: targets are the one-hot labels
  dataset = inputs.TFRecordInput(config, (28, 28, 3), under_strategy=True).train(probe, 8, 0)
  first = iter(dataset)
  for _ in range(12):
    next(first)
  second = [x.numpy() for (x, _), _ in zip(dataset, range(3))]
  fresh = inputs.TFRecordInput(config, (28, 28, 3), under_strategy=True).train(probe, 8, 0)
  expected = [x.numpy() for (x, _), _ in zip(fresh, range(3))]
  del first
  for got, want in zip(second, expected):
    np.testing.assert_array_equal(got, want)
