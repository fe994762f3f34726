"""The fence on a gs:// model_dir's `checkpoint` state file, the one write that makes a checkpoint
visible to a resume, an evaluation or an export (`tf.train.latest_checkpoint`); and, the same
way, on its results.json, the record of the run that finished (and of its export), and on the
two files that make the best checkpoint visible, best/checkpoint and best/best.json
(trainer/run/best_checkpoint.py).

The writer's lease (lease.py) is checked before a save, but a holder that passed its check and
then stalled (a checkpoint upload retrying through a partition, a suspended VM) for longer than
its expiry would still write the state file after another run took over, rewinding that run.
So on gs:// the state file is written only with `ifGenerationMatch` on the generation this run
last wrote or claimed (https://cloud.google.com/storage/docs/request-preconditions): the
object's generation is the fencing token (what etcd's revisions and Chubby's sequencers are; M.
Kleppmann, "How to do distributed locking", 2016). `claim()`, at the start of a run's training,
rewrites it unchanged under a generation match, so that every earlier holder's next write is
refused (with no file yet there is nothing to rewrite: a write that finds none reads the lease
first, so an earlier holder's first write can land only within that one upload, until this
run's first write replaces it). A refused write means
some other run wrote the state file since: unless a read of the lease, made then, shows this
run's token, this run is the stale one (LeaseLost); if it does, the other was a stale holder,
and this run's state replaces its write (with a warning).

TensorFlow's GCS file system does not see these writes: its stat cache would read the new file
cut to the old size for 5 s, so trainer/__init__.py turns it off (GCS_STAT_CACHE_MAX_AGE=0).
Vertex AI's /gcs/ mount has its own cache and no generations: trainer.main reads and writes a
/gcs/ model_dir as gs:// (trainer/run/driver.py).

TensorFlow, Orbax and Keras write their state files unconditionally. Local disks need none of
this: their lease is a lock no live process loses (lease_stores.LocalStore).
"""

from absl import logging

from trainer.errors import PipelineError
from trainer.storage import lease_stores

STATE_FILE = 'checkpoint'  # TensorFlow's name for it (checkpoint_management)
# A run's name in the checkpoints it writes (trainer/run/fenced_saver.py): the first hex digits of
# its lease token (a uuid4), so that no two runs share a file.
RUN_NAME_LENGTH = 8
RUN_NAME_PATTERN = '[0-9a-f]{%d}' % RUN_NAME_LENGTH
_ATTEMPTS = 5
_RESUME = ('The checkpoint files are written; run the same command again to resume from the '
           'newest one the state file names.')


class StateFence(object):
  """Conditional writes of `<model_dir>/<name>` (by default the checkpoint state file) on gs://
  (or Vertex AI's /gcs/ mount), for the holder of `lease` (a held lease.Lease of that
  model_dir); `what` names the file in messages."""

  def __init__(self, model_dir, lease, name=STATE_FILE, what='the checkpoint state file',
               again=_RESUME):
    from google.api_core import exceptions  # pylint: disable=g-import-not-at-top
    from google.cloud import storage  # pylint: disable=g-import-not-at-top
    path = lease_stores.object_path(model_dir.rstrip('/'))
    if path is None:
      raise ValueError('%s is not on Cloud Storage: its lease is a lock, no fence' % model_dir)
    bucket, _, prefix = path[len('gs://'):].partition('/')
    self._precondition_failed = exceptions.PreconditionFailed
    self._not_found = exceptions.NotFound
    self._bucket = storage.Client().bucket(bucket)
    self._name = (prefix + '/' if prefix else '') + name
    self.name = name  # the file's path in model_dir, e.g. 'checkpoint' or 'best/best.json'
    self.path = 'gs://%s/%s' % (bucket, self._name)
    self._what, self._again = what, again
    self._lease = lease
    self._generation = None  # of the state file as this run last wrote or claimed it; 0: none
    self.run_name = lease.token[:RUN_NAME_LENGTH]  # in this run's checkpoint names

  def _unwritable(self, error):
    return PipelineError('could not write %s %s (%s: %s). %s'
                         % (self._what, self.path, type(error).__name__, error, self._again))

  def confirm(self):
    """Raises lease.LeaseLost unless a read of the lease, made now, shows this run holds it."""
    self._lease.confirm()

  @property
  def claimed(self):
    return self._generation is not None

  def claim(self):
    """Makes the state file's current content this run's own: rewritten unchanged under a
    generation match (nothing when there is none yet), so that a run that held the lease before
    can no longer write it.

    Raises:
      PipelineError: it changed under every one of five attempts.
    """
    for _ in range(_ATTEMPTS):
      blob = self._bucket.get_blob(self._name)
      if blob is None:
        self._generation = 0
        return
      rewritten = self._bucket.blob(self._name)
      try:
        content = blob.download_as_bytes(if_generation_match=blob.generation)
        rewritten.upload_from_string(content, if_generation_match=blob.generation)
      except (self._precondition_failed, self._not_found):
        continue  # written meanwhile: read it again
      except Exception as e:  # pylint: disable=broad-except  # storage errors of every kind
        raise self._unwritable(e)
      self._generation = rewritten.generation
      return
    raise PipelineError('%s %s changed under each of %d attempts to claim it: another process '
                        'is writing it. Stop it and run again.'
                        % (self._what, self.path, _ATTEMPTS))

  def write(self, text):
    """Writes `text` (str or bytes: the state file's is a CheckpointState in text format) as the
    file if no other process wrote it since this run's last write or claim.

    Raises:
      lease.LeaseLost: another run wrote it, and this run lost its lease.
    """
    if not self.claimed:
      self.claim()
    if self._generation == 0:
      # None existed when claimed, so every holder's write would match: a read of the lease,
      # made now, narrows a stale holder's window to this one upload.
      self._lease.confirm()
    for _ in range(_ATTEMPTS):
      blob = self._bucket.blob(self._name)
      try:
        blob.upload_from_string(text, if_generation_match=self._generation)
      except self._precondition_failed:
        self._lease.confirm()  # raises LeaseLost unless the lease is read back as this run's
        logging.warning('%s %s was written by another process since this run wrote it (a '
                        'stalled holder that lost the lease of this directory, or an evaluation '
                        'run beside training); this run\'s write replaces it.',
                        self._what[0].upper() + self._what[1:], self.path)
        self.claim()
        continue
      except Exception as e:  # pylint: disable=broad-except  # storage errors of every kind
        raise self._unwritable(e)
      self._generation = blob.generation
      return
    raise PipelineError('%s %s changed under each of %d writes.'
                        % (self._what, self.path, _ATTEMPTS))
