"""The loop of the random-kill harness (tests/test_kill_anywhere.py, tests/test_keras_train.py):
run a command under tests/kill_at.py, killed at a point drawn from a seed, again and again until
it ends."""

import os
import random
import subprocess
import sys

from helpers import REPO
from trainer.errors import EXIT_RESUMABLE

MAX_KILLS = 4
# kill -9; SIGTERM's clean stop (trainer.main, trainer.train_keras); death by SIGTERM
# (trainer.prepare, which has nothing to save on it: its outputs are staged and renamed)
KILLED = (-9, EXIT_RESUMABLE, -15)


def _draw(rng, points):
  """(point, n, signal) from `points` ({point: the most calls a run makes there})."""
  point = rng.choice(sorted(points))
  return point, rng.randint(1, points[point]), rng.choice(['KILL', 'TERM'])


def run_until_done(module, args, seed, points, env=None):
  """Runs `python -m module args` under tests/kill_at.py, killed at a point drawn from `seed`,
  again and again (the last run without a kill) until it exits 0; returns [(spec, status)].
  With $KILL_HARNESS_LOGS set, each run's stderr is kept in that folder."""
  rng = random.Random(seed)
  history = []
  for attempt in range(MAX_KILLS + 1):
    spec = ':'.join(map(str, _draw(rng, points))) if attempt < MAX_KILLS else 'none'
    proc = subprocess.run([sys.executable, os.path.join(REPO, 'tests', 'kill_at.py'), spec,
                           module] + list(args), cwd=REPO, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=600)
    history.append((spec, proc.returncode))
    if os.environ.get('KILL_HARNESS_LOGS'):
      with open('%s/%d-%s.log' % (os.environ['KILL_HARNESS_LOGS'], attempt, spec), 'w') as f:
        f.write(proc.stderr)
    if proc.returncode == 0:
      return history
    assert proc.returncode in KILLED, (history, proc.stderr[-3000:])
    assert 'Traceback' not in proc.stderr, (history, proc.stderr[-3000:])
  raise AssertionError('not done after %d kills: %s' % (MAX_KILLS, history))
