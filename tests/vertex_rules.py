"""What the Vertex AI API (v1 JobService) refuses, for the loopback stand-in
(tests/vertex_standin.py): each rule turns a request body (the REST JSON the real client sends)
into the 400 INVALID_ARGUMENT message the service answers, or None.

Written independently of trainer.submit's own checks and importing no trainer code, so that
one catches the other; only facts the client library itself carries (google.cloud.aiplatform_v1's
enums) are shared. Sources, per rule:
  REQUIRED fields: googleapis google/cloud/aiplatform/v1 custom_job.proto,
    hyperparameter_tuning_job.proto, study.proto ((google.api.field_behavior) = REQUIRED), and
    machine_resources.proto (MachineSpec.machine_type "as part of WorkerPoolSpec this field is
    required").
  Prebuilt executor images: custom_job.proto, PythonPackageSpec.executor_image_uri ("You must use
    an image from this list"); Vertex AI "Prebuilt containers for custom training" for the
    TensorFlow 2.15 images' end of availability (2025-11-14; TPU 2025-10-23).
  Machines and GPUs: Compute Engine "GPU machine types"
    (https://cloud.google.com/compute/docs/gpus).
  TPU VMs: Vertex AI "Configure compute resources for custom training" (cloud-tpu with TPU_V2 or
    TPU_V3, 8 cores; TPU v5e on ct5lp-hightpu-* machine types) and Cloud TPU "TPU regions and
    zones" (https://cloud.google.com/tpu/docs/regions-zones) for the regions.
"""

import datetime
import re

# (message path, REQUIRED fields as the REST JSON names them).
_REQUIRED_CUSTOM_JOB = ('displayName', 'jobSpec')
_REQUIRED_TUNING_JOB = ('displayName', 'studySpec', 'maxTrialCount', 'parallelTrialCount',
                        'trialJobSpec')
_REQUIRED_STUDY = ('metrics', 'parameters')
_REQUIRED_METRIC = ('metricId', 'goal')
_REQUIRED_PARAMETER = ('parameterId',)
_REQUIRED_CONTAINER = ('imageUri',)
_REQUIRED_PACKAGE = ('executorImageUri', 'packageUris', 'pythonModule')

_PREBUILT = re.compile(r'^(?:us|europe|asia)-docker\.pkg\.dev/vertex-ai/training/([^:@/]+)')
_END_OF_AVAILABILITY = {
    'tf-cpu.2-15.py310': datetime.date(2025, 11, 14),
    'tf-gpu.2-15.py310': datetime.date(2025, 11, 14),
    'tf-tpu.2-15.cp310': datetime.date(2025, 10, 23),
}
# GPUs attached to N1 machines: counts per machine.
_N1 = {'NVIDIA_TESLA_T4': {1, 2, 4}, 'NVIDIA_TESLA_P4': {1, 2, 4},
       'NVIDIA_TESLA_P100': {1, 2, 4}, 'NVIDIA_TESLA_V100': {1, 2, 4, 8}}


def _fixed_gpu(machine):
  """(GPU, count) that an accelerator-optimized machine type comes with, else None."""
  match = re.match(r'^a2-highgpu-(1|2|4|8)g$', machine)
  if match:
    return 'NVIDIA_TESLA_A100', int(match.group(1))
  if machine == 'a2-megagpu-16g':
    return 'NVIDIA_TESLA_A100', 16
  match = re.match(r'^a2-ultragpu-(1|2|4|8)g$', machine)
  if match:
    return 'NVIDIA_A100_80GB', int(match.group(1))
  match = re.match(r'^g2-standard-(\d+)$', machine)
  if match:
    return 'NVIDIA_L4', {4: 1, 8: 1, 12: 1, 16: 1, 32: 1, 24: 2, 48: 4, 96: 8}.get(
        int(match.group(1)))
  if machine == 'a3-highgpu-8g':
    return 'NVIDIA_H100_80GB', 8
  return None


_TPU_REGIONS = {'TPU_V2': {'us-central1', 'europe-west4', 'asia-east1'},
                'TPU_V3': {'us-central1', 'europe-west4'}}
_V5E = re.compile(r'^ct5lp-hightpu-(1|4|8)t$')


def _accelerator_name(value):
  """The enum name: the REST client sends enums as numbers."""
  if isinstance(value, int):
    from google.cloud import aiplatform_v1  # pylint: disable=g-import-not-at-top
    return aiplatform_v1.AcceleratorType(value).name
  return value


def _missing(message, path, fields):
  for field in fields:
    value = (message or {}).get(field)
    if value in (None, '', [], {}, 0, '0'):
      return ('List of found errors:\t1.Field: %s%s; Message: Required field is not set.\t'
              % (path, field))
  return None


def _machine(spec, where, region):
  """The MachineSpec rules of one worker pool."""
  machine = spec.get('machineType')
  if not machine:
    return 'List of found errors:\t1.Field: %s.machine_spec.machine_type; Message: Required ' \
           'field is not set.\t' % where
  accelerator = _accelerator_name(spec.get('acceleratorType')) or None
  if accelerator == 'ACCELERATOR_TYPE_UNSPECIFIED':
    accelerator = None
  count = int(spec.get('acceleratorCount') or 0)
  fixed = _fixed_gpu(machine)
  if fixed:
    if (accelerator, count) != fixed:
      return ('Machine type "%s" requires accelerator type %s with count %s; got %s x %s.'
              % (machine, fixed[0], fixed[1], count, accelerator))
    return None
  if accelerator is None:
    if machine == 'cloud-tpu' or _V5E.match(machine):
      return 'Machine type "%s" requires a TPU accelerator type.' % machine
    return None
  if accelerator in _N1:
    if not machine.startswith('n1-'):
      return 'Accelerator "%s" is not supported for machine type "%s".' % (accelerator, machine)
    if count not in _N1[accelerator]:
      return ('Accelerator count %d is not supported for %s; supported counts: %s.'
              % (count, accelerator, sorted(_N1[accelerator])))
    return None
  if accelerator in _TPU_REGIONS:
    if machine != 'cloud-tpu':
      return 'Accelerator "%s" is not supported for machine type "%s".' % (accelerator, machine)
    if count != 8:
      return 'TPU_V2 and TPU_V3 support only acceleratorCount 8; got %d.' % count
    if region not in _TPU_REGIONS[accelerator]:
      return 'Accelerator "%s" is not supported in location %s for training.' % (accelerator,
                                                                                 region)
    return None
  if accelerator == 'TPU_V5_LITEPOD':
    return None if _V5E.match(machine) else (
        'Accelerator "TPU_V5_LITEPOD" is not supported for machine type "%s".' % machine)
  return 'Accelerator "%s" is not supported for machine type "%s".' % (accelerator, machine)


def _task(pool, where, today):
  container, package = pool.get('containerSpec'), pool.get('pythonPackageSpec')
  if not container and not package:
    return ('List of found errors:\t1.Field: %s.task; Message: One of container_spec or '
            'python_package_spec must be set.\t' % where)
  if container:
    return _missing(container, where + '.container_spec.', _REQUIRED_CONTAINER)
  error = _missing(package, where + '.python_package_spec.', _REQUIRED_PACKAGE)
  if error:
    return error
  image = package['executorImageUri']
  match = _PREBUILT.match(image)
  if not match:
    return ('Invalid executor image "%s": python_package_spec.executor_image_uri must be one of '
            'the Vertex AI prebuilt training containers.' % image)
  end = _END_OF_AVAILABILITY.get(match.group(1))
  if end and today >= end:
    return 'Executor image "%s" is no longer available (end of availability %s).' % (image, end)
  return None


def custom_job_spec(spec, path, region, today):
  """The refusal of a CustomJobSpec (a job's jobSpec or a study's trialJobSpec), or None."""
  pools = spec.get('workerPoolSpecs') or []
  if not pools or not pools[0]:
    return ('List of found errors:\t1.Field: %sworker_pool_specs; Message: Required field is not '
            'set.\t' % path)
  for i, pool in enumerate(pools):
    if not pool:
      continue  # every pool but the first may be skipped by an empty one
    where = '%sworker_pool_specs[%d]' % (path, i)
    error = (_machine(pool.get('machineSpec') or {}, where, region) or
             _task(pool, where, today))
    if error:
      return error
  return None


def refusal(collection, body, region, today=None):
  """The INVALID_ARGUMENT message of a create request to `collection` (customJobs or
  hyperparameterTuningJobs), or None when the service would take it."""
  today = today or datetime.date.today()
  body = body or {}
  if collection == 'customJobs':
    return (_missing(body, '', _REQUIRED_CUSTOM_JOB) or
            custom_job_spec(body['jobSpec'], 'job_spec.', region, today))
  error = _missing(body, '', _REQUIRED_TUNING_JOB)
  if error:
    return error
  study = body['studySpec']
  error = _missing(study, 'study_spec.', _REQUIRED_STUDY)
  for metric in ([] if error else study['metrics']):
    error = error or _missing(metric, 'study_spec.metrics.', _REQUIRED_METRIC)
  for parameter in ([] if error else study['parameters']):
    error = error or _missing(parameter, 'study_spec.parameters.', _REQUIRED_PARAMETER)
  return error or custom_job_spec(body['trialJobSpec'], 'trial_job_spec.', region, today)
