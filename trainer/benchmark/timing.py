"""Timing of the benchmarks: windows of steps after a warm-up, their rates and summaries, and the
alternating Estimator / bare-loop windows of the model benchmark."""

import dataclasses
import time

import numpy as np
import tensorflow.compat.v1 as tf

from trainer.errors import PipelineError


@dataclasses.dataclass(frozen=True)
class Windows:
  """How a benchmark times: `warmup_steps` untimed steps, then `windows` timed windows of
  `steps_per_window` steps each (the model benchmark's --path=both: pairs of windows)."""
  warmup_steps: int
  windows: int
  steps_per_window: int

  @property
  def total_steps(self):
    return self.warmup_steps + self.windows * self.steps_per_window

  def rates(self, times, per_step):
    """Units per second in each window; see `window_rates`."""
    return window_rates(times, self.warmup_steps, self.windows, self.steps_per_window, per_step)

  def as_record(self):
    return dataclasses.asdict(self)


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


def abba_order(pairs):
  """Window kinds for `pairs` pairs, in the order E B, B E, E B, ...: a drift of the machine's
  speed that is linear in time costs both kinds the same over every two pairs."""
  return [kind for k in range(pairs)
          for kind in (('estimator', 'bare') if k % 2 == 0 else ('bare', 'estimator'))]


class BareWindows(tf.train.SessionRunHook):
  """Times windows of Estimator steps and windows of bare steps, alternating, in one session.

  The bare steps run the train op that Estimator.train fetches, with the raw `tf.Session` (no
  hooks, no MonitoredSession, no host_call): a plain session.run loop on the same graph, in the
  same process and session, so both kinds of window see the same machine state (separate processes
  differ in speed by more than the overhead measured; BENCHMARKS.md, How to reproduce).

  After `warmup` Estimator steps the hook runs `warmup` untimed bare steps (a new set of fetches
  makes the session build and optimize another executor), then `pairs` pairs of windows of
  `steps_per_window` steps in `abba_order`. The bare steps advance the global step too; the hook
  stops training after the last window.

  Attributes:
    windows: (kind, seconds) of each timed window in the order run; kind 'estimator' or 'bare'.
  """

  def __init__(self, warmup, pairs, steps_per_window):
    self._warmup, self._steps_per_window = warmup, steps_per_window
    self._order = abba_order(pairs)
    self.windows = []
    self._steps = 0
    self._start = None

  def before_run(self, run_context):
    # Estimator.train fetches [train_op, loss] on every step.
    self._train_op = tf.nest.flatten(run_context.original_args.fetches)[0]

  def after_run(self, run_context, run_values):
    now = time.perf_counter()
    self._steps += 1
    if self._steps == self._warmup:
      for _ in range(self._warmup):
        run_context.session.run(self._train_op)
    elif self._steps > self._warmup and (self._steps - self._warmup) % self._steps_per_window == 0:
      self.windows.append(('estimator', now - self._start))
      while len(self.windows) < len(self._order) and self._order[len(self.windows)] == 'bare':
        start = time.perf_counter()
        for _ in range(self._steps_per_window):
          run_context.session.run(self._train_op)
        self.windows.append(('bare', time.perf_counter() - start))
      if len(self.windows) == len(self._order):
        run_context.request_stop()
    else:
      return
    self._start = time.perf_counter()

  def seconds(self, kind):
    return [s for k, s in self.windows if k == kind]

  def pair_overheads(self):
    """1 - Estimator rate / bare rate of each adjacent pair of windows, in percent."""
    overheads = []
    for first, second in zip(self.windows[0::2], self.windows[1::2]):
      times = dict((first, second))
      overheads.append(100.0 * (1.0 - times['bare'] / times['estimator']))
    return overheads


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
