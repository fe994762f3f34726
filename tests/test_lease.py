"""One writer per run directory (trainer/storage/lease.py), on local disk and on gs:// (the GCS
emulator): a second writer refused naming the holder, a dead holder's lease taken over (killed
with -9 on this machine: at once; silent for the expiry: after it), a holder that lost its lease
stopping before its next checkpoint, and evaluation beside training taking none.

The lease itself is pure Python; the training runs check TensorFlow's hooks and listeners, which
differ between the runtimes, so those run on both."""

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid

import pytest
from stalled_runs import stopped_at
from stalled_runs import storage_blob
from stalled_runs import take_over
from stalled_runs import wait_until_stopped

from trainer.storage import lease as lease_lib
from trainer.storage import staged

from helpers import BackgroundRun
from helpers import main_args
from helpers import needs_gcs
from helpers import ok
from helpers import refused
from helpers import REPO
from helpers import results_of
from helpers import run_main
from helpers import run_prepare
from helpers import split_cases

_HOLDER = textwrap.dedent("""
    import sys, time
    from trainer.storage import lease
    held = lease.Lease(sys.argv[1], '--model_dir', 12, 'lease-holder').acquire()
    held.start_heartbeat()
    print('held', flush=True)
    time.sleep(600)
    """)

pure_python = pytest.mark.one_runtime('the lease is pure Python')


class Holder(object):
  """A process on this machine that holds the lease of `directory` (on gs://, a heartbeat every
  2 s)."""

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


def _bucket_dir():
  return 'gs://bkt/lease-%s' % uuid.uuid4().hex[:12]


def _blob(directory):
  return storage_blob(directory, lease_lib.LEASE_FILE)


@pure_python
def test_a_local_lease_is_a_lock_damaged_files_are_taken_over_links_and_folders_refused(
    tmp_path, caplog):
  """Local disk: a second Lease is refused naming the holder, and takes over at once after the
  release; an empty, `null`, `[]` or cut-short lease file nobody locks is taken over (with a
  warning for the damaged ones), however fresh; a symbolic link (dangling: its target is not
  created) or a directory in its place is refused naming what to delete; a holder whose lease
  file was deleted finds out at its next check."""
  directory = str(tmp_path / 'run')
  first = lease_lib.Lease(directory, '--model_dir', 12, 'trainer.main').acquire()
  with pytest.raises(lease_lib.LeaseHeld, match=r'--model_dir=%s is being written by another '
                     r'run: trainer.main \(pid %d on .* holds the lease\'s lock'
                     % (directory, os.getpid())):
    lease_lib.Lease(directory, '--model_dir', 12).acquire()
  first.check()
  first.release()
  assert not os.path.exists(directory)  # created by the lease, removed with it
  os.makedirs(directory)
  lease_path = os.path.join(directory, lease_lib.LEASE_FILE)
  for text in ('', 'null', '[]', '{"token": "ab', 'not json'):
    with open(lease_path, 'w') as f:
      f.write(text)
    caplog.clear()
    taken = lease_lib.Lease(directory, '--model_dir', 12).acquire()
    assert ('from a damaged lease' in caplog.text) == bool(text), (text, caplog.text)
    taken.release()
  os.symlink(str(tmp_path / 'nowhere'), lease_path)
  with pytest.raises(lease_lib.PipelineError, match=r'writer.lease is a symbolic link \(to '
                     r'.*nowhere\), which this pipeline never writes: delete the link \(rm '):
    lease_lib.Lease(directory, '--model_dir', 12).acquire()
  assert not os.path.exists(str(tmp_path / 'nowhere'))
  os.remove(lease_path)
  os.mkdir(lease_path)
  with pytest.raises(lease_lib.PipelineError, match='writer.lease is a directory, which this '
                     'pipeline never writes: move it away or delete it'):
    lease_lib.Lease(directory, '--model_dir', 12).acquire()
  os.rmdir(lease_path)
  held = lease_lib.Lease(directory, '--model_dir', 12).acquire()
  os.remove(lease_path)
  with pytest.raises(lease_lib.LeaseLost, match='its lease file .* was deleted or replaced'):
    held.check()
  held.release()


@pure_python
def test_a_stopped_holder_keeps_its_lease_and_a_killed_one_is_taken_over_at_once(tmp_path):
  """A holder process stopped (SIGSTOP: what a hung file system or a suspended VM looks like) is
  never taken over, however old its lease file looks (today's and yesterday's clocks are not
  asked): the refusal says it is stopped; killed with -9, its lease is taken over at once."""
  directory = str(tmp_path / 'run')
  with Holder(directory) as holder:
    os.kill(holder.proc.pid, signal.SIGSTOP)
    wait_until_stopped(holder.proc)
    stale = time.time() - 3600
    os.utime(os.path.join(directory, lease_lib.LEASE_FILE), (stale, stale))
    with pytest.raises(lease_lib.LeaseHeld, match=r'pid %d on .*its process stopped .*`kill '
                       r'-CONT %d` resumes it' % (holder.proc.pid, holder.proc.pid)):
      lease_lib.Lease(directory, '--model_dir', 12).acquire()
    holder.kill()
    taken = lease_lib.Lease(directory, '--model_dir', 12).acquire()
  assert taken.took_over['command'] == 'lease-holder'
  taken.release()
  assert not os.path.exists(os.path.join(directory, lease_lib.LEASE_FILE))


@pure_python
@needs_gcs
def test_on_gcs_a_silent_holder_gives_up_first_and_is_taken_over_only_by_the_takers_own_clock(
    caplog):
  """gs://, expiry 12 s, through Vertex AI's /gcs/ path: a second Lease is refused naming the
  holder; a holder that renews nothing (no heartbeat) is taken over by a taker whose clock runs
  60 s ahead only after the taker saw it unchanged for 12 s by its own clock, and the holder gave
  up before that (its check() raises after 8 s without a renewal); its release leaves the new
  lease alone; a damaged lease object is taken over at once."""
  directory = _bucket_dir()
  fuse_path = '/gcs/' + directory[len('gs://'):]
  first = lease_lib.Lease(fuse_path, '--model_dir', 12).acquire()
  assert not os.path.exists(fuse_path) and _blob(directory).exists()
  with pytest.raises(lease_lib.LeaseHeld, match=r'--model_dir=%s is being written by another '
                     r'run: .*pid %d on .*last heartbeat \d+ s ago' % (directory, os.getpid())):
    lease_lib.Lease(directory, '--model_dir', 12).acquire()
  first.check()
  ahead = lease_lib.Lease(directory, '--model_dir', 12, wall_clock=lambda: time.time() + 60)
  started = time.monotonic()
  taker = threading.Thread(target=ahead.acquire)
  taker.start()
  time.sleep(max(0.0, 8.5 - (time.monotonic() - started)))
  with pytest.raises(lease_lib.LeaseLost, match='it was not renewed for (8|9) s'):
    first.check()  # the holder gave up first: the taker is still watching
  assert taker.is_alive()
  taker.join()
  waited = time.monotonic() - started
  assert 12 <= waited < 20, waited
  assert 'waiting up to 12 s to see whether its holder' in caplog.text and ahead.took_over
  first.release()  # lost: must not delete the new holder's lease
  ahead.check()
  ahead.release()
  for text in (b'', b'null', b'[]', b'{"token'):
    _blob(directory).upload_from_string(text)
    taken = lease_lib.Lease(fuse_path, '--model_dir', 12).acquire()
    assert 'damaged' in taken.took_over
    taken.release()
  assert not _blob(directory).exists()


@pure_python
@needs_gcs
@pytest.mark.parametrize('offset', [60, -60])
def test_on_gcs_a_taker_whose_clock_is_off_never_takes_a_live_lease(offset):
  """A live holder (another process, heartbeat every 2 s): a taker 60 s ahead watches and sees
  it renewed; one 60 s behind is refused at once, and says the clocks differ."""
  directory = _bucket_dir()
  with Holder(directory):
    taker = lease_lib.Lease(directory, '--model_dir', 12, wall_clock=lambda: time.time() + offset)
    expected = ('It renewed its lease while this command watched it' if offset > 0 else
                r"last heartbeat just now \(this machine's clock is \d+ s behind the storage's\)")
    with pytest.raises(lease_lib.LeaseHeld, match=expected):
      taker.acquire()
    assert b'lease-holder' in _blob(directory).download_as_bytes()


# A holder killed (kill -9) inside its second renewal: before the request is sent, or after it
# landed and before its answer is read.
_KILLED_IN_RENEWAL = textwrap.dedent("""
    import os, signal, sys
    from trainer.storage import lease, lease_stores
    upload, when = lease_stores.GcsStore._upload, sys.argv[2]
    def killed_inside(store, content, generation, budget):
      if content.get('beats') == 2 and when == 'before':
        os.kill(os.getpid(), signal.SIGKILL)
      version = upload(store, content, generation, budget)
      if content.get('beats') == 2:
        os.kill(os.getpid(), signal.SIGKILL)
      return version
    lease_stores.GcsStore._upload = killed_inside
    held = lease.Lease(sys.argv[1], '--model_dir', 12, 'lease-holder').acquire()
    held.renew()
    held.renew()
    """)


@pure_python
@needs_gcs
@pytest.mark.parametrize('when', ['before', 'after'])
def test_on_gcs_a_holder_killed_inside_its_renewal_is_taken_over_at_once(when, caplog):
  """The kill harness's point inside the lease code: whether the killed renewal landed or not,
  the next run on this machine takes the dead holder's lease over at once (its process is gone)
  with a warning, holds it and releases it; nothing is left."""
  directory = _bucket_dir()
  killed = subprocess.run([sys.executable, '-c', _KILLED_IN_RENEWAL, directory, when], cwd=REPO,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=120)
  assert killed.returncode == -9, killed.stderr[-3000:]
  left = json.loads(_blob(directory).download_as_bytes())
  assert left['command'] == 'lease-holder' and left['beats'] == (2 if when == 'after' else 1)
  started = time.monotonic()
  taker = lease_lib.Lease(directory, '--model_dir', 12, 'taker').acquire()
  assert time.monotonic() - started < 5
  assert 'Took over the lease of %s' % directory in caplog.text and taker.took_over
  taker.check()
  assert json.loads(_blob(directory).download_as_bytes())['command'] == 'taker'
  taker.release()
  assert not _blob(directory).exists()


@pure_python
@needs_gcs
def test_on_gcs_a_renewal_that_landed_unanswered_is_kept():
  """A renewal that reached the storage but whose answer was lost (written here as the holder's
  own content, as it landed): the next heartbeat reads it back, keeps it (the token is this
  run's) and renews; check() passes and the release deletes it."""
  directory = _bucket_dir()
  holder = lease_lib.Lease(directory, '--model_dir', 12).acquire()
  landed = json.loads(_blob(directory).download_as_bytes())
  landed['beats'] += 1
  _blob(directory).upload_from_string(json.dumps(landed))
  holder.renew()  # one heartbeat, now
  holder.renew()
  assert holder.lost is None
  holder.check()
  assert json.loads(_blob(directory).download_as_bytes())['beats'] == landed['beats'] + 1
  holder.release()
  assert not _blob(directory).exists()


def test_a_stopped_trainer_inside_its_checkpoint_save_keeps_the_directory(small_dir, tmp_path):
  """trainer.main stopped (SIGSTOP) inside its second checkpoint save (step 10), after its data
  files and before the `checkpoint` state file (in life: a hung NFS write, a suspended VM), its
  lease file made an hour old: a second training run is refused (exit 2, naming it); resumed
  (SIGCONT), it finishes its own run, and the directory's checkpoints and results are its own."""
  model_dir = str(tmp_path / 'model')
  args = _cnn(small_dir, model_dir, '--mode=train', '--train_steps=30',
              '--save_checkpoints_steps=10')
  with stopped_at('checkpoint:2:STOP', args) as stalled:
    stale = time.time() - 3600
    os.utime(os.path.join(model_dir, lease_lib.LEASE_FILE), (stale, stale))
    second = run_main(*args)
    os.kill(stalled.proc.pid, signal.SIGCONT)
    assert stalled.proc.wait(120) == 0, stalled.stderr[-3000:]
  refused(second, 'is being written by another run', 'pid %d on ' % stalled.proc.pid,
          'its process stopped')
  assert results_of(model_dir)['global_step'] == 30
  assert sorted(_checkpoint_times(model_dir)) == [0, 10, 20, 30]  # stopped in the save of step 10


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


@needs_gcs
def test_on_gcs_the_state_fence_reads_back_at_once_replaces_a_stale_write_and_stops_a_stale_run(
    caplog):
  """The state file written through the fence is what TensorFlow reads at once (its GCS stat
  cache would cut the longer file to the old size for 5 s: trainer/__init__.py turns it off); a
  write by a stale holder meanwhile is replaced while this run's lease reads back as its own;
  once another run holds the lease, this run's write is refused with LeaseLost."""
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top

  from trainer.storage import state_fence  # pylint: disable=g-import-not-at-top
  directory = _bucket_dir()
  holder = lease_lib.Lease(directory, '--model_dir', 12).acquire()
  tf.train.update_checkpoint_state(directory, directory + '/model.ckpt-1')
  newest = lambda: tf.train.get_checkpoint_state(directory).model_checkpoint_path  # noqa: E731
  assert newest() == directory + '/model.ckpt-1'  # its size now in TensorFlow's stat cache
  fence = state_fence.StateFence(directory, holder)
  fence.claim()
  def state(step):
    return 'model_checkpoint_path: "%s/model.ckpt-%s-%d"\n' % (directory, fence.run_name, step)
  fence.write(state(20))
  assert newest().endswith('-20')
  stale = storage_blob(directory, state_fence.STATE_FILE)
  stale.upload_from_string('model_checkpoint_path: "%s/model.ckpt-10"\n' % directory)
  fence.write(state(30))
  assert 'was written by another process since this run wrote it (a stalled holder' in caplog.text
  assert newest().endswith('-30')
  take_over(directory)
  stale.upload_from_string('model_checkpoint_path: "%s/model.ckpt-10"\n' % directory)
  with pytest.raises(lease_lib.LeaseLost, match='another run took it over'):
    fence.write(state(40))
  assert newest().endswith('/model.ckpt-10')
  holder.release()


def _save_variable(prefix, *values):
  """Saves checkpoints of one variable `v`, <prefix>-STEP for each (value, STEP) in `values`,
  with one Saver (the state file lists them all); returns their prefixes."""
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  with tf.Graph().as_default():
    variable = tf.get_variable('v', initializer=0.0)
    saver = tf.train.Saver(max_to_keep=10)
    with tf.Session() as session:
      saved = []
      for value, step in values:
        session.run(variable.assign(value))
        saved.append(saver.save(session, prefix, global_step=step))
      return saved


@needs_gcs
def test_on_gcs_the_state_rewrite_after_a_divergence_is_fenced():
  """gs://: after a divergence the run moves its NaN checkpoints into damaged/ and rewrites the
  state file to name the newest finite one, through its fence, before it moves anything. A run
  whose lease was taken over (and whose state file the new holder claimed) is refused there
  (LeaseLost): the new holder's checkpoint stays in place and its state file unchanged (without
  the fence the stale run moved it aside and named its own)."""
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top

  from trainer.run import checkpoints  # pylint: disable=g-import-not-at-top
  from trainer.storage import state_fence  # pylint: disable=g-import-not-at-top
  model_dir = _bucket_dir()
  finite = _save_variable(model_dir + '/model.ckpt', (1.0, 1), (float('nan'), 2))[0]
  fence = state_fence.StateFence(
      model_dir, lease_lib.Lease(model_dir, '--model_dir', 12, 'test').acquire())
  fence.claim()
  assert checkpoints.newest_intact_checkpoint(model_dir, finite=True, fence=fence) == finite
  assert tf.train.latest_checkpoint(model_dir) == finite
  assert tf.io.gfile.exists(model_dir + '/damaged/model.ckpt-2.index')
  theirs = _save_variable(model_dir + '/model.ckpt', (float('nan'), 3))[0]  # NaN: to be moved
  take_over(model_dir)
  # The new holder's state file: its step 3 (NaN, which a stale rewrite would move aside) after
  # the intact step 1, so the stale run's rewrite is refused by the generation match.
  claimed = ('model_checkpoint_path: "model.ckpt-3"\n'
             'all_model_checkpoint_paths: "model.ckpt-1"\n'
             'all_model_checkpoint_paths: "model.ckpt-3"\n').encode()
  storage_blob(model_dir, 'checkpoint').upload_from_string(claimed)
  with pytest.raises(lease_lib.LeaseLost):
    checkpoints.newest_intact_checkpoint(model_dir, finite=True, fence=fence)
  assert tf.io.gfile.exists(theirs + '.index')
  assert storage_blob(model_dir, 'checkpoint').download_as_bytes() == claimed


@pure_python
@needs_gcs
def test_on_gcs_results_json_is_fenced_as_the_state_file_is():
  """results.json through its fence (trainer.run.results.finish on gs://): the holder's writes
  land; once another run took the lease and claimed the file, the stale holder's write is
  refused with LeaseLost and the new holder's results stay."""
  from trainer.run import results as results_lib  # pylint: disable=g-import-not-at-top
  from trainer.storage import json_files  # pylint: disable=g-import-not-at-top
  from trainer.storage import state_fence  # pylint: disable=g-import-not-at-top
  directory = _bucket_dir()
  holder = lease_lib.Lease(directory, '--model_dir', 12).acquire()
  fence = state_fence.StateFence(directory, holder, results_lib.RESULTS_FILE, 'the results file')
  fence.claim()
  fence.write(json_files.text({'global_step': 10}))
  results = storage_blob(directory, results_lib.RESULTS_FILE)
  assert json.loads(results.download_as_bytes()) == {'global_step': 10}
  take_over(directory)
  results.upload_from_string(json_files.text({'global_step': 20}))  # the new holder's claim
  with pytest.raises(lease_lib.LeaseLost, match='another run took it over'):
    fence.write(json_files.text({'global_step': 10, 'export_path': 'stale'}))
  assert json.loads(results.download_as_bytes()) == {'global_step': 20}
  holder.release()


@needs_gcs
@pytest.mark.one_runtime('TF 1.15\'s fenced state-file write is refused in the stalled mirrored '
                         'trainer\'s test on gs://, and a lost holder stops in its [local] case')
def test_on_gcs_a_stalled_trainer_that_lost_its_lease_lands_no_checkpoint(small_dir):
  """gs://, expiry 12 s: trainer.main stopped (SIGSTOP) inside its checkpoint save at step 10,
  its files written and the state file not yet; a second run takes over once the lease has been
  silent for 12 s and then for 12 s more by its own clock, trains to step 20 and ends. The
  stalled run, resumed, is refused the state file (its generation changed) and stops with
  LeaseLost: the newest checkpoint stays the second run's step 20 (before the fence it pointed
  the state file at its own step 10, rewinding the run), no file of the second run was written
  over (each run's checkpoints carry its name), and the stalled run's orphaned step 10 was
  deleted by the second run."""
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  model_dir = _bucket_dir()
  args = main_args(_cnn(small_dir, model_dir, '--mode=train', '--train_steps=20',
                        '--save_checkpoints_steps=10', '--lease_expiry_secs=12'))
  with stopped_at('checkpoint:2:STOP', args) as stalled:
    time.sleep(13)  # its lease unrenewed for the expiry by the storage's clock
    second = ok(run_main(*args))
    assert 'Took over the lease of %s' % model_dir in second.stderr
    os.kill(stalled.proc.pid, signal.SIGCONT)
    assert stalled.proc.wait(120) == 2, stalled.stderr[-3000:]
  assert "error: this run lost the writer's lease of --model_dir=%s" % model_dir in \
      stalled.stderr, stalled.stderr[-3000:]
  newest = tf.train.latest_checkpoint(model_dir)
  assert re.search(r'/model\.ckpt-[0-9a-f]{8}-20$', newest), newest
  assert results_of(model_dir)['global_step'] == 20
  # The stalled run's step-10 files, named by no state file, were deleted by the second run as it
  # started (its fences claimed); its step 0, which the state file named then, was kept.
  orphan = re.search(r"Deleting (gs://\S+/model\.ckpt-([0-9a-f]{8})-10): a checkpoint no state "
                     r"file names", second.stderr)
  assert orphan, second.stderr[-3000:]
  assert not tf.io.gfile.glob(orphan.group(1) + '.*')
  assert tf.io.gfile.glob('%s/model.ckpt-%s-0.index' % (model_dir, orphan.group(2)))
  runs = {re.match(r'model\.ckpt-([0-9a-f]{8})-10\.index$', n).group(1)
          for n in tf.io.gfile.listdir(model_dir) if re.match(r'model\.ckpt-\w+-10\.index$', n)}
  assert runs == {newest.split('-')[-2]}, runs  # the second run's own, each run's by its name


@needs_gcs
def test_on_gcs_a_stalled_mirrored_trainer_names_no_checkpoint_after_a_takeover(small_dir):
  """gs://, MirroredStrategy over two CPU replicas: trainer.main stopped (SIGSTOP) inside its
  second checkpoint save (step 10), its files written and the state file not yet; another run
  takes the lease over and rewrites the state file (as its start does, claiming it). The stalled
  run, resumed, is refused the state file and stops with LeaseLost (status 2): the state file
  stays the new holder's (with TensorFlow's Saver, which MirroredStrategy runs kept before, the
  stale write landed and the run trained on), and its checkpoints carry its run's name."""
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  model_dir = _bucket_dir()
  args = _cnn(small_dir, model_dir, '--mode=train', '--train_steps=20',
              '--save_checkpoints_steps=10', '--mirrored_devices=/cpu:0,/cpu:1',
              '--skip_host_call')
  theirs = ('model_checkpoint_path: "model.ckpt-0ther000-10"\n'
            'all_model_checkpoint_paths: "model.ckpt-0ther000-10"\n')
  with stopped_at('checkpoint:2:STOP', args) as stalled:
    take_over(model_dir)
    storage_blob(model_dir, 'checkpoint').upload_from_string(theirs)
    os.kill(stalled.proc.pid, signal.SIGCONT)
    assert stalled.proc.wait(120) == 2, stalled.stderr[-3000:]
  assert "error: this run lost the writer's lease of --model_dir=%s" % model_dir in \
      stalled.stderr, stalled.stderr[-3000:]
  assert storage_blob(model_dir, 'checkpoint').download_as_bytes().decode() == theirs
  steps = sorted(int(m.group(1)) for m in (
      re.match(r'model\.ckpt-[0-9a-f]{8}-(\d+)\.index$', n)
      for n in tf.io.gfile.listdir(model_dir)) if m)
  assert steps == [0, 10], tf.io.gfile.listdir(model_dir)


@needs_gcs
def test_on_gcs_a_trainer_stalled_before_its_results_lands_none_after_a_takeover(small_dir):
  """gs://: trainer.main (3 steps) stopped (SIGSTOP) right before it writes results.json, its
  lease checked; another run takes the lease over and claims results.json (written here as that
  run would). The stalled run, resumed, is refused the write and stops with LeaseLost (status 2):
  results.json stays the new holder's (without the fence the stalled run's replaced it)."""
  from trainer.storage import json_files  # pylint: disable=g-import-not-at-top
  model_dir = _bucket_dir()
  args = _cnn(small_dir, model_dir, '--mode=train', '--train_steps=3', '--skip_host_call')
  theirs = {'global_step': 20, 'written_by': 'the run that took over'}
  with stopped_at('results:1:STOP', args) as stalled:
    take_over(model_dir)
    storage_blob(model_dir, 'results.json').upload_from_string(json_files.text(theirs))
    os.kill(stalled.proc.pid, signal.SIGCONT)
    assert stalled.proc.wait(120) == 2, stalled.stderr[-3000:]
  assert "error: this run lost the writer's lease of --model_dir=%s" % model_dir in \
      stalled.stderr, stalled.stderr[-3000:]
  assert results_of(model_dir) == theirs


@needs_gcs
def test_on_gcs_a_trainer_stalled_inside_its_export_adds_no_version_after_a_takeover(small_dir):
  """gs://: trainer.main (3 steps, --export_dir in the bucket) stopped (SIGSTOP) inside its
  SavedModel export (variables written, saved_model.pb not yet); another run takes the lease
  over. The stalled run, resumed, finishes writing its SavedModel where it is staged, reads the
  lease before renaming it into place, and stops with LeaseLost (status 2): the export folder
  gains no version (without the check the stale run's landed there, the newest version a
  TensorFlow Serving of that folder would serve) and keeps none of its staged files. The
  model_dir is given as Vertex AI's mount of the bucket (/gcs/BUCKET/...), which the run reads
  and writes through the Cloud Storage API (its fences need it)."""
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  model_dir = _bucket_dir()
  export_dir = model_dir + '-export'
  mount_dir = '/gcs/' + model_dir[len('gs://'):]
  args = _cnn(small_dir, mount_dir, '--mode=train', '--train_steps=3', '--skip_host_call',
              '--export_dir=' + export_dir)
  with stopped_at('export:1:STOP', args) as stalled:
    assert [n for n in tf.io.gfile.listdir(export_dir) if n.startswith('temp-')], \
        'no staged export in %s' % tf.io.gfile.listdir(export_dir)
    take_over(model_dir)
    os.kill(stalled.proc.pid, signal.SIGCONT)
    assert stalled.proc.wait(120) == 2, stalled.stderr[-3000:]
  assert "error: this run lost the writer's lease of --model_dir=%s" % model_dir in \
      stalled.stderr, stalled.stderr[-3000:]
  left = tf.io.gfile.listdir(export_dir) if tf.io.gfile.exists(export_dir) else []
  assert left == [], left
  assert 'export_path' not in results_of(model_dir)
  assert 'as %s through the Cloud Storage API' % model_dir in stalled.stderr
  assert re.match(r'model\.ckpt-[0-9a-f]{8}-3$',
                  os.path.basename(tf.train.latest_checkpoint(model_dir)))
  assert not os.path.exists(mount_dir)


@needs_gcs
def test_on_gcs_a_trainer_stalled_before_its_best_checkpoint_names_none_after_a_takeover(
    small_dir):
  """gs://: trainer.main (train_and_eval, 3 steps) stopped (SIGSTOP) after copying its new best
  checkpoint into best/ and before naming it in best/checkpoint, its lease checked; another run
  takes the lease over and writes best/'s two files (here as that run would). The stalled run,
  resumed, is refused the write and stops with LeaseLost (status 2): best/checkpoint and best.json
  stay the new holder's (without the fence the stalled run replaced both, pointing best/ back at
  its own copy), and the stalled run's copy, named by its run, is referenced by nothing."""
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top

  from trainer.storage import json_files  # pylint: disable=g-import-not-at-top
  model_dir = _bucket_dir()
  args = _cnn(small_dir, model_dir, '--mode=train_and_eval', '--train_steps=3',
              '--skip_host_call')
  theirs = {'metric': 'top_1_accuracy', 'evaluations': [{'global_step': 20, 'top_1_accuracy': 1}],
            'best': {'global_step': 20, 'top_1_accuracy': 1,
                     'checkpoint': model_dir + '/best/model.ckpt-0ther000-20'}}
  their_state = ('model_checkpoint_path: "model.ckpt-0ther000-20"\n'
                 'all_model_checkpoint_paths: "model.ckpt-0ther000-20"\n')
  with stopped_at('best:1:STOP', args) as stalled:
    take_over(model_dir)
    storage_blob(model_dir, 'best/checkpoint').upload_from_string(their_state)
    storage_blob(model_dir, 'best/best.json').upload_from_string(json_files.text(theirs))
    os.kill(stalled.proc.pid, signal.SIGCONT)
    assert stalled.proc.wait(120) == 2, stalled.stderr[-3000:]
  assert "error: this run lost the writer's lease of --model_dir=%s" % model_dir in \
      stalled.stderr, stalled.stderr[-3000:]
  assert storage_blob(model_dir, 'best/checkpoint').download_as_bytes().decode() == their_state
  assert json.loads(storage_blob(model_dir, 'best/best.json').download_as_bytes()) == theirs
  copies = [n for n in tf.io.gfile.listdir(model_dir + '/best') if n.endswith('.index')]
  assert copies and all(re.match(r'model\.ckpt-[0-9a-f]{8}-3\.index$', n) for n in copies), copies


def _checkpoint_times(model_dir):
  """{step: the time its .index file was written (seconds since the epoch)}: model.ckpt-STEP, or
  on gs:// model.ckpt-RUN-STEP (trainer/run/fenced_saver.py)."""
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  found = {}
  for name in tf.io.gfile.listdir(model_dir):
    match = re.match(r'^model\.ckpt-(?:[0-9a-f]{8}-)?(\d+)\.index$', name)
    if match:
      found[int(match.group(1))] = tf.io.gfile.stat('%s/%s' % (model_dir, name)).mtime_nsec / 1e9
  return found


@pytest.mark.parametrize('where', split_cases(
    ['local'], ['gs'], 'the other runtime stops the holder on the other storage',
    marks={'gs': needs_gcs}))
def test_a_holder_that_lost_its_lease_stops_before_its_next_checkpoint(where, small_dir,
                                                                        tmp_path):
  """Training (checkpoints every 20 steps; on gs:// a heartbeat every 2 s) whose lease another
  machine's run takes over (locally: its lease file replaced): it stops with exit 2 and
  LeaseLost's message, writes no checkpoint after the takeover and leaves the new holder's lease
  in place."""
  model_dir = str(tmp_path / 'model') if where == 'local' else _bucket_dir()
  args = _cnn(small_dir, model_dir, '--mode=train', '--train_steps=100000',
              '--save_checkpoints_steps=20', '--lease_expiry_secs=12')
  with BackgroundRun(*args) as run:
    run.wait_for_step(25)  # past the checkpoint at step 20
    take_over(model_dir)
    taken_at = time.time()
    assert run.wait(60) == 2, run.stderr[-3000:]
  assert 'Traceback' not in run.stderr.split('Reraising captured error')[-1]
  lost = ('its lease file %s/writer.lease was deleted or replaced' % model_dir if where == 'local'
          else 'another run took it over: trainer.main (pid 7 on another-machine')
  assert "error: this run lost the writer's lease of --model_dir=%s: %s" % (model_dir, lost) in \
      run.stderr, run.stderr[-3000:]
  # A save checks the lease first: none begun after the takeover (one may have been in flight).
  written = _checkpoint_times(model_dir)
  assert 20 in written and len([s for s, t in written.items() if t > taken_at]) <= 1, (
      taken_at, written)
  assert '"token": "other"' in _read_lease(model_dir)


def _read_lease(model_dir):
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  with tf.io.gfile.GFile(model_dir + '/' + lease_lib.LEASE_FILE) as f:
    return f.read()
