"""The trainer: flags -> config -> TPUEstimator on a Cloud TPU or the local CPU/GPU.

The run itself lives at this level (main.py, driver.py, estimator.py, hooks.py, results.py);
data feeding in `trainer.data`, data set conversion in `trainer.prepare`, benchmarks in
`trainer.benchmark`, Google Cloud in `trainer.cloud`; the networks, the flags and the Keras 3
twins in `trainer.models`, `trainer.flags` and `trainer.keras_models` (the folders models/,
flags/ and keras_models/ of the repository).
"""

import os as _os

# In a checkout, the folders models/, flags/ and keras_models/ beside trainer/ are the packages
# trainer.models, trainer.flags and trainer.keras_models (setup.py installs them inside
# trainer/): the checkout's root is searched after trainer/ itself. No top-level `models` or
# `flags` is ever imported, so a user's own package of that name is theirs.
_ROOT = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if (not _os.path.isdir(_os.path.join(__path__[0], 'models'))
    and _os.path.isfile(_os.path.join(_ROOT, 'models', '__init__.py'))):
  __path__.append(_ROOT)

# A gs:// model_dir's checkpoint state file is written through google-cloud-storage (its fence,
# trainer/storage/state_fence.py), which TensorFlow's GCS file system does not see: with its
# stat cache (5 s by default) it would read the new, longer file cut to the old size. Off
# unless the user set it (read when TensorFlow first opens a gs:// path).
_os.environ.setdefault('GCS_STAT_CACHE_MAX_AGE', '0')

# TensorFlow and OpenMP read their thread and kernel settings once, when they load: chosen for
# this host's CPU before any module of the trainer imports TensorFlow (trainer/host/threads.py).
from trainer.cli import log_noise as _log_noise  # pylint: disable=g-import-not-at-top
from trainer.host import threads as _host_threads  # pylint: disable=g-import-not-at-top

_host_threads.current()
_log_noise.hold_import_notices()
