"""The lease check of a process that writes for the lease's holder without holding a lease of its
own: trainer.prepare's Apache Beam workers (the DirectRunner's worker processes, Dataflow's
machines). They carry the holder's token (a fencing token, as Kleppmann names it) and read the
lease before each write they would make visible: once the lease names another holder, or none,
the write is refused. So a Dataflow job whose launcher died cannot rename a shard or dataset.json
into a directory another conversion has taken over (trainer/storage/lease.py).

What is left unfenced: a write between the read and its rename (one GCS request apart), as with
every check-then-act; a takeover is refused while the dead holder's lease names a Dataflow job
(lease.py, trainer/prepare/beam_job.py).
"""

from trainer.storage import lease as lease_lib
from trainer.storage import lease_stores


class WriterToken(object):
  """Picklable (it goes to Beam workers): the lease directory, the holder's token and the flag
  that named the directory (for messages)."""

  def __init__(self, directory, token, flag):
    self.directory = directory.rstrip('/')
    self.token = token
    self.flag = flag
    self._store = None  # opened once per worker, on its first check

  def __getstate__(self):  # what goes to a worker: no store (a GCS client does not pickle)
    return dict(self.__dict__, _store=None)

  def _read(self):
    if self._store is None:
      self._store, _ = lease_stores.open_store(
          self.directory, '%s/%s' % (self.directory, lease_lib.LEASE_FILE))
    return self._store.read()

  def check(self, path):
    """Returns when the directory's lease still names this token.

    Raises:
      LeaseLost: another run holds the lease, or none does; `path` (str, the write that was to
        be made visible) was not written.
    """
    current = self._read()
    if current is not None and current[0].get('token') == self.token:
      return
    holder = ('another run holds it: %s' % lease_stores.describe(current[0]) if current
              else 'no run holds it any more')
    raise lease_lib.LeaseLost(
        'the writer\'s lease of %s=%s is no longer this conversion\'s (%s): %s was not written. '
        'The conversion stopped; the run that holds the lease now writes the directory.'
        % (self.flag, self.directory, holder, path))
