"""How a training run on this host takes a stop from outside: SIGTERM (a preemption, a job
cancelled) or Ctrl-C, recorded so that the run saves a checkpoint and exits with status 75
(trainer.errors.EXIT_RESUMABLE); a second Ctrl-C exits at once with 130. Both of the Keras and
the PyTorch trainers use it (`trainer.main`'s Estimator has its own hooks)."""

import os
import signal
import threading

from absl import logging

from trainer import errors


class SigtermFlag:
  """Records a SIGTERM or a first Ctrl-C instead of dying of it, while installed (main thread
  only); a second Ctrl-C exits at once with status 130, without saving. `at_period_end`: the run
  stops at the end of the logged period (several processes), not after the step in flight."""

  def __init__(self, at_period_end=False):
    self.at_period_end = at_period_end
    self._when = 'at the end of the logged period' if at_period_end else 'after the step in flight'
    self.requested = False
    self.cause = 'preempted (SIGTERM)'
    self._interrupts = 0
    self._previous = {}

  def __enter__(self):
    if threading.current_thread() is threading.main_thread():
      # An ignored SIGINT (a background job) stays ignored: a Ctrl-C meant for the foreground.
      self._previous = {s: signal.signal(s, self._handle) for s in (signal.SIGTERM, signal.SIGINT)
                        if signal.getsignal(s) is not signal.SIG_IGN}
    return self

  def _handle(self, signum, frame):
    del frame
    self._interrupts += signum == signal.SIGINT
    if self._interrupts > 1:
      logging.error('Second Ctrl-C: stopping now, without saving; the newest checkpoint stays.')
      logging.flush()
      os._exit(errors.EXIT_INTERRUPTED)  # pylint: disable=protected-access
    if not self.requested and signum == signal.SIGINT:
      self.cause = errors.INTERRUPTED
    logging.warning('%s: stopping %s, saving a checkpoint%s',
                    'SIGTERM' if signum == signal.SIGTERM else 'Ctrl-C', self._when,
                    '; Ctrl-C again stops at once' if signum == signal.SIGINT else '')
    self.requested = True

  def __exit__(self, *exc):
    for number, handler in self._previous.items():
      if handler is not None:
        signal.signal(number, handler)
