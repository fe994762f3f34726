"""One writer per run directory (trainer/storage/lease.py), on local disk and on gs:// (the GCS
emulator): a second writer refused naming the holder, a dead holder's lease taken over (killed
with -9 on this machine: at once; silent for the expiry: after it), a holder that lost its lease
stopping before its next checkpoint, and evaluation beside training taking none.

The lease itself is pure Python; the training runs check TensorFlow's hooks and listeners, which
differ between the runtimes, so those run on both."""

import json
import os
import re
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

from trainer.storage import lease as lease_lib
from trainer.storage import staged

from helpers import BackgroundRun
from helpers import ok
from helpers import refused
from helpers import REPO
from helpers import results_of
from helpers import run_main
from helpers import run_prepare

IN_GCS_SANDBOX = os.environ.get('GCS_SANDBOX') == '1'
needs_gcs = pytest.mark.skipif(not IN_GCS_SANDBOX, reason='needs the GCS emulator: run inside '
                               'scripts/gcs-sandbox (root, unshare), as `make test` does')

_HOLDER = textwrap.dedent('''
    import sys, time
    from trainer.storage import lease
    held = lease.Lease(sys.argv[1], '--model_dir', 6, 'lease-holder').acquire()
    held.start_heartbeat()
    print('held', flush=True)
    time.sleep(600)
    ''')


class Holder(object):
  """A process on this machine that holds the lease of `directory` (heartbeat every second)."""

  def __init__(self, directory):
    self.proc = subprocess.Popen([sys.executable, '-c', _HOLDER, directory], cwd=REPO,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 universal_newlines=True)
    line = self.proc.stdout.readline().strip()
    assert line == 'held', self.proc.communicate()[1][-2000:]

  def kill(self):
    self.proc.kill()
    self.proc.wait()

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    if self.proc.poll() is None:
      self.kill()


def _cnn(data_dir, model_dir, *extra):
  return ['--data_dir=' + data_dir, '--model_dir=' + model_dir, '--model=cnn',
          '--image_size=28', '--train_batch_size=32', '--eval_batch_size=100', '--seed=3',
          '--log_every_n_secs=0.2'] + list(extra)


@pytest.mark.parametrize('where', ['local', pytest.param('gs', marks=needs_gcs)])
def test_a_second_writer_is_refused_an_expired_lease_taken_over_and_the_old_holder_finds_out(
    where, tmp_path):
  """In-process, with expiry 6 s: the second Lease is refused naming the holder; once the first
  stops renewing for the expiry, the second takes over with a warning, and the first one's
  check() raises LeaseLost; its release then leaves the new holder's lease alone."""
  directory = (str(tmp_path / 'run') if where == 'local'
               else 'gs://bkt/lease-%s' % uuid.uuid4().hex[:12])
  first = lease_lib.Lease(directory, '--model_dir', 6).acquire()
  second = lease_lib.Lease(directory, '--model_dir', 6)
  with pytest.raises(lease_lib.LeaseHeld, match=r'--model_dir=%s is being written by another '
                     r'run: .*pid %d on ' % (directory, os.getpid())):
    second.acquire()
  first.check()  # still its own
  if where == 'local':  # no renewal for 7 s, made by setting the file's time back
    stale = time.time() - 7
    os.utime(os.path.join(directory, lease_lib.LEASE_FILE), (stale, stale))
  else:  # the object's `updated` time is the server's: wait it out
    time.sleep(6.5)
  second.acquire()
  with pytest.raises(lease_lib.LeaseLost, match='another run took it over'):
    first.check()
  first.release()  # lost: must not delete the new holder's lease
  second.check()
  second.release()
  third = lease_lib.Lease(directory, '--model_dir', 6).acquire()  # released: free at once
  third.release()


def test_a_dead_holder_on_this_machine_is_taken_over_at_once(tmp_path):
  """A holder killed with -9 (its lease fresh, its process gone) does not block the next run."""
  directory = str(tmp_path / 'run')
  with Holder(directory) as holder:
    with pytest.raises(lease_lib.LeaseHeld):
      lease_lib.Lease(directory, '--model_dir', 6).acquire()
    holder.kill()
    taken = lease_lib.Lease(directory, '--model_dir', 6).acquire()
  taken.release()
  assert [n for n in os.listdir(directory) if not n.startswith(lease_lib.LEASE_FILE + '.')] == []


@pytest.mark.parametrize('where', ['local', pytest.param('gs', marks=needs_gcs)])
def test_trainer_prepare_and_eval_beside_a_live_writer(where, small_dir, tmp_path):
  """With a live holder: trainer.main training and trainer.prepare are refused (exit 2, the
  holder's pid, nothing written), an evaluation is not; the holder killed with -9, training
  takes over at once with a warning, finishes, and releases the lease."""
  model_dir = (str(tmp_path / 'model') if where == 'local'
               else 'gs://bkt/lease-%s' % uuid.uuid4().hex[:12])
  args = _cnn(small_dir, model_dir, '--mode=train', '--train_steps=3')
  with Holder(model_dir) as holder:
    pid = 'pid %d on ' % holder.proc.pid
    refused(run_main(*args), 'is being written by another run', pid)
    refused(run_prepare('rotten_tomatoes', '--output_dir=' + model_dir),
            '--output_dir=%s is being written by another run' % model_dir, pid)
    if where == 'local':
      assert [n for n in os.listdir(model_dir)
              if staged.final_name(n) != lease_lib.LEASE_FILE] == [lease_lib.LEASE_FILE]
    # Read-only: no lease (it fails for want of a checkpoint, not for the lease).
    refused(run_main(*_cnn(small_dir, model_dir, '--mode=eval')), 'no checkpoint in')
    holder.kill()
  done = ok(run_main(*args))
  assert 'Took over the lease of %s' % model_dir in done.stderr
  assert 'its process is gone' in done.stderr
  assert results_of(model_dir)['global_step'] == 3
  if where == 'local':
    assert not os.path.exists(os.path.join(model_dir, lease_lib.LEASE_FILE))


def _take_over(model_dir):
  """Writes model_dir's lease as another machine's run would after a takeover."""
  content = json.dumps({'token': 'other', 'host': 'another-machine', 'pid': 7,
                        'command': 'trainer.main', 'started': 'now', 'beats': 0})
  if model_dir.startswith('gs://'):
    from google.cloud import storage  # pylint: disable=g-import-not-at-top
    bucket, _, prefix = model_dir[len('gs://'):].partition('/')
    storage.Client().bucket(bucket).blob(prefix + '/' + lease_lib.LEASE_FILE).upload_from_string(
        content)
  else:
    path = os.path.join(model_dir, lease_lib.LEASE_FILE)
    with open(path + '.new', 'w') as f:
      f.write(content)
    os.replace(path + '.new', path)


def _checkpoint_times(model_dir):
  """{step: the time its .index file was written (seconds since the epoch)}."""
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  return {int(p[len('model.ckpt-'):-len('.index')]):
              tf.io.gfile.stat('%s/%s' % (model_dir, p)).mtime_nsec / 1e9
          for p in tf.io.gfile.listdir(model_dir)
          if p.startswith('model.ckpt-') and p.endswith('.index')}


@pytest.mark.parametrize('where', ['local', pytest.param('gs', marks=needs_gcs)])
def test_a_holder_that_lost_its_lease_stops_before_its_next_checkpoint(where, small_dir,
                                                                        tmp_path):
  """Training (checkpoints every 20 steps, heartbeat every second) whose lease another machine's
  run takes over: it stops with exit 2 and LeaseLost's message, writes no checkpoint after the
  takeover and leaves the new holder's lease in place."""
  model_dir = (str(tmp_path / 'model') if where == 'local'
               else 'gs://bkt/lease-%s' % uuid.uuid4().hex[:12])
  args = _cnn(small_dir, model_dir, '--mode=train', '--train_steps=100000',
              '--save_checkpoints_steps=20', '--lease_expiry_secs=6')
  with BackgroundRun(*args) as run:
    run.wait_for_step(25)  # past the checkpoint at step 20
    _take_over(model_dir)
    taken_at = time.time()
    assert run.wait(60) == 2, run.stderr[-3000:]
  assert 'Traceback' not in run.stderr.split('Reraising captured error')[-1]
  assert re.search(r"error: this run lost the writer's lease of --model_dir=\S+: another run took "
                   r"it over: trainer.main \(pid 7 on another-machine", run.stderr), \
      run.stderr[-3000:]
  # A save checks the lease first: none begun after the takeover (one may have been in flight).
  written = _checkpoint_times(model_dir)
  assert 20 in written and len([s for s, t in written.items() if t > taken_at]) <= 1, (
      taken_at, written)
  assert '"token": "other"' in _read_lease(model_dir)


def _read_lease(model_dir):
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  with tf.io.gfile.GFile(model_dir + '/' + lease_lib.LEASE_FILE) as f:
    return f.read()
