"""Timing and record helpers of `trainer.benchmark` (no flags, so tests can import them)."""

import os
import platform
import time

import numpy as np
import tensorflow.compat.v1 as tf

from trainer import driver
from trainer.config import PipelineError


def runtime_facts():
  """What the numbers were measured on."""
  cpu_model, cpu_flags = None, []
  if os.path.exists('/proc/cpuinfo'):
    with open('/proc/cpuinfo') as f:
      for line in f:
        key, _, value = line.partition(':')
        if key.strip() == 'model name' and cpu_model is None:
          cpu_model = value.strip()
        if key.strip() == 'flags':
          present = set(value.split())
          cpu_flags = [flag for flag in ('sse4_2', 'avx', 'avx2', 'fma', 'avx512f', 'avx512_vnni')
                       if flag in present]
          break
  build = 'tensorflow'
  for name in ('intel-tensorflow', 'tensorflow-cpu', 'tensorflow-gpu'):
    if _distribution_installed(name):
      build = name
  return {
      'python': platform.python_version(),
      'tensorflow_version': tf.__version__,
      'tensorflow_build': build,
      'mkl_enabled': driver._mkl_enabled(),  # pylint: disable=protected-access
      'cpu_model': cpu_model,
      'cpu_flags': cpu_flags,
      'usable_cores': len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity')
                      else os.cpu_count(),
      'gpus': [d.name for d in tf.config.experimental.list_physical_devices('GPU')],
      'hostname': platform.node(),
      'time': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()),
  }


def _distribution_installed(name):
  import pkg_resources  # setuptools; importlib.metadata needs Python 3.8
  try:
    pkg_resources.get_distribution(name)
    return True
  except pkg_resources.DistributionNotFound:
    return False


def summarize(values):
  """Median, min, max and spread ((max - min) / median) of the windows' values."""
  values = [float(v) for v in values]
  median = float(np.median(values))
  return {'median': median, 'min': min(values), 'max': max(values),
          'spread': (max(values) - min(values)) / median if median else None, 'windows': values}


class StepTimes(tf.train.SessionRunHook):
  """Wall-clock time after every step of an Estimator session."""

  def __init__(self):
    self.times = []

  def after_run(self, run_context, run_values):
    self.times.append(time.perf_counter())


class BareWindows(tf.train.SessionRunHook):
  """Alternates timed windows of Estimator steps with windows of bare steps in one session.

  After `warmup` Estimator steps, every `steps_per_window` Estimator steps form a window, and right
  after each one the hook runs the train op that the Estimator fetches `steps_per_window` times with
  the raw `tf.Session` (no hooks, no MonitoredSession, no host_call): a bare session.run loop on
  the same graph, in the same process and session, so both paths see the same machine state. On
  two shared cores separate processes differ by 10-30% in speed, more than the overhead measured.
  The bare steps advance the global step too; the hook stops training after the last window.
  """

  def __init__(self, warmup, windows, steps_per_window):
    self._warmup, self._windows, self._steps_per_window = warmup, windows, steps_per_window
    self.estimator_seconds, self.bare_seconds = [], []
    self._steps = 0
    self._start = None

  def before_run(self, run_context):
    # Estimator.train fetches [train_op, loss] on every step.
    self._train_op = tf.nest.flatten(run_context.original_args.fetches)[0]

  def after_run(self, run_context, run_values):
    now = time.perf_counter()
    self._steps += 1
    if self._steps == self._warmup:
      self._start = now
    elif self._steps > self._warmup and (self._steps - self._warmup) % self._steps_per_window == 0:
      self.estimator_seconds.append(now - self._start)
      start = time.perf_counter()
      for _ in range(self._steps_per_window):
        run_context.session.run(self._train_op)
      self.bare_seconds.append(time.perf_counter() - start)
      if len(self.bare_seconds) == self._windows:
        run_context.request_stop()
      self._start = time.perf_counter()


def window_rates(times, warmup, windows, steps_per_window, per_step):
  """Units per second in each timed window. `times[i]` is the time after step i + 1; the first
  window starts after `warmup` steps.

  Raises:
    PipelineError: fewer times than warmup + windows * steps_per_window.
  """
  needed = warmup + windows * steps_per_window
  if warmup < 1 or len(times) < needed:
    raise PipelineError('timed %d steps but need warmup (>= 1) + windows x steps_per_window = %d.'
                        % (len(times), needed))
  rates = []
  for w in range(windows):
    start = times[warmup - 1 + w * steps_per_window]
    end = times[warmup - 1 + (w + 1) * steps_per_window]
    rates.append(steps_per_window * per_step / (end - start))
  return rates
