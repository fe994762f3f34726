"""One writer per run directory: a lease on it, held by the writer for as long as it writes.

TensorFlow has no lock on a model_dir: a second writer deletes checkpoints it did not write
(tensorflow/tensorflow#34234) or overwrites the `checkpoint` state file. So every command that
writes a run directory (trainer.main's training modes, trainer.train_keras, trainer.train_torch,
trainer.prepare) holds `<directory>/writer.lease` while it writes, naming its holder (host, pid,
job id, command, start time, a Dataflow job it started) for the message of a run it refuses
(`LeaseHeld`, exit status 2). What it promises, per store (docs/reliability.md):

- **Local disk (and NFS)**: the holder keeps the file locked with flock(2) (LocalStore): a second
  run is refused while the holder's process exists, stopped or hung included, and takes over the
  moment it is gone. No heartbeat, no clock.
- **gs:// and Vertex AI's `/gcs/BUCKET/...` mount**: an object created with `ifGenerationMatch=0`,
  renewed every `expiry_secs / 6`, deleted with a generation match
  (https://cloud.google.com/storage/docs/request-preconditions); the expiry is at least 12 s (about
  one write per second per object: https://cloud.google.com/storage/quotas). One clock decides:
  the holder gives up after 2/3 of the expiry without a renewal (its own clock, from when the
  renewal was sent); a taker elsewhere takes over only after seeing one generation unchanged for
  the holder's whole expiry by its own clock (as etcd and Chubby do). A holder on this machine
  whose process is gone, or a damaged lease, is taken over at once; one whose Dataflow job may
  still run, never. Calls are bounded by the heartbeat period, never made under the state's lock.
  A save stalled past a takeover is fenced by the state file's generation (state_fence.py).

Ownership is the holder's random token only (a renewal that landed unanswered is kept). `check()`
is called before every checkpoint and output; workers writing for the holder check its token
(writer_token.py). Read-only commands take no lease.
"""

import contextlib
import errno
import os
import threading
import time
import uuid

from absl import logging

from trainer.errors import PipelineError
from trainer.storage import lease_stores

LEASE_FILE = 'writer.lease'
DEFAULT_EXPIRY_SECS = 180
MIN_EXPIRY_SECS = 12
GIVE_UP_FRACTION = 2.0 / 3  # of the expiry: the holder stops writing this long without a renewal


class LeaseHeld(PipelineError):
  """Another live run holds the directory's lease."""


class LeaseLost(PipelineError):
  """This run's lease was taken over, or could not be renewed for 2/3 of its expiry."""


def _clock():
  """Seconds on this machine's clock that keeps counting through a suspend (CLOCK_BOOTTIME;
  CLOCK_MONOTONIC stops while a VM is suspended, which would hide the stall a holder must
  notice)."""
  return time.clock_gettime(time.CLOCK_BOOTTIME)


def _period(expiry):
  return expiry / 6.0


class Lease(object):
  """The writer's lease on one directory (see the module docstring). Use `held()`."""

  def __init__(self, directory, flag, expiry_secs=DEFAULT_EXPIRY_SECS, command='',
               wall_clock=time.time):
    """directory: local, gs:// or /gcs/; flag: what named it ('--model_dir'), for messages;
    command: the holder's command ('trainer.main'), recorded in the lease; wall_clock: this
    machine's time in seconds since the epoch (a test offsets it)."""
    self.directory = directory.rstrip('/')
    self.path = '%s/%s' % (self.directory, LEASE_FILE)
    self.flag = flag
    self.expiry_secs = max(MIN_EXPIRY_SECS, expiry_secs)
    self._wall_clock = wall_clock
    self._store = None
    self._local = lease_stores.object_path(self.directory) is None
    self._content = dict(lease_stores.this_process(command), token=uuid.uuid4().hex, beats=0,
                         expiry_secs=self.expiry_secs)
    self._version = None
    self._renewed = None  # _clock() when the last successful write was sent
    self._lost = None  # why, once lost
    self._lock = threading.Lock()  # the state below, between the heartbeat and check()
    self._write_lock = threading.Lock()
    self._stop = threading.Event()
    self._thread = None
    self._created_directory = False
    self.took_over = None  # the content of the dead holder's lease, when acquire() took it over

  def _open_store(self):
    try:
      self._store, self._created_directory = lease_stores.open_store(self.directory, self.path)
    except ImportError:
      raise PipelineError('%s=%s is on Google Cloud Storage, and its writer\'s lease needs '
                          'google-cloud-storage: pip install google-cloud-storage.'
                          % (self.flag, self.directory))

  def _mine(self, content):
    """Whether a lease read back is this run's (its token: a renewal whose answer was lost but
    which landed is this run's too)."""
    return content.get('token') == self._content['token']

  def acquire(self):
    """Takes the lease, taking over a dead holder's with a warning.

    Raises:
      LeaseHeld: a live run holds it.
      PipelineError: the directory cannot be written or locked (what the storage said), or the
        lease's path holds a symbolic link or a directory.
    """
    try:
      self._open_store()
      if self._local:
        self._acquire_local()
      else:
        self._acquire_object()
    except lease_stores.NotALease as e:
      raise PipelineError('%s=%s: %s.' % (self.flag, self.directory, e))
    except (OSError, IOError) as e:
      if getattr(e, 'errno', None) == errno.ENOLCK:
        raise PipelineError('%s=%s is on a file system without file locks (%s), which the '
                            'writer\'s lease needs: mount it with locks (NFS without `nolock`), '
                            'or choose a local disk or gs:// directory.'
                            % (self.flag, self.directory, e))
      raise PipelineError('%s=%s cannot be written (%s). Choose a directory this user can '
                          'write.' % (self.flag, self.directory, e))
    if self._local:
      self._renewed = _clock()
      self._store.clear_leftovers()
      logging.info('Holding the writer\'s lease %s (locked while this process runs).', self.path)
    else:
      logging.info('Holding the writer\'s lease %s (heartbeat every %.0f s).', self.path,
                   _period(self.expiry_secs))
    return self

  def _held_message(self, holder, how):
    return ('%s=%s is being written by another run: %s (lease %s). Two runs writing one '
            'directory delete each other\'s checkpoints and outputs. Wait for that run to end or '
            'stop it, or choose another %s. %s'
            % (self.flag, self.directory, holder, self.path, self.flag, how))

  def _acquire_local(self):
    try:
      previous = self._store.lock(self._content)
    except lease_stores.Held:
      current = self._store.read()
      holder = current[0] if current else {}
      described = (lease_stores.describe(holder) if holder
                   else 'a process that has not named itself yet')
      state = ''
      if holder and lease_stores.same_machine(holder):
        state = lease_stores.process_state(holder.get('pid'))
      if state == 'T':
        described += (', its process stopped (SIGSTOP, a debugger or a suspended shell job: '
                      '`kill -CONT %s` resumes it, `kill %s` ends it)'
                      % (holder.get('pid'), holder.get('pid')))
      raise LeaseHeld(self._held_message(
          described, 'Its process holds the lease\'s lock; when that process ends, however it '
          'ends, this command can take over at once.'))
    if previous:
      self.took_over = previous
      logging.warning('Took over the lease of %s from %s: its process is gone (the kernel '
                      'released its lock).', self.directory, lease_stores.describe(previous))

  def _acquire_object(self):
    # _renewed: when the write that took it was sent (the holder's 2/3 counts from there).
    for _ in range(3):  # a holder that releases, or another taker, between our calls
      sent = _clock()
      try:
        self._version, self._renewed = self._store.create(self._content), sent
        return
      except lease_stores.Conflict:
        pass
      current = self._store.read()
      if current is None:
        continue
      holder, version, written = current
      if self._mine(holder):
        self._version, self._renewed = version, sent
        return
      why = self._why_dead(holder, version, self._wall_clock() - written)
      if why is None:  # deleted while we watched: create it
        continue
      sent = _clock()
      try:
        self._version = self._store.take_over(self._content, version)
      except lease_stores.Conflict:
        current = self._store.read()
        if current is None or not self._mine(current[0]):
          continue
        self._version = current[1]
      self._renewed = sent
      self.took_over = holder
      logging.warning('Took over the lease of %s from %s: %s.', self.directory,
                      lease_stores.describe(holder), why)
      return
    raise LeaseHeld('%s=%s: another run took its lease at the same moment; run the command '
                    'again to see which.' % (self.flag, self.directory))

  def _why_dead(self, holder, version, age):
    """Why the holder at `version` is dead (str); None when its lease vanished meanwhile.
    Raises LeaseHeld when it is, or may be, alive."""
    if 'damaged' in holder:
      return 'no run can renew a damaged lease'
    if holder.get('dataflow_job'):  # its workers may write on, whatever became of the holder
      raise LeaseHeld(self._held_message(lease_stores.describe(holder, age),
                                         lease_stores.dataflow_hint(holder, self.path)))
    if lease_stores.holder_is_gone(holder):
      return 'its process is gone'
    expiry = lease_stores.expiry_of(holder, self.expiry_secs, MIN_EXPIRY_SECS)
    if age < expiry:
      raise LeaseHeld(self._held_message(lease_stores.describe(holder, age), (
          'If it died, this command takes over once the lease has not been renewed for %d s '
          '(its expiry).' % expiry)))
    # The storage's clock against this machine's says it died; only this machine's own clock may
    # say so: watch the same generation for the holder's whole expiry.
    logging.warning('The lease %s was last renewed %s by the storage\'s clock: waiting up to %d s '
                    'to see whether its holder, %s, renews it; taking it over if not.', self.path,
                    lease_stores.ago(age), expiry, lease_stores.describe(holder))
    start = _clock()
    while True:
      left = expiry - (_clock() - start)
      if left <= 0:
        return 'it was not renewed for %d s by this machine\'s clock (its run died)' % expiry
      time.sleep(min(_period(expiry), left))
      current = self._store.read()
      if current is None:
        return None
      if current[1] != version:
        raise LeaseHeld(self._held_message(
            lease_stores.describe(current[0]),
            'It renewed its lease while this command watched it.'))

  def _lose(self, why):
    with self._lock:
      if not self._lost:
        self._lost = why
        logging.error('Lost the writer\'s lease of %s: %s.', self.directory, why)

  def _lost_to(self, current):
    return ('another run took it over: %s' % lease_stores.describe(current[0]) if current
            else 'its lease file %s was deleted' % self.path)

  def renew(self):
    """One renewal, now (gs:// only; what the heartbeat does every period), bounded by it."""
    with self._write_lock:  # the heartbeat's and record()'s writes, one at a time
      self._renew(_period(self.expiry_secs))

  def _renew(self, period):
    with self._lock:
      if self._lost:
        return
      content = dict(self._content, beats=self._content['beats'] + 1)
      version = self._version
    sent = _clock()
    try:
      version = self._store.replace(content, version, budget=period)
    except lease_stores.Conflict:
      try:
        current = self._store.read(budget=period)
      except Exception:  # pylint: disable=broad-except  # judged at the next beat
        return
      if current is not None and self._mine(current[0]):  # a renewal that landed unanswered
        with self._lock:  # its beats; fields record() added meanwhile stay
          self._content['beats'], self._version = current[0].get('beats', 0), current[1]
        return
      self._lose(self._lost_to(current))
      return
    except Exception as e:  # pylint: disable=broad-except  # storage errors of every kind
      silent = _clock() - self._renewed
      if silent < self.expiry_secs * GIVE_UP_FRACTION:
        logging.warning('Could not renew the lease %s (%s: %s); trying again.', self.path,
                        type(e).__name__, e)
        return
      self._lose('it could not be renewed for %.0f s (%s), so another run may take it over'
                 % (silent, e))
      return
    with self._lock:  # fields record() added meanwhile stay
      self._content['beats'], self._version, self._renewed = content['beats'], version, sent

  def _heartbeat(self):
    while not self._stop.wait(_period(self.expiry_secs)):
      self.renew()
      if self._lost:
        return

  def check(self):
    """Raises LeaseLost when this run no longer holds the lease, or (gs://) has not renewed it
    for 2/3 of its expiry. Called before every checkpoint and output. Local: whether its locked
    file is still the lease file. gs://: one read, bounded by the heartbeat period (a read that
    fails counts for nothing: the renewal's age decides)."""
    if not self._lost:
      if self._local:
        if not self._store.held():
          self._lose('its lease file %s was deleted or replaced' % self.path)
      else:
        silent = _clock() - self._renewed
        if silent > self.expiry_secs * GIVE_UP_FRACTION:
          self._lose('it was not renewed for %.0f s (the storage did not answer), so another run '
                     'may take it over' % silent)
        else:
          self._read_back(quick=True, failed_read_is_mine=True)  # renewed recently
    if self._lost:
      raise LeaseLost('this run lost the writer\'s lease of %s=%s: %s. It stopped without '
                      'writing further; what it wrote before (its newest checkpoint) stays.'
                      % (self.flag, self.directory, self._lost))

  def confirm(self):
    """Raises LeaseLost unless a read of the storage, made now, shows this run's token (a read
    that fails counts against it): for a decision a stale holder must never take."""
    if not self._local and not self._lost:
      self._read_back(quick=False, failed_read_is_mine=False)
    self.check()

  def _read_back(self, quick, failed_read_is_mine):
    """Loses the lease (gs://) unless a read, made now and bounded by the heartbeat period,
    shows this run's token; a read that fails counts for it or against it as told."""
    try:
      current = self._store.read(quick=quick, budget=_period(self.expiry_secs))
    except Exception as e:  # pylint: disable=broad-except  # storage errors of every kind
      if not failed_read_is_mine:
        self._lose('its lease could not be read to confirm it (%s)' % e)
      return
    if current is None or not self._mine(current[0]):
      self._lose(self._lost_to(current))

  @property
  def token(self):  # this holder's random token (32 hex digits)
    return self._content['token']

  @property
  def lost(self):  # why the heartbeat or a check found the lease lost, or None
    return self._lost

  def record(self, **fields):
    """Adds `fields` to the holder's record, written now (`dataflow_job`: a taker refuses)."""
    with self._lock:
      self._content.update(fields)
    if self._local:
      self._store.rewrite(self._content)
    else:
      self.renew()

  def start_heartbeat(self):
    """Renews a gs:// lease in a thread (a local lease is held by its lock: no heartbeat)."""
    if self._local:
      return
    self._thread = threading.Thread(target=self._heartbeat, name='lease-heartbeat', daemon=True)
    self._thread.start()

  def release(self):
    """Stops the heartbeat and deletes the lease if this run still holds it (and the local
    directory, if the lease created it and nothing else is in it)."""
    self._stop.set()
    if self._thread:
      self._thread.join()
    if self._store is None:
      return
    if self._local:
      self._store.unlock()  # nothing when it never locked
      if self._created_directory:
        try:
          os.rmdir(self.directory)
        except OSError:
          pass
      return
    if self._lost or self._version is None:
      return
    if self._content.get('dataflow_job'):  # it may still write: the lease keeps saying so
      logging.error('Keeping the lease %s: %s', self.path,
                    lease_stores.dataflow_hint(self._content, self.path))
      return
    try:
      self._store.delete(self._version, budget=_period(self.expiry_secs))
    except lease_stores.Conflict:
      return
    except Exception as e:  # pylint: disable=broad-except
      logging.warning('Could not release the lease %s (%s); the next run takes it over %d s '
                      'after its last renewal.', self.path, e, self.expiry_secs)


@contextlib.contextmanager
def held(directory, flag, expiry_secs=DEFAULT_EXPIRY_SECS, command='', needed=True):
  """`with lease.held(directory, flag, expiry_secs, command) as lease:` takes the lease (or, with
  `needed=False`, nothing: `lease` is None), renews it while the block runs and releases it
  after, whatever ends the block."""
  if not needed:
    yield None
    return
  lease = Lease(directory, flag, expiry_secs, command)
  lease.acquire()
  try:
    lease.start_heartbeat()
    yield lease
  finally:
    lease.release()
