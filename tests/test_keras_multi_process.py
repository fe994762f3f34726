"""`trainer.train_keras --multi_host` with several processes on one machine, as on a TPU slice's
hosts (JAX's own multi-process tests do the same: jax/_src/test_multiprocess.py): 2 processes x 2
CPU devices each, the coordinator on localhost (the tests' loopback-only network namespace),
against 1 process x 4 devices on the same TFRecords or arrays, and those 4 replicas against one
device of the same host (--nodata_parallel)."""

import os
import signal
import subprocess
import sys

import numpy as np
import pytest

keras = pytest.importorskip('keras', minversion='3', reason='the Keras 3 runtime (.venv-keras)')

# pylint: disable=g-import-not-at-top,wrong-import-position
from trainer.keras_run import checkpoints

from helpers import free_ports
from helpers import REPO
import keras_resume

# Both runs are 4 replicas of the same global batches; only the all-reduce differs (across
# processes, or within one): float32 rounding.
TOLERANCE = 1e-5
# Data-parallel vs one device: the same global batch's mean loss and the same batch-norm
# statistics (JAX computes both over the global batch), summed in another order: float32
# rounding only.
DATA_PARALLEL_TOLERANCE = 1e-4
# SGD with momentum and a step schedule: the ResNet recipe's, on the small CNN.
_RUN = ['--recipe=resnet', '--image_size=28', '--train_batch_size=8',
        '--eval_batch_size=25', '--log_every_steps=2', '--save_checkpoints_steps=2',
        '--base_learning_rate=0.05', '--warmup_epochs=0', '--weight_decay=1e-4', '--seed=3']


def _start(data_dir, model_dir, devices, process=None, port=None, *args, processes=2,
           signal_at=None):
  """Starts trainer.train_keras (process `process` of `processes`, or alone); `signal_at`:
  (signal name, step) it sends itself (tests/train_keras_at_step.py)."""
  env = dict(os.environ, KERAS_BACKEND='jax',
             # Only make test TEST_MAX_ISA's cap of the inherited flags: the resume's tolerance
             # below was measured on XLA's optimised code (no conftest optimisation level).
             XLA_FLAGS=' '.join(['--xla_force_host_platform_device_count=%d' % devices] + [
                 f for f in os.environ.get('XLA_FLAGS', '').split()
                 if f.startswith('--xla_cpu_max_isa=')]))
  if process is not None:
    env.update(KERAS_DISTRIBUTION_JOB_ADDRESSES='localhost:%d' % port,
               KERAS_DISTRIBUTION_NUM_PROCESSES=str(processes),
               KERAS_DISTRIBUTION_PROCESS_ID=str(process))
    args = ('--multi_host',) + args
  command = [sys.executable, '-m', 'trainer.train_keras']
  if signal_at:
    command = [sys.executable, os.path.join(REPO, 'tests', 'train_keras_at_step.py'),
               signal_at[0], str(signal_at[1])]
  return subprocess.Popen(
      command + ['--data_dir=' + data_dir,
       '--model_dir=' + model_dir] + _RUN + list(args) +
      ([] if any(a.startswith('--network=') for a in args) else ['--model=cnn']) +
      ([] if any(a.startswith('--train_steps=') for a in args) else ['--train_steps=4']),
      cwd=REPO, env=env,
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)


def _finish(proc):
  """Waits for `proc` to exit 0; returns its stderr."""
  _, stderr = proc.communicate(timeout=600)
  assert proc.returncode == 0, stderr[-3000:]
  return stderr


# A user's network (examples/mobilenet_keras.py, batch norm included) on the TFRecords, the
# built-in CNN on the arrays.
USER_NETWORK = ('--network=examples.mobilenet_keras:mobilenet', '--network_params={"width": 0.5}')


@pytest.mark.parametrize('source, network', [('tfrecord', USER_NETWORK), ('arrays', ())],
                         ids=['tfrecord-user_network', 'arrays-cnn'])
def test_two_processes_of_two_devices_train_as_one_process_of_four(tiny_dir, tiny_arrays_dir,
                                                                   tmp_path, source, network):
  """Each process reads its half of every global batch (of tf.data, or of the arrays' stream);
  the weights after 4 steps (2 checkpoints) equal the one-process run's, and process 0 alone
  writes: process 1's model_dir (its own here, so that anything it wrote would show) stays
  without outputs. On the arrays (the same batches in every run), the one process's 4 replicas
  also match one device of the same host (--nodata_parallel): data parallelism's arithmetic."""
  data_dir = tiny_dir if source == 'tfrecord' else tiny_arrays_dir
  port, = free_ports(1)
  chief, other, single = (str(tmp_path / n) for n in ('chief', 'other', 'single'))
  procs = [_start(data_dir, chief, 2, 0, port, *network),
           _start(data_dir, other, 2, 1, port, *network)]
  for proc in procs:
    _finish(proc)
  _finish(_start(data_dir, single, 4, None, None, *network))
  assert keras_resume.results(single)['devices']['replicas'] == 4
  results = keras_resume.results(chief)
  assert results['input'] == source and results['devices']['replicas'] == 4
  assert len(results['devices']['devices']) == 4
  losses = [[e['loss'] for e in keras_resume.results(d)['train_log']] for d in (chief, single)]
  print('2 processes x 2 devices vs 1 x 4: losses %s vs %s' % tuple(losses))
  np.testing.assert_allclose(losses[0], losses[1], atol=TOLERANCE)
  # Equal weights within float32 rounding: a borderline example may flip (1 of 50 = 0.02).
  assert results['accuracy'] == pytest.approx(keras_resume.results(single)['accuracy'], abs=0.021)
  for got, want in zip(keras_resume.weights(chief), keras_resume.weights(single)):
    np.testing.assert_allclose(got, want, atol=TOLERANCE)
  assert sorted(os.listdir(os.path.join(chief, 'checkpoints'))) == [
      'checkpoint.json', 'ckpt-2.weights.h5', 'ckpt-4.weights.h5']
  written = [os.path.join(root, name) for root, _, names in os.walk(other) for name in names]
  assert written == [], written
  if source == 'arrays':
    one = str(tmp_path / 'one_device')
    stderr = _finish(_start(data_dir, one, 4, None, None, '--nodata_parallel', *network))
    assert 'step 4/4: loss' in stderr and 'examples/sec, ETA' in stderr
    assert keras_resume.results(one)['devices']['replicas'] == 1
    one_losses = [e['loss'] for e in keras_resume.results(one)['train_log']]
    print('JAX, 4 devices vs 1: losses %s vs %s' % (losses[1], one_losses))
    np.testing.assert_allclose(losses[1], one_losses, atol=DATA_PARALLEL_TOLERANCE)
    replicated, alone = keras_resume.weights(single), keras_resume.weights(one)
    assert len(replicated) == len(alone)
    for got, want in zip(replicated, alone):
      np.testing.assert_allclose(got, want, atol=DATA_PARALLEL_TOLERANCE)


@pytest.mark.parametrize('process, message', [
    (0, 'error: --multi_host: did not join localhost:%d within 5 s'),
    (2, 'KERAS_DISTRIBUTION_PROCESS_ID=2 is not a process of KERAS_DISTRIBUTION_NUM_PROCESSES=2')])
def test_a_process_alone_or_out_of_range_exits_with_the_reason(tiny_dir, tmp_path, process,
                                                               message):
  """Process 0 of 2 whose partner never starts gives up after --multi_host_timeout, naming the
  coordinator, instead of waiting in JAX; an id outside the count is refused at once."""
  port, = free_ports(1)
  proc = _start(tiny_dir, str(tmp_path / 'model'), 2, process, port, '--multi_host_timeout=5')
  _, stderr = proc.communicate(timeout=120)
  assert proc.returncode == 2 and (message.replace('%d', str(port)) in stderr), stderr[-3000:]
  assert not (tmp_path / 'model').exists()


def test_processes_given_other_counts_or_no_cluster_are_refused(tiny_dir, tmp_path):
  """Process 1 told of 3 processes where the coordinator waits for 2: JAX would join them as 2
  and train; both exit 2 instead. And --multi_host with no coordinator in the environment on a
  machine that is no Cloud TPU: JAX's ValueError becomes what to set."""
  port, = free_ports(1)
  model_dir = str(tmp_path / 'model')
  procs = [_start(tiny_dir, model_dir, 2, 0, port, '--multi_host_timeout=60'),
           _start(tiny_dir, model_dir, 2, 1, port, '--multi_host_timeout=60', processes=3)]
  for proc in procs:
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 2, stderr[-3000:]
    assert ('the processes differ in the number of processes they were given '
            '(KERAS_DISTRIBUTION_NUM_PROCESSES; 2 joined) (2, 3, by process)') in stderr
  assert not os.path.exists(os.path.join(model_dir, 'checkpoints'))
  proc = _start(tiny_dir, model_dir, 2, None, None, '--multi_host')
  _, stderr = proc.communicate(timeout=120)
  assert proc.returncode == 2 and 'error: --multi_host found no other hosts' in stderr, stderr
  assert 'KERAS_DISTRIBUTION_JOB_ADDRESSES' in stderr


def test_a_host_stopped_or_killed_then_both_restarted_resume_to_the_same_weights(tiny_dir,
                                                                                tmp_path):
  """A SIGTERM to process 1 alone after step 3: both processes stop at the end of that logged
  period (step 4), with one checkpoint, and exit 75. Both restarted; kill -9 of process 1 after
  step 7 (its checkpoint at 6 written), then of process 0, which waits for it in a collective (a
  slice restarts all its hosts); both started again on their shared model_dir: the run resumes
  from step 6 (process 0 takes its dead lease over) and ends within 1e-5 of an uninterrupted
  run of one process of 4 devices (1.5e-6 measured: the all-reduce's float rounding across
  topologies; a second pair of processes, compared exactly, costs two more starts). A resume on
  other batches or at another step misses by far more. Each process signals itself at its step:
  no timing is guessed."""
  steps = '--train_steps=10'
  port, = free_ports(1)
  chief, whole = str(tmp_path / 'shared'), str(tmp_path / 'whole')
  procs = [_start(tiny_dir, chief, 2, 0, port, steps),
           _start(tiny_dir, chief, 2, 1, port, steps, signal_at=('SIGTERM', 3))]
  errors = [proc.communicate(timeout=300)[1] for proc in procs]
  assert [proc.returncode for proc in procs] == [75, 75], errors[0][-3000:] + errors[1][-3000:]
  assert 'SIGTERM to another process of the run' in errors[0], errors[0][-3000:]
  for stderr in errors:
    assert 'checkpoint at step 4 in' in stderr, stderr[-3000:]
  assert checkpoints.Checkpoints(os.path.join(chief, 'checkpoints')).latest() == 4
  port, = free_ports(1)
  procs = [_start(tiny_dir, chief, 2, 0, port, steps),
           _start(tiny_dir, chief, 2, 1, port, steps, signal_at=('SIGKILL', 7))]
  procs[1].communicate(timeout=300)
  assert procs[1].returncode == -signal.SIGKILL
  procs[0].kill()
  procs[0].communicate()
  assert checkpoints.Checkpoints(os.path.join(chief, 'checkpoints')).latest() == 6
  port, = free_ports(1)
  procs = [_start(tiny_dir, chief, 2, i, port, steps) for i in (0, 1)]
  for proc in procs:
    _finish(proc)
  # Uninterrupted: one process of 4 devices, which 2 x 2 equals within TOLERANCE (the test above).
  _finish(_start(tiny_dir, whole, 4, None, None, steps))
  resumed = keras_resume.results(chief)
  assert resumed['resumed_from_step'] == 6 and resumed['steps'] == 10
  worst = max(float(np.abs(got - want).max()) for got, want in zip(
      keras_resume.weights(chief), keras_resume.weights(whole)))
  print('stopped at step 4, killed after 7, resumed from 6: largest weight difference %.3g'
        % worst)
  assert worst <= TOLERANCE
