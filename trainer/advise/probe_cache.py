"""This host's measured figures, kept between runs: host_probe.py's rates and shape_probe.py's
seconds per convolution and matmul shape, per host, so that two predictions of one command
read the same figures (a probe repeated on a 2-vCPU host moved by up to 30%).

The file is `path()`: $TRAINER_ADVISE_CACHE where set ('' keeps nothing), else
$XDG_CACHE_HOME (or ~/.cache)/tpu-estimator-pipeline/advise-probes.json. It holds a JSON object
per host key (`host_key`: the CPU model, its usable vCPUs, oneDNN's ISA cap, the TensorFlow
version and the session's thread counts), each with 'figures' and 'shapes' (a shape's seconds,
or null where it timed under the timer's resolution: priced at the probe's rates). Delete the
file to measure again, e.g. after a probe taken while another job ran (its figures say so:
BENCHMARKS.md).
A file that cannot be read is logged and its figures measured anew (and written over it); one
that cannot be written is logged: the figures are measured again next time.
"""

import os

from absl import logging
import tensorflow.compat.v1 as tf

from trainer.host import cpu
from trainer.host import threads as host_threads
from trainer.run import tf_build
from trainer.storage import json_files

ENVIRONMENT_VARIABLE = 'TRAINER_ADVISE_CACHE'
_VERSION = 1  # raised when what a cached figure means changes


def path():
  """The cache file (a local path), or '' for none."""
  if ENVIRONMENT_VARIABLE in os.environ:
    value = os.environ[ENVIRONMENT_VARIABLE]
    if '://' in value:
      logging.warning('%s=%s: the probe cache is a local file; keeping none.',
                      ENVIRONMENT_VARIABLE, value)
      return ''
    return value
  root = os.environ.get('XDG_CACHE_HOME') or os.path.join(os.path.expanduser('~'), '.cache')
  return os.path.join(root, 'tpu-estimator-pipeline', 'advise-probes.json')


def host_key(session_config=None):
  """What a cached figure holds for: this CPU, its vCPUs, oneDNN's ISA cap, the TensorFlow build
  and version, whether its oneDNN kernels are on, the thread settings in the environment
  (OMP_NUM_THREADS, KMP_BLOCKTIME, ...) and `session_config`'s thread counts (0: TensorFlow's
  choice)."""
  here = cpu.read_cpu()
  intra = session_config.intra_op_parallelism_threads if session_config else 0
  inter = session_config.inter_op_parallelism_threads if session_config else 0
  onednn = tf_build.mkl_enabled() and os.environ.get('TF_ENABLE_ONEDNN_OPTS', '') != '0'
  thread_env = ','.join('%s=%s' % (name, value) for name, value, _ in host_threads.current()[2])
  return '%s|%d vCPUs|ISA cap %s|%s %s|oneDNN %s|%s|threads %d/%d|v%d' % (
      here.model or 'unknown CPU', here.logical_cpus, here.onednn_max_isa or 'none',
      tf_build.tensorflow_build(), tf.__version__, 'on' if onednn else 'off', thread_env, intra,
      inter, _VERSION)


def _load(file_path):
  try:
    value = json_files.read(file_path)
  except (ValueError, OSError, tf.errors.OpError) as e:
    logging.warning('Ignoring the probe cache %s, which cannot be read (%s): measuring anew.',
                    file_path, e)
    return {}
  return value if isinstance(value, dict) else {}


def read(key, section):
  """The cached dict `section` ('figures' or 'shapes') of host `key`, {} when none."""
  file_path = path()
  if not file_path:
    return {}
  entry = _load(file_path).get(key)
  value = entry.get(section) if isinstance(entry, dict) else None
  return value if isinstance(value, dict) else {}


def update(key, section, values):
  """Merges `values` into `section` of host `key` in the cache file (written aside and renamed:
  a reader never sees half a file; two writers at once may lose one's additions, measured again
  next time)."""
  file_path = path()
  if not file_path:
    return
  cache = _load(file_path)
  entry = cache.get(key) if isinstance(cache.get(key), dict) else {}
  entry[section] = dict(entry.get(section) or {}, **values)
  cache[key] = entry
  try:
    os.makedirs(os.path.dirname(os.path.abspath(file_path)), exist_ok=True)
    json_files.write(file_path, cache)
  except (OSError, tf.errors.OpError) as e:
    logging.warning('Could not keep the probe figures in %s (%s): they are measured again next '
                    'time.', file_path, e)
