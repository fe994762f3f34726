"""Where a writer's lease (lease.py) lives, and who holds it: the lease as a local file or as a
GCS object, each created, renewed and deleted only if it is still the version the caller holds
(else `Conflict`); and this process as a holder (host, pid, boot, pid namespace)."""

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


def holder_is_gone(holder):
  """True when `holder` (a lease's content) ran on this machine, in this pid namespace and this
  boot, and its process no longer runs (its pid is free or reused by a later process)."""
  me = this_process()
  if any(holder.get(k) != me[k] for k in ('host', 'boot_id', 'pid_namespace')) or not me['boot_id']:
    return False
  return _process_start(int(holder.get('pid', 0))) != holder.get('process_start')


class LocalStore(object):
  """The lease as a local file; version: the holder's token plus its heartbeat count."""

  def __init__(self, path):
    self.path = path

  def _aside(self, content):
    temporary = staged.aside_name(self.path)
    try:
      with open(temporary, 'w') as f:
        f.write(json.dumps(content, sort_keys=True) + '\n')
        f.flush()
        os.fsync(f.fileno())
    except OSError:
      if os.path.exists(temporary):
        os.remove(temporary)
      raise
    return temporary

  @staticmethod
  def _version(content):
    return '%s/%s' % (content.get('token'), content.get('beats'))

  def read(self, quick=False):
    """(content, version, seconds since the last write), or None when there is no lease."""
    del quick  # a local read does not wait
    try:
      with open(self.path) as f:
        text = f.read()
      age = time.time() - os.stat(self.path).st_mtime
    except FileNotFoundError:
      return None
    try:
      content = json.loads(text)
    except ValueError:  # not ours, or cut short by a full disk: a lease nobody can renew
      content = {'token': 'unreadable:' + text[:40]}
    return content, self._version(content), age

  def _expect(self, version):
    """Raises Conflict unless the lease is at `version`."""
    current = self.read()
    if current is None or current[1] != version:
      raise Conflict()

  def create(self, content):
    temporary = self._aside(content)
    try:
      os.link(temporary, self.path)
    except FileExistsError:
      raise Conflict()
    finally:
      os.remove(temporary)
    return self._version(content)

  def replace(self, content, version):
    """Writes `content` if the lease is still at `version` (this holder's renewal). Not atomic
    with the check, which a local file system cannot offer: a renewal only ever races a takeover
    after this holder was silent for expiry_secs."""
    self._expect(version)
    os.replace(self._aside(content), self.path)
    return self._version(content)

  def take_over(self, content, version):
    """Replaces a dead holder's lease at `version`: moved aside by rename(2), which only one of
    two takers can do to it, then created anew by `create`."""
    aside = staged.aside_name(self.path)
    try:
      os.rename(self.path, aside)
    except FileNotFoundError:
      raise Conflict()
    try:
      with open(aside) as f:
        moved = json.loads(f.read())
    except ValueError:
      moved = None
    if moved is None or self._version(moved) != version:  # a newer lease: put it back
      try:
        os.link(aside, self.path)
      except FileExistsError:
        pass
      os.remove(aside)
      raise Conflict()
    os.remove(aside)
    return self.create(content)

  def delete(self, version):
    self._expect(version)
    os.remove(self.path)

  def clear_leftovers(self, older_than_secs=60):
    """Removes what a killed holder or taker left beside the lease (its files written aside, a
    lease moved aside), once older than any live writer keeps them."""
    folder, name = os.path.split(self.path)
    staged.remove_leftovers(folder, of=name, older_than_secs=older_than_secs)


class GcsStore(object):
  """The lease as a GCS object, through google-cloud-storage; version: its generation."""

  def __init__(self, path):
    from google.api_core import exceptions  # pylint: disable=g-import-not-at-top
    from google.cloud import storage  # pylint: disable=g-import-not-at-top
    self._precondition_failed = exceptions.PreconditionFailed
    self._not_found = exceptions.NotFound
    bucket, _, name = path[len('gs://'):].partition('/')
    self.path = path
    self._bucket = storage.Client().bucket(bucket)
    self._name = name

  def read(self, quick=False):
    """(content, generation, seconds since the last write), or None when there is no lease.
    quick: one try of each request (no retries), for a check that must not hold training up
    through a storage outage."""
    options = dict(timeout=_GCS_TIMEOUT_SECS, **({'retry': None} if quick else {}))
    blob = self._bucket.get_blob(self._name, **options)
    if blob is None:
      return None
    try:
      content = json.loads(blob.download_as_bytes(if_generation_match=blob.generation,
                                                  **options).decode('utf-8'))
    except (self._precondition_failed, self._not_found):  # renewed or released meanwhile
      return self.read(quick)
    except ValueError:
      content = {'token': 'unreadable'}
    age = time.time() - blob.updated.timestamp()
    return content, blob.generation, age

  def _upload(self, content, generation):
    blob = self._bucket.blob(self._name)
    try:
      blob.upload_from_string(json.dumps(content, sort_keys=True) + '\n',
                              content_type='application/json', if_generation_match=generation,
                              timeout=_GCS_TIMEOUT_SECS)
    except self._precondition_failed:
      raise Conflict()
    return blob.generation

  def create(self, content):
    return self._upload(content, 0)

  def replace(self, content, version):
    return self._upload(content, version)

  take_over = replace  # the generation match lets one taker only

  def delete(self, version):
    try:
      self._bucket.blob(self._name).delete(if_generation_match=version,
                                           timeout=_GCS_TIMEOUT_SECS)
    except (self._precondition_failed, self._not_found):
      raise Conflict()
