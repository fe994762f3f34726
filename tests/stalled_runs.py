"""Runs stopped (SIGSTOP) at a chosen point of their work and a takeover of their lease, for the
tests of the writer's lease and its fences (test_lease.py, test_keras_train.py): what a hung file
system, a suspended VM or a save retrying through a partition looks like to the run that takes
over."""

import json
import os
import sys
import time

from trainer.storage import lease as lease_lib
from trainer.storage import lease_stores

from helpers import BackgroundRun
from helpers import main_args
from helpers import REPO


def wait_until_stopped(proc, log=lambda: ''):
  """Waits until `proc` is stopped (state T): a SIGSTOP is delivered some time after kill()."""
  deadline = time.time() + 120
  while lease_stores.process_state(proc.pid) != 'T':
    assert proc.poll() is None and time.time() < deadline, log()[-3000:]
    time.sleep(0.05)


def stopped_at(spec, args, module='trainer.main', env=None):
  """`python -m MODULE ARGS` (trainer.main: with main_args) in the background under
  tests/kill_at.py, stopped (SIGSTOP) at the point `spec` of tests/kill_at.py (e.g.
  'checkpoint:2:STOP': inside its second checkpoint save, after its files and before the state
  file); returned once stopped (a BackgroundRun: as a context manager it kills the run)."""
  args = main_args(args) if module == 'trainer.main' else list(args)
  run = BackgroundRun(*([spec, module] + args), env=env,
                      command=[sys.executable, os.path.join(REPO, 'tests', 'kill_at.py')])
  try:
    wait_until_stopped(run.proc, lambda: run.stderr)
  except BaseException:
    run.__exit__(None, None, None)
    raise
  return run


def storage_blob(directory, name):
  """The google-cloud-storage Blob of <directory>/<name> (directory: gs://BUCKET/PREFIX)."""
  from google.cloud import storage  # pylint: disable=g-import-not-at-top
  bucket, _, prefix = directory[len('gs://'):].partition('/')
  return storage.Client().bucket(bucket).blob(prefix + '/' + name)


def take_over(model_dir):
  """Writes model_dir's lease as another machine's run would after a takeover."""
  content = json.dumps({'token': 'other', 'host': 'another-machine', 'pid': 7,
                        'command': 'trainer.main', 'started': 'now', 'beats': 0})
  if model_dir.startswith('gs://'):
    storage_blob(model_dir, lease_lib.LEASE_FILE).upload_from_string(content)
  else:
    path = os.path.join(model_dir, lease_lib.LEASE_FILE)
    with open(path + '.new', 'w') as f:
      f.write(content)
    os.replace(path + '.new', path)
