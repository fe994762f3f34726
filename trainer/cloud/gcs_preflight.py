"""Fast, clear checks of data and model paths before any work starts.

TensorFlow's own gs:// client retries a failing request for about 90 s before it raises, so a
missing bucket or a permission problem is checked first with google-cloud-storage.
"""

import uuid

import tensorflow.compat.v1 as tf

from trainer.errors import PipelineError

GCS_TIMEOUT_SECONDS = 20


def split_gcs_path(path):
  """'gs://bucket/a/b' -> ('bucket', 'a/b')."""
  bucket, _, blob = path[len('gs://'):].partition('/')
  return bucket, blob


def _identity(client):
  """Who the GCS client acts as, for a permission message (best effort)."""
  credentials = getattr(client, '_credentials', None)
  email = getattr(credentials, 'service_account_email', None)
  if email and email != 'default':
    return email
  return 'the account of your Application Default Credentials (`gcloud auth list` shows it)'


def _forbidden(bucket_name, flag, client, use_tpu, error):
  tpu_note = (' With --use_tpu the Cloud TPU reads and writes the bucket itself: also grant its '
              'service account, service-PROJECT_NUMBER@cloud-tpu.iam.gserviceaccount.com.'
              if use_tpu else '')
  return PipelineError(
      'permission denied on bucket gs://%s for --%s (%s). Grant %s roles/storage.objectAdmin on '
      'the bucket (`gsutil iam ch serviceAccount:EMAIL:objectAdmin gs://%s`).%s'
      % (bucket_name, flag, error, _identity(client), bucket_name, tpu_note))


def _check_bucket(path, flag, writable=False, use_tpu=False):
  """Checks with google-cloud-storage that the bucket of `path` exists and, if `writable`, that an
  object can be written under `path` and deleted again."""
  from google.api_core import exceptions  # pylint: disable=g-import-not-at-top
  from google.auth import exceptions as auth_exceptions  # pylint: disable=g-import-not-at-top
  from google.cloud import storage  # pylint: disable=g-import-not-at-top
  bucket_name, prefix = split_gcs_path(path)
  if not bucket_name:
    raise PipelineError('--%s=%s names no bucket.' % (flag, path))
  client = None
  try:
    client = storage.Client()
    bucket = client.bucket(bucket_name)
    exists = bucket.exists(timeout=GCS_TIMEOUT_SECONDS, retry=None)
    if exists and writable:
      name = '.write-check-' + uuid.uuid4().hex
      directory = prefix.strip('/')
      marker = bucket.blob(directory + '/' + name if directory else name)
      marker.upload_from_string(b'', timeout=GCS_TIMEOUT_SECONDS, retry=None)
      marker.delete(timeout=GCS_TIMEOUT_SECONDS, retry=None)
  except auth_exceptions.DefaultCredentialsError as e:
    raise PipelineError('no Google Cloud credentials to use --%s=%s (%s). Run `gcloud auth '
                        'application-default login` or set GOOGLE_APPLICATION_CREDENTIALS.'
                        % (flag, path, e))
  except exceptions.Forbidden as e:
    raise _forbidden(bucket_name, flag, client, use_tpu, e)
  except Exception as e:  # pylint: disable=broad-except  # network errors of every flavour
    raise PipelineError('could not reach Google Cloud Storage to check gs://%s for --%s: %s: %s'
                        % (bucket_name, flag, type(e).__name__, e))
  if not exists:
    raise PipelineError('bucket gs://%s (from --%s) does not exist. Create it with `gsutil mb '
                        'gs://%s` or fix the path.' % (bucket_name, flag, bucket_name))


def check_path_usable(path, flag, use_tpu=False):
  """Checks that a data_dir exists or that a model_dir/export_dir can be written.

  gs:// paths: the bucket must exist and be accessible, and for model_dir and export_dir an object
  is written and deleted under the path. Local paths: data_dir must exist.

  Raises:
    PipelineError: what is wrong and what to do.
  """
  if path.startswith('gs://'):
    _check_bucket(path, flag, writable=flag != 'data_dir', use_tpu=use_tpu)
  elif flag == 'data_dir' and not tf.io.gfile.isdir(path):
    raise PipelineError('--data_dir=%s does not exist or is not a directory.' % path)
