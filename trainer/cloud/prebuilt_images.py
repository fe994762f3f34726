"""Vertex AI's prebuilt training images this trainer could run in, with their end of availability:
the one table of them (trainer/cloud/vertex_job.py asks it about --executor_image_uri).

Source: Vertex AI "Prebuilt containers for custom training"
(https://cloud.google.com/vertex-ai/docs/training/pre-built-containers) and its framework support
policy (https://cloud.google.com/vertex-ai/docs/framework-support-policy): after its end of
availability an image can no longer be used for a job. TensorFlow 2.15 was the last release with
tf.estimator, which this trainer needs (TensorFlow 2.16 removed it), so newer prebuilt TensorFlow
images cannot run it either. Every image listed here is past its end of availability: a job today
runs in an image of your own built from the repository's Dockerfile (--container_uri).

The images are published in three Artifact Registry copies, us-, europe- and asia-docker.pkg.dev,
under vertex-ai/training/IMAGE:TAG. PythonPackageSpec.executor_image_uri must be one of them
(google/cloud/aiplatform/v1/custom_job.proto: "You must use an image from this list").
"""

import datetime
import re

from trainer.errors import PipelineError

# Image name -> (accelerator kind, end-of-availability date).
TF_ESTIMATOR_IMAGES = {
    'tf-cpu.2-15.py310': ('cpu', datetime.date(2025, 11, 14)),
    'tf-gpu.2-15.py310': ('gpu', datetime.date(2025, 11, 14)),
    'tf-tpu.2-15.cp310': ('tpu', datetime.date(2025, 10, 23)),
}
PREBUILT_IMAGE = re.compile(
    r'^(?:us|europe|asia)-docker\.pkg\.dev/vertex-ai/training/(?P<name>[^:@/]+)(?:[:@].+)?$')
WAY_OUT = ('build the trainer\'s own image from the repository\'s Dockerfile and pass it as '
           '--container_uri (or add --build_image to have trainer.submit build and push it); see '
           'docs/cloud.md')


def is_prebuilt(uri):
  """Whether `uri` names an image of Vertex AI's prebuilt training repository."""
  return bool(PREBUILT_IMAGE.match(uri or ''))


def check_executor_image(uri, today=None):
  """Refuses an --executor_image_uri the trainer cannot run in today.

  Raises:
    PipelineError: not a prebuilt image, one without tf.estimator, or one past its end of
      availability (with the date).
  """
  today = today or datetime.date.today()
  match = PREBUILT_IMAGE.match(uri)
  if not match:
    raise PipelineError(
        '--executor_image_uri=%s is not one of Vertex AI\'s prebuilt training images (a Python '
        'package runs only in one of those: custom_job.proto, PythonPackageSpec). For an image '
        'of your own pass --container_uri=%s instead.' % (uri, uri))
  name = match.group('name')
  if name not in TF_ESTIMATOR_IMAGES:
    raise PipelineError(
        '--executor_image_uri=%s: the trainer needs tf.estimator, which only the TensorFlow 2.15 '
        'prebuilt images (%s) had; %s.' % (uri, ', '.join(sorted(TF_ESTIMATOR_IMAGES)), WAY_OUT))
  end = TF_ESTIMATOR_IMAGES[name][1]
  if today >= end:
    raise PipelineError(
        '--executor_image_uri=%s reached its end of availability on %s: Vertex AI no longer runs '
        'it, and no newer prebuilt image has tf.estimator; %s.' % (uri, end.isoformat(), WAY_OUT))
