"""The storage a run's Config reads besides its flags, before any graph is built: whether each
output directory can be written, and the dataset's description (dataset.json, after a gs://
preflight that fails in seconds where TensorFlow's own client retries a missing bucket for
minutes). `trainer.flags.to_config` calls these (and `trainer.run.recorded_network` for the
network a run recorded), so that flags/ itself reads no storage (tests/test_rooms.py).
"""

import os

from trainer.cloud import gcs_preflight
from trainer.cloud import vertex_env
from trainer.data import arrays
from trainer.data import dataset_json
from trainer.storage import outputs

# Output directories named by flags, and those a Vertex AI job names by variable
# (trainer/cloud/vertex_env.py).
OUTPUT_DIR_FLAGS = ('model_dir', 'job_dir', 'export_dir')
OUTPUT_DIR_VARIABLES = (vertex_env.CHECKPOINT_DIR_ENV, vertex_env.MODEL_DIR_ENV,
                        vertex_env.TENSORBOARD_DIR_ENV)


def check_output_dirs(f, environ=None):
  """`outputs.check_directory_usable` on each output directory a flag or Vertex AI variable
  names.

  Args:
    f: the flag values, read as attributes (`flags.to_config`'s namespace).
    environ: the environment (default os.environ).

  Raises:
    PipelineError: one is a file, under a file, or not writable.
  """
  environ = os.environ if environ is None else environ
  for name in OUTPUT_DIR_FLAGS:
    if getattr(f, name, None):
      outputs.check_directory_usable(getattr(f, name), '--' + name)
  for name in OUTPUT_DIR_VARIABLES:
    if environ.get(name):
      outputs.check_directory_usable(environ[name], '$' + name)


def check_data_dir(data_dir, use_tpu):
  """Refuses, within seconds, a gs:// --data_dir whose bucket is missing or unreadable
  (`gcs_preflight.check_path_usable`; a local path passes).

  Args:
    data_dir: str, --data_dir (local or gs://).
    use_tpu: bool, --use_tpu: the hint then names the TPU's service account, which reads it.

  Raises:
    PipelineError: naming the bucket, the flag and what to do.
  """
  gcs_preflight.check_path_usable(data_dir, 'data_dir', use_tpu)


def dataset_info(data_dir, use_tpu):
  """The dataset.json of `data_dir` as a dict, {} when there is none, after `check_data_dir`.

  Args:
    data_dir, use_tpu: as `check_data_dir` takes them.

  Raises:
    PipelineError: the bucket cannot be used, dataset.json is damaged, or `data_dir` holds the
      NumPy arrays of `trainer.prepare arrays` (only `trainer.train_keras` reads those).
  """
  check_data_dir(data_dir, use_tpu)
  info = dataset_json.read(data_dir) or {}
  arrays.check_not_arrays(data_dir, info)
  return info
