"""The file calls of the pipeline, on local paths and gs://: TensorFlow's `tf.io.gfile`.

Where TensorFlow is not installed (the Keras 3 trainer alone on JAX or PyTorch, such as a GPU
machine without TensorFlow), the same calls run on local paths through os and shutil, and a
gs:// path is refused with what to install. The modules that must import without TensorFlow
(trainer/storage/outputs.py, json_files.py, trainer/keras_run/) call these, not tf.io.gfile.

  exists, isdir, listdir, makedirs, remove, rmtree, rename(src, dst, overwrite=False),
  GFile(path, mode): as tf.io.gfile's; mtime(path): the last write, seconds since the epoch;
  OpError: the error the storage raises (tf.errors.OpError; OSError without TensorFlow).
"""

import os
import shutil

from trainer.errors import PipelineError

try:
  import tensorflow.compat.v1 as _tf  # pylint: disable=g-import-not-at-top
except ImportError:
  _tf = None

HAS_TENSORFLOW = _tf is not None


def _local(path):
  """`path`, when it is a local path (refuses a URL such as gs://)."""
  if '://' in str(path):
    raise PipelineError('%s: TensorFlow is not installed here, and its file system is what '
                        'reads and writes gs:// paths: install tensorflow-cpu, or use a local '
                        'path.' % path)
  return path


def _local_rename(src, dst, overwrite=False):
  if not overwrite and os.path.exists(_local(dst)):
    raise FileExistsError('%s exists' % dst)
  os.replace(_local(src), dst)


if HAS_TENSORFLOW:
  exists = _tf.io.gfile.exists
  isdir = _tf.io.gfile.isdir
  listdir = _tf.io.gfile.listdir
  makedirs = _tf.io.gfile.makedirs
  remove = _tf.io.gfile.remove
  rmtree = _tf.io.gfile.rmtree
  rename = _tf.io.gfile.rename
  GFile = _tf.io.gfile.GFile
  OpError = _tf.errors.OpError
  mtime = lambda path: _tf.io.gfile.stat(path).mtime_nsec / 1e9
else:
  exists = lambda path: os.path.exists(_local(path))
  isdir = lambda path: os.path.isdir(_local(path))
  listdir = lambda path: os.listdir(_local(path))
  makedirs = lambda path: os.makedirs(_local(path), exist_ok=True)
  remove = lambda path: os.remove(_local(path))
  rmtree = lambda path: shutil.rmtree(_local(path))
  rename = _local_rename
  GFile = lambda path, mode='r': open(  # pylint: disable=consider-using-with
      _local(path), mode, **({} if 'b' in mode else {'encoding': 'utf-8'}))
  OpError = OSError
  mtime = lambda path: os.stat(_local(path)).st_mtime
