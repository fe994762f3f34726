"""The trainer: flags -> config -> TPUEstimator on a Cloud TPU or the local CPU/GPU.

The run itself lives at this level (main.py, driver.py, estimator.py, hooks.py, results.py);
data feeding in `trainer.data`, data set conversion in `trainer.prepare`, benchmarks in
`trainer.benchmark`, Google Cloud in `trainer.cloud`.
"""

# TensorFlow and OpenMP read their thread and kernel settings once, when they load: chosen for
# this host's CPU before any module of the trainer imports TensorFlow (trainer/host/threads.py).
from trainer.cli import log_noise as _log_noise  # pylint: disable=g-import-not-at-top
from trainer.host import threads as _host_threads  # pylint: disable=g-import-not-at-top

_host_threads.current()
_log_noise.hold_import_notices()
