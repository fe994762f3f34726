"""Fast, clear checks of data and model paths before any work starts.

TensorFlow's own gs:// client retries a failing request for about 90 s before it raises, so a
missing bucket or a permission problem is checked first with google-cloud-storage, with the
object requests the run itself makes: a list under a data path (`storage.objects.list`), a write
and a delete under an output path (`storage.objects.create`, `.delete`). Never the bucket's own
metadata (`storage.buckets.get`), which roles/storage.objectAdmin and objectViewer do not grant
(https://cloud.google.com/storage/docs/access-control/iam-roles): a run those roles can do is not
refused, and the role a 403 names is one that lets the run through.
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


def _forbidden(bucket_name, flag, client, use_tpu, writable, error):
  tpu_note = (' With --use_tpu the Cloud TPU reads and writes the bucket itself: also grant its '
              'service account, service-PROJECT_NUMBER@cloud-tpu.iam.gserviceaccount.com.'
              if use_tpu else '')
  # objectViewer: objects.get and .list (reading data); objectAdmin: objects.* (a run also
  # overwrites and deletes its checkpoints, which objectCreator does not allow).
  role = 'roles/storage.objectAdmin' if writable else 'roles/storage.objectViewer'
  return PipelineError(
      'permission denied on bucket gs://%s for --%s (%s). Grant %s %s on the bucket (`gcloud '
      'storage buckets add-iam-policy-binding gs://%s --member=serviceAccount:EMAIL --role=%s`).%s'
      % (bucket_name, flag, error, _identity(client), role, bucket_name, role, tpu_note))


def _check_bucket(path, flag, writable=False, use_tpu=False):
  """Checks with google-cloud-storage that the bucket of `path` exists and that objects under
  `path` can be listed or, if `writable`, that one can be written there and deleted again."""
  from google.api_core import exceptions  # pylint: disable=g-import-not-at-top
  from google.auth import exceptions as auth_exceptions  # pylint: disable=g-import-not-at-top
  from google.cloud import storage  # pylint: disable=g-import-not-at-top
  bucket_name, prefix = split_gcs_path(path)
  if not bucket_name:
    raise PipelineError('--%s=%s names no bucket.' % (flag, path))
  client = None
  exists = True
  try:
    client = storage.Client()
    bucket = client.bucket(bucket_name)
    directory = prefix.strip('/')
    if writable:
      name = '.write-check-' + uuid.uuid4().hex
      marker = bucket.blob(directory + '/' + name if directory else name)
      marker.upload_from_string(b'', timeout=GCS_TIMEOUT_SECONDS, retry=None)
      try:
        marker.delete(timeout=GCS_TIMEOUT_SECONDS, retry=None)
      except exceptions.NotFound:  # already gone: nothing of ours is left (not a missing bucket)
        pass
    else:
      list(client.list_blobs(bucket, prefix=directory, max_results=1,
                             timeout=GCS_TIMEOUT_SECONDS, retry=None))
  except exceptions.NotFound:  # the bucket (an object's 404 cannot happen here)
    exists = False
  except auth_exceptions.DefaultCredentialsError as e:
    raise PipelineError('no Google Cloud credentials to use --%s=%s (%s). Run `gcloud auth '
                        'application-default login` or set GOOGLE_APPLICATION_CREDENTIALS.'
                        % (flag, path, e))
  except exceptions.Forbidden as e:
    raise _forbidden(bucket_name, flag, client, use_tpu, writable, e)
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
