"""The loop of the random-kill harness (tests/test_kill_anywhere.py, tests/test_keras_train.py):
run a command under tests/kill_at.py, killed at a point drawn from a seed, again and again until
it ends."""

import os
import random

from trainer.errors import EXIT_RESUMABLE

import forked_main
from helpers import main_args
from helpers import REPO

MAX_KILLS = 4
# How a killed run may end: kill -9; SIGTERM's clean stop (trainer.main, trainer.train_keras);
# death by SIGTERM (trainer.prepare, which has nothing to save on it: its outputs are staged and
# renamed).
KILLED = {'trainer.main': (-9, EXIT_RESUMABLE), 'trainer.train_keras': (-9, EXIT_RESUMABLE),
          'trainer.prepare': (-9, -15)}


def _draws(rng, points):
  """(point, n, signal) for each kill: the points of `points` ({point: the most calls a run makes
  there}) in an order drawn from `rng`, every one before any again, each at a drawn call."""
  order = rng.sample(sorted(points), len(points))
  for i in range(MAX_KILLS):
    point = order[i % len(order)]
    yield point, rng.randint(1, points[point]), rng.choice(['KILL', 'TERM'])


def run_until_done(module, args, seed, points, env=None, after_each=None):
  """Runs `python -m module args` under tests/kill_at.py, killed at a point drawn from `seed`,
  again and again (the last run without a kill) until it exits 0; returns [(spec, status)].
  after_each: called with each run's stderr once it ended. With $KILL_HARNESS_LOGS set, each
  run's stderr is kept in that folder."""
  draws = list(_draws(random.Random(seed), points))
  if module == 'trainer.main':
    args = main_args(args)
  history = []
  for attempt in range(MAX_KILLS + 1):
    spec = ':'.join(map(str, draws[attempt])) if attempt < MAX_KILLS else 'none'
    # trainer.main forked from a process that imported it (tests/forked_main.py); the others in a
    # fresh interpreter (trainer.train_keras: another runtime; trainer.prepare: each run with a
    # hash seed of its own, so that a conversion whose output followed a set's order would differ
    # from the uninterrupted one's).
    proc = forked_main.run([os.path.join(REPO, 'tests', 'kill_at.py'), spec, module] + list(args),
                           dict(os.environ) if env is None else env, timeout=600,
                           fresh=module != 'trainer.main')
    history.append((spec, proc.returncode))
    if after_each:
      after_each(proc.stderr)
    if os.environ.get('KILL_HARNESS_LOGS'):
      with open('%s/%d-%s.log' % (os.environ['KILL_HARNESS_LOGS'], attempt, spec), 'w') as f:
        f.write(proc.stderr)
    if proc.returncode == 0:
      return history
    assert proc.returncode in KILLED[module], (history, proc.stderr[-3000:])
    assert 'Traceback' not in proc.stderr, (history, proc.stderr[-3000:])
  raise AssertionError('not done after %d kills: %s' % (MAX_KILLS, history))
