"""Preemption: a SIGTERM (or a first Ctrl-C) saves a checkpoint at the current step and ends the
run; a second Ctrl-C ends it at once.

AI Platform, GKE and preemptible (spot) VMs announce the end of a job with SIGTERM and kill it
some seconds later (about 30 on GCE and GKE). On SIGTERM during training, `PreemptionHook` stops
the training session after the step (on TPU: the iterations_per_loop) in flight; the Estimator's
checkpoint saver then writes a checkpoint at that step as the session ends, and the run raises
`Preempted`, which `trainer.main` turns into exit status 75 (`errors.EXIT_RESUMABLE`). Outside
training (building graphs, evaluating or exporting a checkpoint that is already saved) there is
nothing to save and `Preempted` is raised at once. If the run has not ended `grace_secs` after the
signal (a step or a save that does not finish), a watchdog exits the process with the same
status; a checkpoint cut short by that exit is moved aside by the next run's integrity check
(`trainer.run.checkpoints`), which resumes from the newest intact one.

Ctrl-C (SIGINT) is handled the same way, so that an interrupted local run keeps the step it reached
instead of dying of KeyboardInterrupt inside TensorFlow; its message says "interrupted (Ctrl-C)".
A second Ctrl-C, for one who cannot wait for the step and the save, exits at once with status 130
(128 + SIGINT); the newest checkpoint already written stays.

TPUEstimator's own preemption handling watches the TPU, not this process: in TF 1.15 and 2.15 it
adds `GracefulShutdownHook` (the TPU workers' heartbeats: a TPU host going down triggers a save to
`model_dir/model.ckpt`, the prefix this hook's save uses too) and, on GCE with a resolved
TPU, `CloudTPUPreemptedHook` (polls the TPU's state every 30 s and exits the process when it is
PREEMPTED or TERMINATED). Neither handles SIGTERM or SIGINT, and this module leaves both alone.
"""

import contextlib
import os
import re
import signal
import threading

from absl import logging
import tensorflow.compat.v1 as tf

from trainer import errors
from trainer.errors import Preempted

DEFAULT_GRACE_SECS = 25
_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def saved_step(model_dir):
  """The step of the newest checkpoint the `checkpoint` state file of model_dir names (its path
  only: nothing else is read, so a damaged checkpoint or a storage outage cannot fail it), or
  None when there is none or it cannot be read."""
  try:
    state = tf.train.get_checkpoint_state(model_dir)
    match = re.search(r'-(\d+)$', state.model_checkpoint_path) if state else None
    return int(match.group(1)) if match else None
  except Exception:  # pylint: disable=broad-except
    return None


class SigtermWatch(object):
  """Turns SIGTERM and Ctrl-C into a clean stop of one run (see the module docstring).

  Use `with watch.installed():` around the run and `with watch.training():` around each
  `Estimator.train` call, passing `watch.hook()` among its hooks. Install it from the main thread
  (Python delivers signals there only); elsewhere `installed()` does nothing.
  """

  def __init__(self, model_dir, grace_secs=DEFAULT_GRACE_SECS, saves_checkpoints=True):
    """model_dir: for the message. saves_checkpoints: False for a distributed worker that is not
    the chief (the chief writes the checkpoints)."""
    self._model_dir = model_dir
    self._grace_secs = grace_secs
    self._saves = saves_checkpoints
    self._training = False
    self._closing = False
    self._watchdog_started = False
    self.ended = threading.Event()  # set when the run is over: the watchdog stands down
    self.requested = False
    self.cause = 'preempted (SIGTERM)'
    self._interrupts = 0
    self._lock = threading.RLock()  # taken in the signal handler too, which may interrupt it

  @contextlib.contextmanager
  def installed(self):
    if threading.current_thread() is not threading.main_thread():
      yield self
      return
    # Python runs signal handlers in the main thread between bytecodes, so not while it waits in
    # a session.run; the wakeup pipe reports the signal to a thread at once, which marks the stop
    # for the hook and starts the watchdog even then.
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    # A SIGINT ignored when the process started (a job started in the background with nohup or
    # `&` from a script) stays ignored: a Ctrl-C meant for the foreground must not stop it.
    handled = [s for s in _SIGNALS if signal.getsignal(s) is not signal.SIG_IGN]
    previous = {s: signal.signal(s, self._on_signal) for s in handled}
    previous_fd = signal.set_wakeup_fd(write_fd)
    listener = threading.Thread(target=self._listen, args=(read_fd,), name='sigterm-listener',
                                daemon=True)
    listener.start()
    try:
      yield self
    finally:
      # A signal from here on is not this run's: it stays pending while the handlers are put
      # back, then takes the previous handler's action (by default, the end of the process).
      self._closing = True
      signal.pthread_sigmask(signal.SIG_BLOCK, set(_SIGNALS))
      try:
        for number, handler in previous.items():
          if handler is not None:  # None: a handler installed from C, which Python cannot restore
            signal.signal(number, handler)
        signal.set_wakeup_fd(previous_fd)
      finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, set(_SIGNALS))
      self.ended.set()
      os.close(write_fd)  # ends the listener's read
      listener.join()
      os.close(read_fd)

  @contextlib.contextmanager
  def training(self):
    """Marks an `Estimator.train` call: a SIGTERM or Ctrl-C inside it stops after the step in
    flight and raises `Preempted` once train() has returned (and its saver has written the
    checkpoint)."""
    self._training = True
    try:
      yield
    finally:
      self._training = False
    if self.requested:
      raise self._preempted_after_training()

  def hook(self):
    return PreemptionHook(self)

  def _preempted_after_training(self):
    if not self._saves:
      return Preempted('this worker stopped; the chief saves the checkpoints in %s'
                       % self._model_dir, self.cause)
    step = saved_step(self._model_dir)
    if step is None:
      return Preempted('no checkpoint is in %s yet' % self._model_dir, self.cause)
    return Preempted('the checkpoint at step %d in %s is saved' % (step, self._model_dir),
                     self.cause)

  def _request(self, signum):
    """Records the stop, and the first signal's cause (from either thread)."""
    with self._lock:
      if not self.requested:
        self.cause = errors.INTERRUPTED if signum == signal.SIGINT else 'preempted (SIGTERM)'
      self.requested = True

  def _exit_now(self):
    step = saved_step(self._model_dir)
    logging.error('Second Ctrl-C: stopping now, without saving. %s', (
        'The newest checkpoint, step %d in %s, stays; run the same command again to resume '
        'from it.' % (step, self._model_dir)) if step is not None else 'No checkpoint was saved.')
    logging.flush()
    os._exit(errors.EXIT_INTERRUPTED)  # pylint: disable=protected-access

  def _on_signal(self, signum, frame):
    del frame
    if self._closing:
      return
    self._request(signum)
    if not self._training:
      raise Preempted('stopped outside training, with nothing unsaved; the checkpoints in %s '
                      'are as they were' % self._model_dir, self.cause)

  def _listen(self, read_fd):
    while True:
      signals = os.read(read_fd, 64)
      if not signals:
        return
      for signum in signals:
        if signum not in _SIGNALS or self._closing:
          continue
        if signum == signal.SIGINT:  # counted here only: each signal reaches this loop once
          self._interrupts += 1
          if self._interrupts > 1:
            self._exit_now()
        self._request(signum)
        if self._watchdog_started:
          continue
        self._watchdog_started = True
        logging.warning('%s received: %s (the run ends within %d s%s).',
                        'SIGTERM' if signum == signal.SIGTERM else 'Ctrl-C',
                        'stopping after the step in flight and saving a checkpoint there'
                        if self._training else 'stopping; nothing is left to save',
                        self._grace_secs,
                        '; Ctrl-C again stops at once, without saving'
                        if signum == signal.SIGINT else '')
        threading.Thread(target=self._watchdog, name='preemption-watchdog', daemon=True).start()

  def _watchdog(self):
    if self.ended.wait(self._grace_secs):
      return
    logging.error('%s: the run did not end within %d s of the signal; exiting now without a new '
                  'checkpoint. The next run resumes from the newest intact checkpoint in %s.',
                  self.cause, self._grace_secs, self._model_dir)
    logging.flush()
    os._exit(errors.EXIT_RESUMABLE)  # pylint: disable=protected-access


class PreemptionHook(tf.train.SessionRunHook):
  """Requests the training session's stop after the step in which the signal arrived, or before
  the first step if it arrived while the session was being created."""

  def __init__(self, watch):
    self._watch = watch

  def after_create_session(self, session, coord):
    del session
    if self._watch.requested:
      coord.request_stop()

  def after_run(self, run_context, run_values):
    del run_values
    if self._watch.requested:
      run_context.request_stop()
