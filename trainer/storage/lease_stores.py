"""Where a writer's lease (lease.py) lives, and who holds it: the lease as a local file locked by
its holder's process, or as a GCS object created, renewed and deleted only if it is still the
generation the caller holds (else `Conflict`); and this process as a holder (host, pid, boot, pid
namespace)."""

import errno
import fcntl
import json
import os
import socket
import time

from trainer.storage import staged

_GCS_TIMEOUT_SECS = 20


class Conflict(Exception):
  """The lease is not what the caller expected (created, renewed or deleted by another)."""


def _read_text(path):
  try:
    with open(path) as f:
      return f.read().strip()
  except OSError:
    return ''


def _process_start(pid):
  """The start time of process `pid` in clock ticks since boot (field 22 of /proc/PID/stat), or
  None when there is no such process: with the pid, it tells a process from a later one that
  reuses its pid."""
  stat = _read_text('/proc/%d/stat' % pid)
  if not stat:
    return None
  fields = stat.rpartition(')')[2].split()
  if fields[0] in ('Z', 'X'):  # a zombie (killed, not yet reaped by its parent) is gone too
    return None
  return int(fields[19])


def _pid_namespace():
  try:
    return os.readlink('/proc/self/ns/pid')
  except OSError:
    return ''


def this_process(command=''):
  return {
      'host': socket.gethostname(), 'pid': os.getpid(),
      'process_start': _process_start(os.getpid()),
      'boot_id': _read_text('/proc/sys/kernel/random/boot_id'), 'pid_namespace': _pid_namespace(),
      'job_id': os.environ.get('CLOUD_ML_JOB_ID', ''), 'command': command,
      'started': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()),
  }


def expiry_of(holder, default, min_expiry):
  """The expiry the holder renews its lease within (its own --lease_expiry_secs), in seconds."""
  try:
    return max(min_expiry, int(holder.get('expiry_secs', default)))
  except (TypeError, ValueError):
    return default


def ago(age):
  """'N s ago' for a lease last written `age` seconds ago by the storage's clock (read against
  this machine's, which may be behind)."""
  if age < 0:  # this machine's clock is behind the storage's
    return 'just now (this machine\'s clock is %.0f s behind the storage\'s)' % -age
  return '%.0f s ago' % age


def describe(holder, age=None):
  """Who holds a lease (its content, a dict), for messages; with its last heartbeat's age."""
  if 'damaged' in holder:
    return 'a damaged lease (%s)' % holder['damaged']
  text = '%s (pid %s on %s%s, started %s)' % (
      holder.get('command') or 'a run', holder.get('pid', '?'), holder.get('host', '?'),
      ', job %s' % holder['job_id'] if holder.get('job_id') else '', holder.get('started', '?'))
  if age is not None:
    text += ', last heartbeat %s' % ago(age)
  return text


def same_machine(holder):
  """Whether `holder` (a lease's content) ran on this machine, in this pid namespace and boot."""
  me = this_process()
  return bool(me['boot_id']) and all(holder.get(k) == me[k]
                                     for k in ('host', 'boot_id', 'pid_namespace'))


def holder_is_gone(holder):
  """True when `holder` ran on this machine (same_machine) and its process no longer runs (its
  pid is free or reused by a later process)."""
  if not same_machine(holder):
    return False
  try:
    return _process_start(int(holder.get('pid'))) != holder.get('process_start')
  except (TypeError, ValueError):
    return False


class Held(Exception):
  """The local lease is locked by a live process."""


class NotALease(Exception):
  """The lease's path holds something this pipeline never writes there (a symbolic link, a
  directory): the message says what."""


def parse(text):
  """A lease's content as a dict; a damaged one (empty, cut short, not JSON, not an object) as
  {'damaged': what was found}, which no holder's token matches."""
  try:
    content = json.loads(text)
  except ValueError:
    content = None
  if isinstance(content, dict):
    return content
  return {'damaged': repr(text[:40]) if text.strip() else 'an empty file'}


def process_state(pid):
  """The state letter of process `pid` on this machine (`R`, `S`, `T` when stopped...), or ''
  (no such process, or `pid` not a number)."""
  try:
    stat = _read_text('/proc/%d/stat' % int(pid))
  except (TypeError, ValueError):
    return ''
  return stat.rpartition(')')[2].split()[0] if stat else ''


GCS_FUSE_MOUNT = '/gcs/'  # Vertex AI mounts gs://BUCKET at /gcs/BUCKET (Cloud Storage FUSE)


def object_path(directory):
  """The gs:// path of a directory on Vertex AI's Cloud Storage FUSE mount (`/gcs/BUCKET/...`),
  of a gs:// path itself, or None for any other (local) directory."""
  if directory.startswith('gs://'):
    return directory
  if directory.startswith(GCS_FUSE_MOUNT) and len(directory) > len(GCS_FUSE_MOUNT):
    return 'gs://' + directory[len(GCS_FUSE_MOUNT):]
  return None


def open_store(directory, path):
  """(the store of the lease file `path` of `directory`, whether this call created the local
  directory). Raises ImportError: gs:// without google-cloud-storage."""
  gcs = object_path(directory)
  if gcs:
    return GcsStore('%s/%s' % (gcs, os.path.basename(path))), False
  if os.path.isdir(directory):
    return LocalStore(path), False
  try:
    os.makedirs(directory)
  except FileExistsError:  # another run created it meanwhile
    return LocalStore(path), False
  return LocalStore(path), True


def _write_over(fd, content):
  os.ftruncate(fd, 0)
  os.pwrite(fd, (json.dumps(content, sort_keys=True) + '\n').encode('utf-8'), 0)
  os.fsync(fd)


def dataflow_hint(holder, lease_path):
  """What to do about the Dataflow job a dead holder's lease names (str)."""
  where = ' '.join('--%s=%s' % (name, holder['dataflow_' + name])
                   for name in ('project', 'region') if holder.get('dataflow_' + name))
  command = 'gcloud dataflow jobs %%s %s %s' % (holder['dataflow_job'], where)
  lease_path = object_path(lease_path) or lease_path  # gcloud takes gs://, not /gcs/
  return ('It started Dataflow job %s, whose workers may still be writing this directory, '
          'whatever became of the command itself: see it with `%s`; once it has ended (or `%s`), '
          'delete the lease (`gcloud storage rm %s`) and run again.'
          % (holder['dataflow_job'], (command % 'describe').strip(),
             (command % 'cancel').strip(), lease_path))


class LocalStore(object):
  """The lease as a local file that its holder keeps open under an exclusive flock(2) for the
  whole run: the kernel decides who holds it and releases it when the holder's process ends,
  however it ends (the LOCK file of LevelDB and RocksDB). A stalled holder (stopped, hung in a
  write) keeps it, so no other run can take the directory over while it could still write. On NFS
  the lock is the server's (Linux emulates flock with fcntl locks there, nfs(5)); a file system
  without locks is refused. The file's content, written in place once taken, only names the
  holder for the messages of the runs it refuses."""

  def __init__(self, path):
    self.path = path
    self._fd = None

  def _open(self):
    try:
      return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as e:
      if e.errno == errno.ELOOP:
        raise NotALease('%s is a symbolic link (to %s), which this pipeline never writes: delete '
                        'the link (rm %s) and run again' % (self.path, os.readlink(self.path),
                                                            self.path))
      if e.errno == errno.EISDIR:
        raise NotALease('%s is a directory, which this pipeline never writes: move it away or '
                        'delete it and run again' % self.path)
      raise

  def lock(self, content):
    """Takes the lease: locks the file (created if missing), then writes `content` into it.
    Returns the content of the lease it replaced (a holder whose process ended), or None.

    Raises:
      Held: a live process holds it.
      NotALease: the path is a symbolic link or a directory.
      OSError: the directory cannot be written, or its file system has no locks (ENOLCK).
    """
    while True:
      fd = self._open()
      try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        try:
          same = os.stat(self.path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
          same = False
        if same:
          previous = os.read(fd, 1 << 16).decode('utf-8', 'replace')
          _write_over(fd, content)
      except BlockingIOError:
        os.close(fd)
        raise Held()
      except OSError:
        os.close(fd)  # and with it the lock: a later attempt in this process is not refused
        raise
      if same:
        self._fd = fd
        return parse(previous) if previous else None
      os.close(fd)  # a holder released (deleted) it between our open and our lock: again

  def rewrite(self, content):
    """Writes `content` over the locked lease file's (the holder's own record)."""
    _write_over(self._fd, content)

  def read(self, quick=False):
    """(content, None, when it was written in seconds since the epoch), or None when there is
    no lease."""
    del quick  # a local read does not wait
    try:
      with open(self.path) as f:
        text = f.read()
      written = os.stat(self.path).st_mtime
    except (FileNotFoundError, IsADirectoryError):
      return None
    return parse(text), None, written

  def held(self):
    """Whether this store's lock is still on the file at `path` (not deleted or replaced by
    someone removing the directory or the file by hand)."""
    try:
      return (self._fd is not None and
              os.stat(self.path, follow_symlinks=False).st_ino == os.fstat(self._fd).st_ino)
    except OSError:
      return False

  def unlock(self):
    """Deletes the lease file (when it is still this holder's) and drops the lock."""
    if self._fd is None:
      return
    try:
      if self.held():
        os.remove(self.path)
    finally:
      os.close(self._fd)
      self._fd = None

  def clear_leftovers(self, older_than_secs=60):
    """Removes what earlier versions' lease writers left beside the lease (files written aside,
    a lease moved aside by a taker)."""
    folder, name = os.path.split(self.path)
    staged.remove_leftovers(folder, of=name, older_than_secs=older_than_secs)


class GcsStore(object):
  """The lease as a GCS object, through google-cloud-storage; version: its generation. Every call
  takes `budget`: None for the library's retries (up to 120 s), or the seconds it may take in
  all (retries included), so that a heartbeat or a check never outlasts its period."""

  def __init__(self, path):
    from google.api_core import exceptions  # pylint: disable=g-import-not-at-top
    from google.cloud import storage  # pylint: disable=g-import-not-at-top
    from google.cloud.storage import retry  # pylint: disable=g-import-not-at-top
    self._precondition_failed = exceptions.PreconditionFailed
    self._not_found = exceptions.NotFound
    self._retry = retry.DEFAULT_RETRY
    bucket, _, name = path[len('gs://'):].partition('/')
    self.path = path
    self._bucket = storage.Client().bucket(bucket)
    self._name = name

  def _options(self, budget):
    if budget is None:
      return {'timeout': _GCS_TIMEOUT_SECS}
    return {'timeout': min(_GCS_TIMEOUT_SECS, budget), 'retry': self._retry.with_deadline(budget)}

  def read(self, quick=False, budget=None):
    """(content, generation, when it was last written by the storage's clock, in seconds since
    the epoch), or None when there is no lease. quick: one try of each request (no retries)."""
    options = self._options(budget)
    if quick:
      options['retry'] = None
    blob = self._bucket.get_blob(self._name, **options)
    if blob is None:
      return None
    try:
      text = blob.download_as_bytes(if_generation_match=blob.generation, **options)
    except (self._precondition_failed, self._not_found):  # renewed or released meanwhile
      return self.read(quick, budget)
    return parse(text.decode('utf-8', 'replace')), blob.generation, blob.updated.timestamp()

  def _upload(self, content, generation, budget):
    blob = self._bucket.blob(self._name)
    try:
      blob.upload_from_string(json.dumps(content, sort_keys=True) + '\n',
                              content_type='application/json', if_generation_match=generation,
                              **self._options(budget))
    except self._precondition_failed:
      raise Conflict()
    return blob.generation

  def create(self, content, budget=None):
    return self._upload(content, 0, budget)

  def replace(self, content, version, budget=None):
    return self._upload(content, version, budget)

  take_over = replace  # the generation match lets one taker only

  def delete(self, version, budget=None):
    try:
      self._bucket.blob(self._name).delete(if_generation_match=version, **self._options(budget))
    except (self._precondition_failed, self._not_found):
      raise Conflict()
