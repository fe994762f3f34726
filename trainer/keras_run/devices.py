"""Data parallelism of a Keras 3 run, per backend:
  TensorFlow  tf.distribute.MirroredStrategy over several GPUs, or over `cpu_replicas` logical
              CPU devices, the model built and compiled under its scope; one device: none;
  JAX         keras.distribution.DataParallel over every device (keras.distribution.list_devices);
              with `multi_host`, keras.distribution.initialize() first, so that the devices of
              every host of a slice (one process per host) form one mesh and each host reads its
              share of each global batch (trainer/keras_run/inputs.py);
  PyTorch     one device: Keras' torch backend picks the GPU when there is one, else the CPU.
Each replica gets global_batch / replicas examples; the loss is the global batch's mean.
"""

import contextlib
import os
import sys
import threading

from absl import logging
import keras

from trainer.errors import EXIT_USAGE
from trainer.errors import PipelineError


class Devices:
  """Where a run trains. `scope()` is the context to build and compile the model in;
  `replicas` the number of data-parallel replicas; `processes` of the run (JAX multi-host: one
  per host); `describe()` a dict for results.json."""

  def __init__(self, backend, replicas, strategy=None, distribution=None, names=(), processes=1):
    self.backend = backend
    self.replicas = replicas
    self.processes = processes
    self.strategy = strategy
    self.distribution = distribution
    self.names = list(names)

  def scope(self):
    return self.strategy.scope() if self.strategy else contextlib.nullcontext()

  def describe(self):
    return {'backend': self.backend, 'replicas': self.replicas, 'devices': self.names}

  def wait_for_all(self, name):
    """Returns once every process of a multi-process JAX run has called it with `name` (a
    barrier); at once in one process."""
    if self.processes > 1:
      from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top
      multihost_utils.sync_global_devices(name)

  def any_everywhere(self, flag):
    """Whether `flag` (bool) is true in any process of a multi-process JAX run (a collective:
    every process calls it at the same point); `flag` itself in one process."""
    if self.processes == 1:
      return flag
    from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top
    import numpy as np  # pylint: disable=g-import-not-at-top
    return bool(np.any(multihost_utils.process_allgather(np.asarray(flag, np.int32))))

  def check_same_everywhere(self, value, what, advice):
    """Raises PipelineError unless every process of a multi-process JAX run has the same int
    `value` (a collective: every process calls it); nothing to check in one process."""
    if self.processes == 1:
      return
    from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top
    import numpy as np  # pylint: disable=g-import-not-at-top
    values = multihost_utils.process_allgather(np.asarray(value, np.int64))
    if len(set(int(v) for v in np.ravel(values))) > 1:
      raise PipelineError('--multi_host: the processes differ in %s (%s, by process): %s.'
                          % (what, ', '.join(str(int(v)) for v in np.ravel(values)), advice))


def strategy_of(cpu_replicas):
  """The tf.distribute strategy to build and train under (TensorFlow backend); None on others.

  Logical CPU devices must be configured before TensorFlow initialises its devices, so this runs
  before anything touches a tensor.

  Raises:
    PipelineError: cpu_replicas on another backend.
  """
  if keras.backend.backend() != 'tensorflow':
    if cpu_replicas:
      raise PipelineError('--cpu_replicas needs KERAS_BACKEND=tensorflow (the backend is %s); '
                          'drop it to train on the default device.' % keras.backend.backend())
    return None
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  if cpu_replicas:
    cpu = tf.config.list_physical_devices('CPU')[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * cpu_replicas)
    return tf.distribute.MirroredStrategy(['/cpu:%d' % i for i in range(cpu_replicas)])
  return tf.distribute.MirroredStrategy()


# keras.distribution.initialize() reads these (Keras' distribution_lib.initialize); on a Cloud
# TPU JAX finds the hosts itself and they stay unset.
COORDINATOR_ENV = 'KERAS_DISTRIBUTION_JOB_ADDRESSES'
PROCESSES_ENV = 'KERAS_DISTRIBUTION_NUM_PROCESSES'
PROCESS_ID_ENV = 'KERAS_DISTRIBUTION_PROCESS_ID'


def _check_processes(environ):
  """Refuses a process id outside [0, processes) or one of the two without the other."""
  processes, process_id = environ.get(PROCESSES_ENV), environ.get(PROCESS_ID_ENV)
  if (processes is None) != (process_id is None):
    raise PipelineError('--multi_host: set both %s and %s (or neither, on a Cloud TPU).'
                        % (PROCESSES_ENV, PROCESS_ID_ENV))
  if processes is None:
    return
  try:
    count, index = int(processes), int(process_id)
  except ValueError:
    count = index = -1
  if not 0 <= index < count:
    raise PipelineError('--multi_host: %s=%s is not a process of %s=%s: give each of the N '
                        'processes its own id, 0 to N-1 (0 is the coordinator).'
                        % (PROCESS_ID_ENV, process_id, PROCESSES_ENV, processes))


def _join(timeout_secs, environ=None):
  """keras.distribution.initialize(), or exit status 2 after `timeout_secs` with the
  coordinator named: a process waits in it, inside JAX, until every process has joined."""
  environ = os.environ if environ is None else environ
  _check_processes(environ)
  coordinator = environ.get(COORDINATOR_ENV, '').split(',')[0] or 'the coordinator JAX finds'

  lock, joined = threading.Lock(), []

  def give_up():
    with lock:
      if joined:  # the join returned as the timer fired
        return
      # The main thread is blocked inside JAX's C++ client: nothing but an exit ends the wait.
      logging.error('--multi_host: process %s of %s did not join %s within %d s '
                    '(--multi_host_timeout): start the same command on every host, each with its '
                    'own %s, and check that %s is reachable from here.',
                    environ.get(PROCESS_ID_ENV, '?'), environ.get(PROCESSES_ENV, '?'), coordinator,
                    timeout_secs, PROCESS_ID_ENV, coordinator)
      sys.stderr.write('error: --multi_host: did not join %s within %d s\n'
                       % (coordinator, timeout_secs))
      sys.stderr.flush()
      os._exit(EXIT_USAGE)  # pylint: disable=protected-access

  timer = threading.Timer(timeout_secs, give_up)
  timer.daemon = True
  timer.start()
  try:
    keras.distribution.initialize()
  except ValueError as e:  # Keras' or JAX's check of the settings, before any connection
    if environ.get(COORDINATOR_ENV):
      raise PipelineError('--multi_host: %s=%s, %s=%s: %s' % (
          COORDINATOR_ENV, environ[COORDINATOR_ENV], PROCESSES_ENV, environ.get(PROCESSES_ENV),
          e))
    # JAX found no cluster: no coordinator in the environment, and not a Cloud TPU.
    raise PipelineError('--multi_host found no other hosts (JAX: %s). On a Cloud TPU slice JAX '
                        'finds them itself; elsewhere give every process %s (process 0\'s '
                        'host:port), %s and its own %s (docs/migration.md).'
                        % (e, COORDINATOR_ENV, PROCESSES_ENV, PROCESS_ID_ENV))
  finally:
    with lock:
      joined.append(True)
      timer.cancel()


def _process_count():
  import jax  # pylint: disable=g-import-not-at-top
  return jax.process_count()


def set_up(cpu_replicas=0, multi_host=False, data_parallel=True, multi_host_timeout=240):
  """Chooses and installs the run's devices (call first, before any model or tensor).

  Args:
    cpu_replicas: TensorFlow: split the CPU into this many logical devices (0: GPUs or the CPU).
    multi_host: JAX: join the other hosts of the slice (keras.distribution.initialize reads the
      coordinator from the environment, as jax.distributed.initialize does on Cloud TPU).
    multi_host_timeout: seconds to wait for every process to join before exiting with status 2.
    data_parallel: JAX: False trains on the default device alone.

  Returns:
    Devices.

  Raises:
    PipelineError: an option the backend does not have.
  """
  backend = keras.backend.backend()
  if multi_host and backend != 'jax':
    raise PipelineError('--multi_host needs KERAS_BACKEND=jax (keras.distribution); the backend '
                        'is %s.' % backend)
  if multi_host and not data_parallel:
    raise PipelineError('--multi_host trains data-parallel over every host\'s devices: drop '
                        '--nodata_parallel.')
  if backend == 'tensorflow':
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    gpus = tf.config.list_physical_devices('GPU')
    if not cpu_replicas and len(gpus) < 2:
      # One device needs no strategy.
      return Devices(backend, 1, names=[tf.config.list_logical_devices(
          'GPU' if gpus else 'CPU')[0].name])
    strategy = strategy_of(cpu_replicas)
    return Devices(backend, strategy.num_replicas_in_sync, strategy=strategy,
                   names=list(strategy.extended.worker_devices))
  strategy_of(cpu_replicas)  # refuses --cpu_replicas
  if backend == 'jax':
    if multi_host:
      _join(multi_host_timeout)
    devices = keras.distribution.list_devices()
    if not data_parallel:
      devices = devices[:1]
    distribution = None
    if len(devices) > 1:
      # Several processes: each reads its own share of every batch (inputs.py), which Keras
      # must not shard again.
      distribution = keras.distribution.DataParallel(devices=devices,
                                                     auto_shard_dataset=not multi_host)
      keras.distribution.set_distribution(distribution)
    result = Devices(backend, len(devices), distribution=distribution, names=devices,
                     processes=_process_count())
    if multi_host:
      # JAX takes the coordinator's count: a process told another one would still train. Every
      # process takes part (the count JAX found where none was given, as on a Cloud TPU).
      result.check_same_everywhere(
          int(os.environ.get(PROCESSES_ENV) or result.processes), 'the number of processes they '
          'were given (%s; %d joined)' % (PROCESSES_ENV, result.processes),
          'give every process the same count')
    return result
  from keras.src.backend.torch import core as torch_core  # pylint: disable=g-import-not-at-top
  return Devices(backend, 1, names=[str(torch_core.get_device())])
