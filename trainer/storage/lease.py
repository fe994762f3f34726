"""One writer per run directory: a lease file, on local disk or gs://, renewed by a heartbeat.

TensorFlow has no lock on a model_dir: a second writer deletes checkpoints it did not write
(tensorflow/tensorflow#34234) or overwrites the `checkpoint` state file. So every command that
writes a run directory (trainer.main's training modes, trainer.train_keras, trainer.prepare)
holds `<directory>/writer.lease` while it writes:

- **Taken** by creating the file only if none exists: on gs:// an upload with
  `ifGenerationMatch=0` ("the object is created only if there is no live object of that name",
  https://cloud.google.com/storage/docs/request-preconditions); on local disk a hard link of a
  fully written file (link(2) fails with EEXIST when the name exists). It holds the holder's
  host, pid, job id (`CLOUD_ML_JOB_ID`) and start time.
- **Renewed** every `expiry_secs / 6` (the heartbeat): on gs:// an upload with
  `ifGenerationMatch=<the generation it wrote last>`, so a holder that lost the lease cannot write
  it again; on local disk a rename over it after checking that it is still this holder's.
  GCS allows about one write per second to one object name
  (https://cloud.google.com/storage/quotas): `expiry_secs` is at least 6, a heartbeat at least
  every second.
- **Refused** to a second writer (`LeaseHeld`, exit status 2 from the commands), naming the
  holder and its last heartbeat.
- **Taken over** with a warning when the holder is dead: its heartbeat is older than
  `expiry_secs` (the last-modified time of the file or object), or it ran on this machine (same
  host name, boot and pid namespace) and its process is gone (a kill -9, an out-of-memory kill).
- **Lost** when another writer took it over (a generation or holder mismatch) or when the heartbeat
  could not renew it for `expiry_secs` (a network partition: another writer may have taken it).
  `check()` then raises `LeaseLost`; the trainers call it before every checkpoint and output, so
  a holder that lost its lease stops without writing over the new holder's files.
- **Released** at exit (deleted on gs:// with a generation match: never another holder's).

Read-only commands (evaluation, prediction, export) take no lease. In a cluster the chief
holds it for the whole job.
"""

import os
import threading
import time
import uuid

from absl import logging

from trainer.errors import PipelineError
from trainer.storage import lease_stores

LEASE_FILE = 'writer.lease'
DEFAULT_EXPIRY_SECS = 180
MIN_EXPIRY_SECS = 6


class LeaseHeld(PipelineError):
  """Another live run holds the directory's lease."""


class LeaseLost(PipelineError):
  """This run's lease was taken over, or could not be renewed for expiry_secs."""


def _expiry_of(holder, default):
  """The expiry the holder renews its lease within (its own --lease_expiry_secs)."""
  try:
    return max(MIN_EXPIRY_SECS, int(holder.get('expiry_secs', default)))
  except (TypeError, ValueError):
    return default


def _describe(holder, age):
  return ('%s (pid %s on %s%s, started %s), last heartbeat %.0f s ago'
          % (holder.get('command') or 'a run', holder.get('pid', '?'), holder.get('host', '?'),
             ', job %s' % holder['job_id'] if holder.get('job_id') else '',
             holder.get('started', '?'), age))


class Lease(object):
  """The writer's lease on one directory (see the module docstring). Use `held()`."""

  def __init__(self, directory, flag, expiry_secs=DEFAULT_EXPIRY_SECS, command=''):
    """directory: local or gs://; flag: what named it ('--model_dir'), for messages; command:
    the holder's command ('trainer.main'), recorded in the lease."""
    self.directory = directory.rstrip('/')
    self.path = '%s/%s' % (self.directory, LEASE_FILE)
    self.flag = flag
    self.expiry_secs = max(MIN_EXPIRY_SECS, expiry_secs)
    self._store = None
    self._content = dict(lease_stores.this_process(command), token=uuid.uuid4().hex, beats=0,
                         expiry_secs=self.expiry_secs)
    self._version = None
    self._renewed = None  # time.monotonic() of the last successful write
    self._lost = None  # why, once lost
    self._lock = threading.Lock()  # a renewal's write and its new version, against check()
    self._stop = threading.Event()
    self._thread = None
    self._created_directory = False
    self.took_over = None  # the content of the dead holder's lease, when acquire() took it over

  def _open_store(self):
    if self.directory.startswith('gs://'):
      try:
        return lease_stores.GcsStore(self.path)
      except ImportError:
        raise PipelineError('%s=%s is on Google Cloud Storage, and its writer\'s lease needs '
                            'google-cloud-storage: pip install google-cloud-storage.'
                            % (self.flag, self.directory))
    if not os.path.isdir(self.directory):
      try:
        os.makedirs(self.directory)
        self._created_directory = True
      except FileExistsError:  # another run created it meanwhile
        pass
    return lease_stores.LocalStore(self.path)

  def _mine(self, current):
    """Whether a lease read back is this run's own write (a conditional write whose answer was
    lost, and whose retry was refused because the first attempt had succeeded)."""
    return (current is not None and current[0].get('token') == self._content['token'] and
            current[0].get('beats') == self._content['beats'])

  def acquire(self):
    """Takes the lease, taking over a dead holder's with a warning.

    Raises:
      LeaseHeld: a live run holds it.
      PipelineError: the directory cannot be written (what the storage said).
    """
    try:
      self._store = self._open_store()
      for _ in range(3):  # a holder that releases, or another taker, between our calls
        try:
          self._version = self._store.create(self._content)
          break
        except lease_stores.Conflict:
          pass
        current = self._store.read()
        if current is None:
          continue
        if self._mine(current):
          self._version = current[1]
          break
        holder, version, age = current
        gone = lease_stores.holder_is_gone(holder)
        expiry = _expiry_of(holder, self.expiry_secs)
        if not gone and age < expiry:
          raise LeaseHeld(
              '%s=%s is being written by another run: %s (lease %s). Two runs writing one '
              'directory delete each other\'s checkpoints and outputs. Wait for that run to end '
              'or stop it, or choose another %s. If it died, its lease expires %d s after its '
              'last heartbeat and this command then takes over.'
              % (self.flag, self.directory, _describe(holder, age), self.path, self.flag, expiry))
        try:
          self._version = self._store.take_over(self._content, version)
        except lease_stores.Conflict:
          current = self._store.read()
          if not self._mine(current):
            continue
          self._version = current[1]
        self.took_over = holder
        logging.warning('Took over the lease of %s from %s: %s.', self.directory,
                        _describe(holder, age),
                        'its process is gone' if gone else
                        'no heartbeat for over %d s (its run died)' % expiry)
        break
      else:
        raise LeaseHeld('%s=%s: another run took its lease at the same moment; run the command '
                        'again to see which.' % (self.flag, self.directory))
    except (OSError, IOError) as e:
      raise PipelineError('%s=%s cannot be written (%s). Choose a directory this user can '
                          'write.' % (self.flag, self.directory, e))
    self._renewed = time.monotonic()
    if isinstance(self._store, lease_stores.LocalStore):
      self._store.clear_leftovers()
    logging.info('Holding the writer\'s lease %s (heartbeat every %d s).', self.path,
                 self.expiry_secs // 6)
    return self

  def _lost_to(self, current):
    return ('another run took it over: %s' % _describe(current[0], current[2]) if current
            else 'its lease file %s was deleted' % self.path)

  def _beat(self):
    if self._lost:
      return
    with self._lock:
      self._content['beats'] += 1
      try:
        self._version = self._store.replace(self._content, self._version)
        self._renewed = time.monotonic()
        return
      except lease_stores.Conflict:
        try:
          current = self._store.read()
        except Exception:  # pylint: disable=broad-except  # judged at the next beat
          return
        if self._mine(current):
          self._version, self._renewed = current[1], time.monotonic()
          return
        self._lost = self._lost_to(current)
      except Exception as e:  # pylint: disable=broad-except  # storage errors of every kind
        silent = time.monotonic() - self._renewed
        if silent < self.expiry_secs:
          logging.warning('Could not renew the lease %s (%s: %s); trying again.', self.path,
                          type(e).__name__, e)
          return
        self._lost = ('it could not be renewed for %.0f s (%s), so another run may hold it now'
                      % (silent, e))
    logging.error('Lost the writer\'s lease of %s: %s.', self.directory, self._lost)

  def _heartbeat(self):
    while not self._stop.wait(self.expiry_secs / 6.0):
      self._beat()
      if self._lost:
        return

  def check(self):
    """Raises LeaseLost when this run no longer holds the lease: read from the storage (unless
    the heartbeat already found out) and judged by its holder's token; called before every
    checkpoint and output."""
    if not self._lost:
      with self._lock:
        try:
          current = self._store.read(quick=True)
        except Exception:  # pylint: disable=broad-except  # outages are the heartbeat's to judge
          current = ({'token': self._content['token']}, None, 0)
        if current is None or current[0].get('token') != self._content['token']:
          self._lost = self._lost_to(current)
    if self._lost:
      raise LeaseLost('this run lost the writer\'s lease of %s=%s: %s. It stopped without '
                      'writing further; the newest checkpoint it wrote before stays.'
                      % (self.flag, self.directory, self._lost))

  @property
  def lost(self):
    """Why the heartbeat found the lease lost, or None."""
    return self._lost

  def start_heartbeat(self):
    self._thread = threading.Thread(target=self._heartbeat, name='lease-heartbeat', daemon=True)
    self._thread.start()

  def release(self):
    """Stops the heartbeat and deletes the lease if this run still holds it (and the local
    directory, if the lease created it and nothing else is in it)."""
    self._stop.set()
    if self._thread:
      self._thread.join()
    if self._lost or self._store is None or self._version is None:
      return
    try:
      self._store.delete(self._version)
    except lease_stores.Conflict:
      return
    except Exception as e:  # pylint: disable=broad-except
      logging.warning('Could not release the lease %s (%s); the next run takes it over after '
                      '%d s.', self.path, e, self.expiry_secs)
      return
    if self._created_directory:
      try:
        os.rmdir(self.directory)
      except OSError:
        pass


class held(object):  # pylint: disable=invalid-name
  """`with lease.held(directory, flag, expiry_secs, command) as lease:` takes the lease (or, with
  `needed=False`, nothing: `lease` is None), renews it while the block runs and releases it
  after, whatever ends the block."""

  def __init__(self, directory, flag, expiry_secs=DEFAULT_EXPIRY_SECS, command='', needed=True):
    self._lease = Lease(directory, flag, expiry_secs, command) if needed else None

  def __enter__(self):
    if self._lease:
      self._lease.acquire()
      self._lease.start_heartbeat()
    return self._lease

  def __exit__(self, *exc):
    if self._lease:
      self._lease.release()
