"""`python -m trainer.train_keras` with one more callback, which sends this process a signal once
after a given step: a SIGTERM or a kill -9 that reaches one host of a multi-process run at a known
step (tests/test_keras_multi_process.py), not at a time the test guesses.

Usage: python tests/train_keras_at_step.py SIGNAL STEP [trainer.train_keras flags...]
"""

import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# pylint: disable=g-import-not-at-top,wrong-import-position
from trainer import train_keras
from trainer.keras_run import job

import keras_resume


def _with_signal(train, signum, step):
  def train_with_signal(config, callbacks=()):
    send = keras_resume.At(step, lambda: os.kill(os.getpid(), signum))
    return train(config, [send] + list(callbacks))
  return train_with_signal


if __name__ == '__main__':
  number, at = getattr(signal, sys.argv[1]), int(sys.argv[2])
  del sys.argv[1:3]
  job.train = _with_signal(job.train, number, at)
  train_keras.run()
