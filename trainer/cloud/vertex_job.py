"""A Vertex AI custom training job of this package, as the REST API takes it: validation of the
submission's flags, the CustomJob / HyperparameterTuningJob request (a camelCase dict), the
default executor image and the equivalent gcloud command. No network and no Vertex AI client
library here (trainer/cloud/vertex_submit.py sends the request).

Worker pools (https://cloud.google.com/vertex-ai/docs/training/distributed-training): pool 0 is
the chief (1 replica), pool 1 the workers, pool 2 the parameter servers; Vertex AI gives each
replica a TF_CONFIG with task types chief / worker / ps (trainer/cloud/vertex_env.py).
"""

import collections
import os
import re
import shlex

from trainer.cloud import aiplatform_env
from trainer.errors import PipelineError

JobRequest = collections.namedtuple(
    'JobRequest', 'project region staging_bucket base_output_dir machine_type accelerator_type '
    'accelerator_count worker_count ps_count container_uri display_name trainer_args')

PYTHON_MODULE = 'trainer.main'
TPU_MACHINE_TYPE = 'cloud-tpu'
TPU_CORES = 8  # a single-host TPU v2-8 / v3-8 VM
GPUS = ('NVIDIA_TESLA_T4', 'NVIDIA_TESLA_V100', 'NVIDIA_TESLA_P100', 'NVIDIA_TESLA_P4',
        'NVIDIA_TESLA_A100', 'NVIDIA_A100_80GB', 'NVIDIA_L4')
TPUS = ('TPU_V2', 'TPU_V3')
# Where each accelerator is offered for custom training, per Vertex AI's "Vertex AI locations"
# page, section "Accelerator availability" (https://cloud.google.com/vertex-ai/docs/general/
# locations#accelerators), for the regions below only: a region missing here is not checked (a
# warning says so) rather than refused, as the table is a snapshot and Google adds regions.
ACCELERATOR_REGIONS = {
    'us-central1': GPUS + TPUS,
    'us-east1': ('NVIDIA_TESLA_T4', 'NVIDIA_TESLA_V100', 'NVIDIA_TESLA_P100'),
    'us-east4': ('NVIDIA_TESLA_T4', 'NVIDIA_TESLA_P4', 'NVIDIA_A100_80GB', 'NVIDIA_L4'),
    'us-west1': ('NVIDIA_TESLA_T4', 'NVIDIA_TESLA_V100', 'NVIDIA_TESLA_P100', 'NVIDIA_L4'),
    'europe-west1': ('NVIDIA_TESLA_T4', 'NVIDIA_TESLA_P100', 'NVIDIA_L4'),
    'europe-west4': ('NVIDIA_TESLA_T4', 'NVIDIA_TESLA_V100', 'NVIDIA_TESLA_P100',
                     'NVIDIA_TESLA_P4', 'NVIDIA_TESLA_A100', 'NVIDIA_L4', 'TPU_V2', 'TPU_V3'),
    'asia-east1': ('NVIDIA_TESLA_T4', 'NVIDIA_TESLA_P100', 'NVIDIA_L4', 'TPU_V2'),
    'asia-northeast1': ('NVIDIA_TESLA_T4', 'NVIDIA_TESLA_A100', 'NVIDIA_L4'),
    'asia-southeast1': ('NVIDIA_TESLA_T4', 'NVIDIA_TESLA_A100', 'NVIDIA_L4'),
}
_CLOUD_STORAGE_PATH = re.compile(r'^(gs://|/gcs/)[^/]+')  # with a bucket
# Machine families of Vertex AI custom training (https://cloud.google.com/vertex-ai/docs/training/
# configure-compute#machine-types) and which of them take GPUs.
_MACHINE_TYPE = re.compile(
    r'^(?:(?P<family>n1|n2|n2d|e2|c2|a2|g2)-(?:standard|highmem|highcpu|highgpu|megagpu|ultragpu)'
    r'-\d+g?|cloud-tpu)$')
_GPU_FAMILIES = ('n1', 'a2', 'g2')
_PROJECT = re.compile(r'^(?:[a-z][a-z0-9-]{4,28}[a-z0-9]|\d+)$')
_REGION = re.compile(r'^[a-z]+-[a-z]+\d+$')
_DISPLAY_NAME_MAX = 128

# The executor image: Vertex AI's prebuilt TensorFlow 2.15 (Python 3.10) training images, the
# newest TensorFlow these images offer (https://cloud.google.com/vertex-ai/docs/training/
# pre-built-containers; end of patch Nov 14, 2024 / Oct 23, 2024 for TPU, end of availability a
# year later). Both of this project's runtimes submit this image: the trainer runs on TF 2.15 with
# tensorflow-estimator (the .venv-tf2 runtime, which its tests cover); Vertex AI's TF 1.15 training
# images were deprecated and are no longer offered, so a TF 1.15 job needs --container_uri with an
# image of your own. The images come in us-, europe- and asia-docker.pkg.dev copies: the one
# nearest the region is used.
IMAGES = {'cpu': 'tf-cpu.2-15.py310', 'gpu': 'tf-gpu.2-15.py310', 'tpu': 'tf-tpu.2-15.cp310'}
_IMAGE_URI = '%s-docker.pkg.dev/vertex-ai/training/%s:latest'


def default_image(region, accelerator_type=None):
  """The prebuilt TF 2.15 training image URI for `region` and the accelerator (None: CPU)."""
  kind = 'cpu' if not accelerator_type else 'tpu' if accelerator_type in TPUS else 'gpu'
  continent = region.split('-')[0]
  repository = ('europe' if continent == 'europe' else
                'asia' if continent in ('asia', 'australia', 'me') else 'us')
  return _IMAGE_URI % (repository, IMAGES[kind])


def project_from(flag_value, environ=None):
  """The project: the flag, else $GOOGLE_CLOUD_PROJECT, else $CLOUDSDK_CORE_PROJECT.

  Raises:
    PipelineError: none is set.
  """
  environ = os.environ if environ is None else environ
  project = (flag_value or environ.get('GOOGLE_CLOUD_PROJECT') or
             environ.get('CLOUDSDK_CORE_PROJECT'))
  if not project:
    raise PipelineError('no Google Cloud project: pass --project=PROJECT_ID (or set '
                        '$GOOGLE_CLOUD_PROJECT, or `gcloud config set project PROJECT_ID`, which '
                        'sets $CLOUDSDK_CORE_PROJECT in gcloud\'s own shells only).')
  return project


def _gcs_path(flag, value, required):
  if value is None:
    if required:
      raise PipelineError('--%s=gs://BUCKET/... is required with --platform=vertex.' % flag)
    return
  if not value.startswith('gs://') or len(value) <= len('gs://') or value[5] == '/':
    raise PipelineError('--%s=%s must be a gs://BUCKET/... path: Vertex AI runs in Google Cloud '
                        'and reads and writes only Cloud Storage, never this machine.'
                        % (flag, value))


def _trainer_flag_values(args, name):
  """Every value of trainer.main's --name in `args`, in order, as absl reads them (`--name=V`,
  `--name V`, and the same with one dash; the last one wins); None for a trailing `--name`."""
  values = []
  for i, arg in enumerate(args):
    for dashes in ('--', '-'):
      if arg.startswith('%s%s=' % (dashes, name)):
        values.append(arg.split('=', 1)[1])
      elif arg == dashes + name:
        values.append(args[i + 1] if i + 1 < len(args) else None)
  return values


_LOCAL_DIR_ADVICE = {
    'data_dir': ': copy local data with `gcloud storage cp -r`, or prepare it straight to gs:// '
                'with trainer.prepare',
    'model_dir': ', or leave it out and give --base_output_dir to trainer.submit',
    'export_dir': ', or leave it out and give --base_output_dir to trainer.submit',
}


def _check_trainer_dirs(args):
  """A Vertex AI replica reads and writes Cloud Storage, never the submitting machine."""
  for flag, advice in _LOCAL_DIR_ADVICE.items():
    for value in _trainer_flag_values(args, flag):
      if value is None:
        raise PipelineError('--%s after `--` has no value: give --%s=gs://BUCKET/...'
                            % (flag, flag))
      if not _CLOUD_STORAGE_PATH.match(value):
        raise PipelineError(
            '--%s=%s after `--`: a Vertex AI replica reads and writes Cloud Storage, not this '
            'machine (its own disk is gone when the job ends). Pass --%s=gs://BUCKET/... (or its '
            '/gcs/BUCKET/... mount)%s.' % (flag, value, flag, advice))


def _check_accelerator(job, warnings):
  machine, accelerator, count = job.machine_type, job.accelerator_type, job.accelerator_count
  family = _MACHINE_TYPE.match(machine).group('family')
  if machine == TPU_MACHINE_TYPE and accelerator not in TPUS:
    raise PipelineError('--machine_type=cloud-tpu needs --accelerator_type=TPU_V2 or TPU_V3.')
  if accelerator is None:
    if count:
      raise PipelineError('--accelerator_count=%d needs --accelerator_type.' % count)
    return
  if accelerator not in GPUS + TPUS:
    raise PipelineError('unknown --accelerator_type=%s: one of %s.'
                        % (accelerator, ', '.join(GPUS + TPUS)))
  if accelerator in TPUS:
    if machine != TPU_MACHINE_TYPE:
      raise PipelineError('--accelerator_type=%s runs on --machine_type=cloud-tpu (a TPU VM), not '
                          '%s.' % (accelerator, machine))
    if count != TPU_CORES:
      raise PipelineError('--accelerator_count=%d: a single-host %s VM has %d cores; pass '
                          '--accelerator_count=%d.' % (count, accelerator, TPU_CORES, TPU_CORES))
    if job.worker_count or job.ps_count:
      raise PipelineError('a TPU job is a single TPU VM: --worker_count and --ps_count must be 0 '
                          '(TPUEstimator spreads the work over the 8 cores itself).')
    if not {'--use_tpu', '--tpu=local'} <= set(job.trainer_args):
      warnings.append('a %s job trains on its TPU only with `--use_tpu --tpu=local` after `--` '
                      '(the TPU of the TPU VM the trainer runs on); without them it trains on '
                      'the CPU or stops for want of a TPU name.' % accelerator)
  else:
    if family not in _GPU_FAMILIES:
      raise PipelineError('GPUs attach to n1-, a2- or g2- machine types, not --machine_type=%s.'
                          % machine)
    if count not in (1, 2, 4, 8, 16):
      raise PipelineError('--accelerator_count=%d: a machine takes 1, 2, 4, 8 (or 16 on '
                          'a2-megagpu-16g) GPUs.' % count)
  offered = ACCELERATOR_REGIONS.get(job.region)
  if offered is None:
    warnings.append('region %s is not in the accelerator table of trainer/cloud/vertex_job.py: '
                    'whether it offers %s is not checked.' % (job.region, accelerator))
  elif accelerator not in offered:
    elsewhere = sorted(r for r, accs in ACCELERATOR_REGIONS.items() if accelerator in accs)
    raise PipelineError('--accelerator_type=%s is not offered for training in --region=%s; it is '
                        'in %s (https://cloud.google.com/vertex-ai/docs/general/locations).'
                        % (accelerator, job.region, ', '.join(elsewhere)))


def validate(job):
  """Checks everything about `job` (a JobRequest, accelerator_count resolved) that can be checked
  without the network; returns the list of warnings (unchecked facts).

  Raises:
    PipelineError: what is wrong and what to pass instead.
  """
  warnings = []
  if not _PROJECT.match(job.project):
    raise PipelineError('project %r is not a project ID (6-30 lowercase letters, digits, hyphens) '
                        'nor a project number.' % job.project)
  if not _REGION.match(job.region):
    raise PipelineError('--region=%s is not a region name such as us-central1.' % job.region)
  _gcs_path('staging_bucket', job.staging_bucket, required=True)
  _gcs_path('base_output_dir', job.base_output_dir, required=False)
  _check_trainer_dirs(job.trainer_args)
  if not job.base_output_dir and not _trainer_flag_values(job.trainer_args, 'model_dir'):
    raise PipelineError('give --base_output_dir=gs://... (the trainer then writes under its '
                        'AIP_* directories) or --model_dir=gs://... after `--`.')
  if any(_trainer_flag_values(job.trainer_args, name) for name in ('job-dir', 'job_dir')):
    raise PipelineError('--job-dir is AI Platform\'s: on Vertex AI pass --base_output_dir=gs://... '
                        'to trainer.submit.')
  if not _MACHINE_TYPE.match(job.machine_type):
    raise PipelineError('unknown --machine_type=%s: a Vertex AI training machine type such as '
                        'n1-standard-8, n1-highmem-16, a2-highgpu-1g, g2-standard-8, or cloud-tpu '
                        '(https://cloud.google.com/vertex-ai/docs/training/configure-compute).'
                        % job.machine_type)
  for flag in ('worker_count', 'ps_count'):
    if getattr(job, flag) < 0:
      raise PipelineError('--%s=%d: a replica count is 0 or more.' % (flag, getattr(job, flag)))
  if job.ps_count and not job.worker_count:
    warnings.append('parameter servers without workers: only the chief trains.')
  _check_accelerator(job, warnings)
  if not job.display_name or len(job.display_name) > _DISPLAY_NAME_MAX:
    raise PipelineError('--display_name must have 1 to %d characters.' % _DISPLAY_NAME_MAX)
  return warnings


def resolve_accelerator_count(accelerator_type, accelerator_count):
  """The flag's value, else 8 for a TPU, 1 for a GPU, 0 without an accelerator."""
  if accelerator_count is not None:
    return accelerator_count
  return 0 if not accelerator_type else TPU_CORES if accelerator_type in TPUS else 1


def staged_package_uri(staging_bucket, display_name, package_path):
  """Where the sdist goes: <staging_bucket>/<display_name>/<sdist file name>."""
  return '%s/%s/%s' % (staging_bucket.rstrip('/'), display_name, os.path.basename(package_path))


def _pool(job, replicas, image, package_uri, accelerated=True):
  machine = {'machineType': job.machine_type}
  if accelerated and job.accelerator_type:
    machine.update(acceleratorType=job.accelerator_type, acceleratorCount=job.accelerator_count)
  return {'machineSpec': machine, 'replicaCount': str(replicas),
          'pythonPackageSpec': {'executorImageUri': image, 'packageUris': [package_uri],
                                'pythonModule': PYTHON_MODULE, 'args': list(job.trainer_args)}}


def custom_job_spec(job, package_uri):
  """The CustomJobSpec of `job` as a camelCase dict: pool 0 chief, 1 workers, 2 parameter servers
  (without accelerators); an empty pool stands for workers when only parameter servers are asked.
  """
  image = job.container_uri or default_image(job.region, job.accelerator_type)
  pools = [_pool(job, 1, image, package_uri)]
  if job.worker_count or job.ps_count:
    pools.append(_pool(job, job.worker_count, image, package_uri) if job.worker_count else {})
  if job.ps_count:
    pools.append(_pool(job, job.ps_count, image, package_uri, accelerated=False))
  spec = {'workerPoolSpecs': pools}
  if job.base_output_dir:
    spec['baseOutputDirectory'] = {'outputUriPrefix': job.base_output_dir}
  return spec


def custom_job(job, package_uri):
  """The CustomJob request body of `job`."""
  return {'displayName': job.display_name, 'jobSpec': custom_job_spec(job, package_uri)}


def hyperparameter_tuning_job(job, package_uri, config):
  """The HyperparameterTuningJob request body: `config` (the parsed --hptuning_config YAML:
  studySpec, maxTrialCount, parallelTrialCount, optionally maxFailedTrialCount) around the
  CustomJobSpec of `job`.

  Raises:
    PipelineError: a key missing or unknown, no metric or parameter, a metric the trainer does
      not report (see _tuning_metric), or a --mode other than train_and_eval in the trainer args.
  """
  allowed = ('studySpec', 'maxTrialCount', 'parallelTrialCount', 'maxFailedTrialCount')
  if not isinstance(config, dict):
    raise PipelineError('--hptuning_config must be a YAML mapping with %s.' % ', '.join(allowed))
  unknown = sorted(set(config) - set(allowed))
  if unknown:
    raise PipelineError('--hptuning_config: unknown key(s) %s; allowed: %s (trialJobSpec is built '
                        'from the flags).' % (', '.join(unknown), ', '.join(allowed)))
  study = config.get('studySpec') or {}
  if (not isinstance(study, dict) or not isinstance(study.get('metrics'), list)
      or not isinstance(study.get('parameters'), list)
      or not study['metrics'] or not study['parameters']):
    raise PipelineError('--hptuning_config: studySpec needs metrics (e.g. metricId: '
                        'top_1_accuracy, goal: MAXIMIZE) and parameters (trainer.main flags).')
  if not config.get('maxTrialCount'):
    raise PipelineError('--hptuning_config: maxTrialCount is required.')
  metric = _tuning_metric(study['metrics'])
  modes = _trainer_flag_values(job.trainer_args, 'mode')
  if modes and modes[-1] != 'train_and_eval':
    raise PipelineError('--mode=%s after `--`: a tuning trial reports %s from its evaluation, so '
                        'it runs --mode=train_and_eval (the default): drop --mode.'
                        % (modes[-1], metric))
  body = {'displayName': job.display_name}
  body.update((k, config[k]) for k in allowed if k in config)
  body['trialJobSpec'] = custom_job_spec(job, package_uri)
  # The trainer reports the metric named by $CLOUD_ML_HP_METRIC_TAG (aiplatform_env). Set it in
  # every replica rather than rely on Vertex AI to set it: without it a trial reports nothing.
  tag = {'name': aiplatform_env.METRIC_TAG_ENV, 'value': metric}
  for pool in body['trialJobSpec']['workerPoolSpecs']:
    if pool:
      pool['pythonPackageSpec']['env'] = [tag]
  return body


def _tuning_metric(metrics):
  """The metricId of a studySpec's `metrics` list.

  Raises:
    PipelineError: not exactly one {metricId, goal} mapping, a metric the trainer does not report
      (aiplatform_env.TUNABLE_METRICS), or a goal that optimises it the wrong way.
  """
  if not all(isinstance(m, dict) for m in metrics):
    raise PipelineError('--hptuning_config: each entry of studySpec.metrics is a mapping '
                        '(metricId: top_1_accuracy, goal: MAXIMIZE); got %s.' % (metrics,))
  if len(metrics) != 1:
    raise PipelineError('--hptuning_config: the trainer reports one metric; keep one of the %d in '
                        'studySpec.metrics.' % len(metrics))
  metric, goal = metrics[0].get('metricId'), metrics[0].get('goal')
  if metric not in aiplatform_env.TUNABLE_METRICS:
    raise PipelineError('--hptuning_config: metricId %r is not a metric the trainer reports; use '
                        'one of %s.' % (metric, ', '.join(aiplatform_env.TUNABLE_METRICS)))
  wanted = 'MINIMIZE' if metric == 'loss' else 'MAXIMIZE'
  if goal != wanted:
    raise PipelineError('--hptuning_config: %s needs goal: %s (%s).' % (
        metric, wanted, 'given: %s' % goal if goal else 'no goal given'))
  return metric


def _pool_flag(pool):
  if not pool:
    return None
  machine, package = pool['machineSpec'], pool['pythonPackageSpec']
  parts = ['machine-type=' + machine['machineType'], 'replica-count=' + pool['replicaCount']]
  if 'acceleratorType' in machine:
    parts += ['accelerator-type=' + machine['acceleratorType'],
              'accelerator-count=%d' % machine['acceleratorCount']]
  parts += ['executor-image-uri=' + package['executorImageUri'],
            'python-module=' + package['pythonModule']]
  return ','.join(parts)


def gcloud_command(job, body, hptuning=False):
  """The equivalent gcloud command (a string). For a tuning job, and for a base output
  directory, whose gcloud flags do not exist, the printed JSON is to be passed as --config."""
  spec = body['trialJobSpec'] if hptuning else body['jobSpec']
  command = ['gcloud', 'ai', 'hp-tuning-jobs' if hptuning else 'custom-jobs', 'create',
             '--project=' + job.project, '--region=' + job.region,
             '--display-name=' + job.display_name]
  if hptuning or 'baseOutputDirectory' in spec:
    command.append('--config=JOB.json')  # the JSON printed above, saved as JOB.json
  if not hptuning:
    command.append('--python-package-uris=' +
                   spec['workerPoolSpecs'][0]['pythonPackageSpec']['packageUris'][0])
    pools = [_pool_flag(p) for p in spec['workerPoolSpecs']]
    command += ['--worker-pool-spec=' + (p or '') for p in pools]
    if job.trainer_args:
      command.append('--args=' + _gcloud_list(job.trainer_args))
  return ' '.join(shlex.quote(c) for c in command)


def _gcloud_list(values):
  """`values` as one gcloud list-flag value: comma-joined, or, when a value has a comma (e.g.
  --predict_input=a,b), joined by another delimiter declared as `^D^` (`gcloud topic escaping`;
  a delimiter may be several characters, so one that is in no value always exists)."""
  if not any(',' in v for v in values):
    return ','.join(values)
  delimiter = '|'
  while any(delimiter in v for v in values):
    delimiter += '|'
  return '^%s^%s' % (delimiter, delimiter.join(values))


# AI Platform scale tiers as Vertex AI flags (the nearest machines Vertex AI offers).
_SCALE_TIER_FLAGS = {
    'BASIC': ['--machine_type=n1-standard-4'],
    'BASIC_GPU': ['--machine_type=n1-standard-8', '--accelerator_type=NVIDIA_TESLA_T4'],
    'BASIC_TPU': ['--machine_type=cloud-tpu', '--accelerator_type=TPU_V2'],
    'STANDARD_1': ['--machine_type=n1-highcpu-16', '--worker_count=4', '--ps_count=3'],
    'PREMIUM_1': ['--machine_type=n1-highcpu-96', '--worker_count=19', '--ps_count=11'],
}


def vertex_equivalent(job_dir, region, scale_tier, trainer_args):
  """The `trainer.submit --platform=vertex` command nearest an AI Platform submission (a string;
  for a --config YAML the machine flags are left for the user to fill in)."""
  bucket = job_dir.split('/')[2] if job_dir.startswith('gs://') else 'BUCKET'
  command = ['python', '-m', 'trainer.submit', '--platform=vertex', '--region=' + region,
             '--staging_bucket=gs://%s/staging' % bucket, '--base_output_dir=' + job_dir]
  command += _SCALE_TIER_FLAGS.get(scale_tier, ['--machine_type=MACHINE_TYPE'])
  return ' '.join(shlex.quote(c) for c in command + ['--'] + list(trainer_args))
