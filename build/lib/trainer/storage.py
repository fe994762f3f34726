"""Fast, clear checks of data and model paths before any work starts.

TensorFlow's own gs:// client retries a failing request for about 90 s before it raises, so a
missing bucket or a permission problem is checked first with google-cloud-storage.
"""

import tensorflow.compat.v1 as tf

from trainer.config import PipelineError

GCS_TIMEOUT_SECONDS = 20


def split_gcs_path(path):
  """'gs://bucket/a/b' -> ('bucket', 'a/b')."""
  bucket, _, blob = path[len('gs://'):].partition('/')
  return bucket, blob


def _check_bucket(path, flag):
  from google.api_core import exceptions  # pylint: disable=g-import-not-at-top
  from google.auth import exceptions as auth_exceptions  # pylint: disable=g-import-not-at-top
  from google.cloud import storage  # pylint: disable=g-import-not-at-top
  bucket_name, _ = split_gcs_path(path)
  if not bucket_name:
    raise PipelineError('--%s=%s names no bucket.' % (flag, path))
  try:
    client = storage.Client()
    exists = client.bucket(bucket_name).exists(timeout=GCS_TIMEOUT_SECONDS, retry=None)
  except auth_exceptions.DefaultCredentialsError as e:
    raise PipelineError('no Google Cloud credentials to read --%s=%s (%s). Run `gcloud auth '
                        'application-default login` or set GOOGLE_APPLICATION_CREDENTIALS.'
                        % (flag, path, e))
  except exceptions.Forbidden as e:
    raise PipelineError(
        'permission denied on bucket gs://%s for --%s (%s). Grant the account running this job '
        '(on Cloud TPU also the TPU service account, service-PROJECT_NUMBER@cloud-tpu.iam.'
        'gserviceaccount.com) roles/storage.objectAdmin on the bucket.' % (bucket_name, flag, e))
  except Exception as e:  # pylint: disable=broad-except  # network errors of every flavour
    raise PipelineError('could not reach Google Cloud Storage to check gs://%s for --%s: %s: %s'
                        % (bucket_name, flag, type(e).__name__, e))
  if not exists:
    raise PipelineError('bucket gs://%s (from --%s) does not exist. Create it with `gsutil mb '
                        'gs://%s` or fix the path.' % (bucket_name, flag, bucket_name))


def check_path_usable(path, flag):
  """Checks that a data_dir exists or that a model_dir/export_dir can be created.

  gs:// paths: the bucket must exist and be accessible. Local paths: data_dir must exist.

  Raises:
    PipelineError: what is wrong and what to do.
  """
  if path.startswith('gs://'):
    _check_bucket(path, flag)
  elif flag == 'data_dir' and not tf.io.gfile.isdir(path):
    raise PipelineError('--data_dir=%s does not exist or is not a directory.' % path)
