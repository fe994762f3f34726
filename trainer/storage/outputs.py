"""Outputs that never replace or mix with what a user already has.

Every writer of the pipeline checks its output before any work (`check_output_dir`,
`check_output_file`): a path that already holds something is refused, naming it and the flag
that replaces it; with that flag the old output is removed first (`clear_output_dir`), so no
stale shard is left beside new ones. Files are written aside and renamed into place
(trainer/storage/staged.py), so a crash never leaves half a file under the final name.
"""

import os
import uuid

from trainer.errors import PipelineError
from trainer.storage import gfile
from trainer.storage import lease
from trainer.storage import staged


def _is_gcs(path):
  return path.startswith('gs://')


def _directory_problem(path):
  """Why local directory `path` could not be created or written, or None.

  Found by trying, not from permission bits (which root ignores, and which say nothing of /proc,
  a read-only mount or a full quota): a uniquely named folder is created in the directory, or in
  its nearest existing parent, and removed again."""
  absolute = os.path.abspath(path)
  if os.path.exists(absolute) and not os.path.isdir(absolute):
    return 'it is a file, not a directory'
  parent = absolute
  while not os.path.exists(parent):
    parent = os.path.dirname(parent)
  if not os.path.isdir(parent):
    return 'it cannot be created: %s is a file' % parent
  probe = os.path.join(parent, '.write-check-%s' % uuid.uuid4().hex[:12])
  try:
    os.mkdir(probe)
  except OSError as e:
    return '%s does not let this user create anything in it (%s)' % (
        parent, e.strerror or type(e).__name__)
  os.rmdir(probe)
  return None


def check_directory_usable(path, flag):
  """Refuses a directory path this run could not create or write, before any work: it is a
  file, a parent of it is a file, or (local) the nearest existing parent is not writable.
  gs:// paths are checked by `trainer.cloud.gcs_preflight` (bucket and permission).

  Args:
    path: str, local or gs:// directory the run will write into (it need not exist).
    flag: str, the flag or variable that named it ('--model_dir', 'AIP_MODEL_DIR').

  Raises:
    PipelineError: naming the flag, the path and what to do.
  """
  if not path:
    raise PipelineError('%s is empty: give a directory.' % flag)
  problem = None if _is_gcs(path) else _directory_problem(path)
  if problem:
    raise PipelineError('%s=%s is not usable: %s. Choose a directory this user can write.'
                        % (flag, path, problem))


def check_file_usable(path, flag):
  """Refuses an output file path that is a directory, or whose folder could not be created or
  written (`check_directory_usable`).

  Raises:
    PipelineError: naming the flag, the path and what to do.
  """
  if gfile.isdir(path):
    raise PipelineError('%s=%s is a directory: give a file path.' % (flag, path))
  directory = (path.rstrip('/').rpartition('/')[0] or '/') if '/' in path else '.'
  problem = None if _is_gcs(path) else _directory_problem(directory)
  if problem:
    raise PipelineError('%s=%s cannot be written: its folder %s is not usable (%s). Choose '
                        'another path.' % (flag, path, directory, problem))


def existing_entries(path):
  """The names directly in directory `path` ([] when it does not exist or is empty), but the
  writer's lease (`trainer.storage.lease`: writer.lease and the heartbeat's files written aside),
  which is the running command's own."""
  if not gfile.isdir(path):
    return []
  return sorted(name.rstrip('/') for name in gfile.listdir(path)
                if not (staged.final_name(name) or name).startswith(lease.LEASE_FILE))


def _shown(path, names):
  """Up to three of `names` in directory `path`, folders marked with '/', for a message."""
  shown = [n + ('/' if gfile.isdir('%s/%s' % (path.rstrip('/'), n)) else '')
           for n in names[:3]]
  return ', '.join(shown) + (', ...' if len(names) > 3 else '')


def check_output_dir(path, flag, overwrite, overwrite_flag='--overwrite', owned=None,
                     describe=None):
  """Refuses an output directory that already holds something, unless `overwrite`.

  Args:
    path: str, local or gs:// directory.
    flag: str, the flag that named it, for the message.
    overwrite: bool, the user asked to replace what is there.
    overwrite_flag: str, the flag that asks for it.
    owned: optional predicate on a file name: only names it accepts count as an earlier output
      (a data directory may hold a user's README beside the shards); default: every name.
    describe: optional function of the found names to what they are ('a converted dataset'),
      for the message; default: how many files or folders.

  Returns:
    list of str names that `clear_output_dir` will remove ([] when nothing is there).

  Raises:
    PipelineError: `path` is a file or holds an output, and `overwrite` is False.
  """
  check_directory_usable(path, flag)
  found = [n for n in existing_entries(path) if owned is None or owned(n)]
  if found and not overwrite:
    count = '1 file or folder' if len(found) == 1 else '%d files or folders' % len(found)
    shown = _shown(path, found)
    what = ('%s (%s: %s)' % (describe(found), count, shown) if describe
            else '%s (%s)' % (count, shown))
    raise PipelineError('%s=%s already holds %s. Choose another %s, or pass %s to delete %s '
                        'first.' % (flag, path, what, flag, overwrite_flag,
                                    'it' if len(found) == 1 else 'them'))
  return found


def clear_output_dir(path, names):
  """Removes `names` (from `check_output_dir`) from directory `path`, files and folders."""
  for name in names:
    full = '%s/%s' % (path.rstrip('/'), name)
    if gfile.isdir(full):
      gfile.rmtree(full)
    else:
      gfile.remove(full)


def prepare_output_dir(path, flag, overwrite, overwrite_flag='--overwrite', owned=None,
                       describe=None):
  """`check_output_dir`, then (with `overwrite`) removes the earlier output and creates `path`."""
  clear_output_dir(path, check_output_dir(path, flag, overwrite, overwrite_flag, owned,
                                          describe))
  gfile.makedirs(path)


def check_output_file(path, flag, overwrite, overwrite_flag='--overwrite'):
  """Refuses an output file that exists, unless `overwrite`; refuses a path that is a
  directory or cannot be created.

  Raises:
    PipelineError: naming the flag, the path and what to do.
  """
  check_file_usable(path, flag)
  if gfile.exists(path) and not overwrite:
    raise PipelineError('%s=%s already exists. Choose another path, or pass %s to replace it.'
                        % (flag, path, overwrite_flag))
