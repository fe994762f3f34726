"""A Vertex AI custom training job of this package, as the REST API takes it: validation of the
submission's flags (machine rules in trainer/cloud/machine_rules.py, prebuilt images in
trainer/cloud/prebuilt_images.py), the CustomJob / HyperparameterTuningJob request (a camelCase
dict: containerSpec for the trainer's own image, pythonPackageSpec for a prebuilt one) and the
equivalent gcloud command. No network and no Vertex AI client library here
(trainer/cloud/vertex_submit.py sends the request).

Worker pools (https://cloud.google.com/vertex-ai/docs/training/distributed-training): pool 0 is
the chief (1 replica), pool 1 the workers, pool 2 the parameter servers; Vertex AI gives each
replica a TF_CONFIG with task types chief / worker / ps (trainer/cloud/vertex_env.py).
"""

import collections
import json
import os
import re
import shlex

from trainer.cloud import aiplatform_env
from trainer.cloud import job_options
from trainer.cloud import machine_rules
from trainer.cloud import prebuilt_images
from trainer.cloud import scheduling
from trainer.errors import PipelineError

JobRequest = collections.namedtuple(
    'JobRequest', 'project region staging_bucket base_output_dir machine_type accelerator_type '
    'accelerator_count worker_count ps_count container_uri display_name trainer_args '
    'executor_image_uri tensorboard service_account scheduling allow_unlisted_machine labels '
    'options', defaults=(None,) * 4 + (False, None, None))

PYTHON_MODULE = 'trainer.main'
_CLOUD_STORAGE_PATH = re.compile(r'^(gs://|/gcs/)[^/]+')  # with a bucket
# A project ID (6-30 characters), a domain-scoped one (`example.com:my-project`, the projects of
# a Workspace domain: cloud.google.com/resource-manager/docs/creating-managing-projects)
# or a project number.
_PROJECT = re.compile(
    r'^(?:(?:[a-z0-9-]+(?:\.[a-z0-9-]+)+:)?[a-z][a-z0-9-]{4,28}[a-z0-9]|\d+)$')
_REGION = re.compile(r'^[a-z]+-[a-z]+\d+$')
_DISPLAY_NAME_MAX = machine_rules.TABLE['display_name_max']
# An image reference: [HOST[:PORT]/]PATH[:TAG][@DIGEST], lowercase path.
_IMAGE = re.compile(r'^[a-z0-9.-]+(?::\d+)?/[a-z0-9._/-]+(?::[\w][\w.-]{0,127})?'
                    r'(?:@sha256:[0-9a-f]{64})?$')
# An Artifact Registry image: REGION-docker.pkg.dev/PROJECT/REPOSITORY/IMAGE[:TAG].
ARTIFACT_REGISTRY_IMAGE = re.compile(
    r'^[a-z0-9-]+-docker\.pkg\.dev/(?:[a-z0-9.-]+/)?[a-z0-9-]+/[a-z0-9._-]+/[a-z0-9._/-]+'
    r'(?::[\w][\w.-]{0,127})?$')  # a domain-scoped project: DOMAIN/PROJECT
# CustomJobSpec.tensorboard (custom_job.proto): projects/{project}/locations/{location}/
# tensorboards/{tensorboard}.
_TENSORBOARD = re.compile(r'^projects/[^/]+/locations/(?P<location>[^/]+)/tensorboards/[^/]+$')
_SERVICE_ACCOUNT = re.compile(r'^[^@\s]+@[a-z0-9.-]+\.[a-z]+$')
IMAGE_EXAMPLE = 'REGION-docker.pkg.dev/PROJECT/REPOSITORY/tpu-pipeline:TAG'


def docker_target(accelerator_type):
  """The Dockerfile target (cpu, gpu or tpu) of the image for `accelerator_type`."""
  if not accelerator_type:
    return 'cpu'
  return 'tpu' if accelerator_type in machine_rules.TPUS else 'gpu'


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


def _check_image(job, today):
  """The image: --container_uri (an image of your own, containerSpec) or --executor_image_uri (a
  prebuilt one, pythonPackageSpec); never both, never neither."""
  if job.container_uri and job.executor_image_uri:
    raise PipelineError('give --container_uri (your own image) or --executor_image_uri (a prebuilt '
                        'Vertex AI image), not both.')
  if job.executor_image_uri:
    prebuilt_images.check_executor_image(job.executor_image_uri, today)
    _gcs_path('staging_bucket', job.staging_bucket, required=True)
    return
  if not job.container_uri:
    target = docker_target(job.accelerator_type)
    raise PipelineError(
        'no image to run: Vertex AI\'s prebuilt TensorFlow images with tf.estimator reached their '
        'end of availability (trainer/cloud/prebuilt_images.py), so the job runs in the trainer\'s '
        'own image. Build and push it from the repository root: `DOCKER_BUILDKIT=1 docker build '
        '--platform=linux/amd64 --target %s -t %s . && docker push %s`, then pass '
        '--container_uri=%s (or add --build_image to do both here); see docs/cloud.md.'
        % (target, IMAGE_EXAMPLE, IMAGE_EXAMPLE, IMAGE_EXAMPLE))
  if prebuilt_images.is_prebuilt(job.container_uri):
    raise PipelineError('--container_uri=%s is a prebuilt Vertex AI image: it holds no trainer. '
                        'Pass an image built from the repository\'s Dockerfile (docs/cloud.md).'
                        % job.container_uri)
  if not _IMAGE.match(job.container_uri):
    raise PipelineError('--container_uri=%s is not an image name such as %s.'
                        % (job.container_uri, IMAGE_EXAMPLE))
  if job.staging_bucket is not None:
    _gcs_path('staging_bucket', job.staging_bucket, required=False)


def _check_tensorboard(job):
  """--tensorboard streams AIP_TENSORBOARD_LOG_DIR (set only with a base output directory:
  custom_job.proto, CustomJobSpec.base_output_directory) to a Vertex AI TensorBoard instance of
  the job's region, as a service account of yours ("Set up Vertex AI TensorBoard": the
  integration with custom training requires attaching a service account)."""
  if job.service_account and not _SERVICE_ACCOUNT.match(job.service_account):
    raise PipelineError('--service_account=%s is not a service account e-mail such as '
                        'NAME@PROJECT.iam.gserviceaccount.com.' % job.service_account)
  if not job.tensorboard:
    return
  match = _TENSORBOARD.match(job.tensorboard)
  if not match:
    raise PipelineError('--tensorboard=%s is not a TensorBoard instance name: '
                        'projects/PROJECT/locations/REGION/tensorboards/ID.' % job.tensorboard)
  if match.group('location') != job.region:
    raise PipelineError('--tensorboard=%s is in %s, the job in --region=%s: the instance and the '
                        'job must share a region.' % (job.tensorboard, match.group('location'),
                                                      job.region))
  if not job.service_account:
    raise PipelineError('--tensorboard needs --service_account=NAME@PROJECT.iam.gserviceaccount.com'
                        ' (with roles/storage.admin and roles/aiplatform.user): Vertex AI uploads '
                        'the logs as that account.')
  if not job.base_output_dir:
    raise PipelineError('--tensorboard needs --base_output_dir=gs://...: Vertex AI uploads what '
                        'the trainer writes under its AIP_TENSORBOARD_LOG_DIR, which only a base '
                        'output directory sets.')


def validate(job, today=None):
  """Checks everything about `job` (a JobRequest, accelerator_count resolved) that can be checked
  without the network; returns the list of warnings (unchecked facts). `today`: the date the
  images' end of availability is compared with (default: today).

  Raises:
    PipelineError: what is wrong and what to pass instead.
  """
  warnings = []
  if not _PROJECT.match(job.project):
    raise PipelineError('project %r is not a project ID (6-30 lowercase letters, digits, hyphens, '
                        'after `DOMAIN:` for a domain-scoped one) nor a project number.'
                        % job.project)
  if not _REGION.match(job.region):
    raise PipelineError('--region=%s is not a region name such as us-central1.' % job.region)
  _gcs_path('base_output_dir', job.base_output_dir, required=False)
  _check_trainer_dirs(job.trainer_args)
  if not job.base_output_dir and not _trainer_flag_values(job.trainer_args, 'model_dir'):
    raise PipelineError('give --base_output_dir=gs://... (the trainer then writes under its '
                        'AIP_* directories) or --model_dir=gs://... after `--`.')
  if any(_trainer_flag_values(job.trainer_args, name) for name in ('job-dir', 'job_dir')):
    raise PipelineError('--job-dir is AI Platform\'s: on Vertex AI pass --base_output_dir=gs://... '
                        'to trainer.submit.')
  for flag in ('worker_count', 'ps_count'):
    if getattr(job, flag) < 0:
      raise PipelineError('--%s=%d: a replica count is 0 or more.' % (flag, getattr(job, flag)))
  if job.ps_count and not job.worker_count:
    raise PipelineError('--ps_count=%d without --worker_count: only the chief would train, its '
                        'variables on parameter servers, slower than alone (and gcloud\'s '
                        '--config cannot hold the empty worker pool that job needs). Add '
                        '--worker_count=N or drop --ps_count.' % job.ps_count)
  machine_rules.check(job, warnings)
  scheduling.check(job, warnings)
  job_options.check(job.options, job, warnings)
  if not job.display_name or len(job.display_name) > _DISPLAY_NAME_MAX:
    raise PipelineError('--display_name must have 1 to %d characters.' % _DISPLAY_NAME_MAX)
  _check_tensorboard(job)
  _check_image(job, today)
  return warnings


def resolve_accelerator_count(accelerator_type, accelerator_count, machine_type=None):
  """The flag's value, else the fixed count of an accelerator-optimized machine type, 8 for a
  TPU, 1 for a GPU, 0 without an accelerator."""
  if accelerator_count is not None:
    return accelerator_count
  if not accelerator_type:
    return 0
  if machine_type in machine_rules.FIXED_GPU_MACHINES:
    return machine_rules.FIXED_GPU_MACHINES[machine_type][1]
  return machine_rules.TPU_CORES if accelerator_type in machine_rules.TPUS else 1


def staged_package_uri(staging_bucket, display_name, package_path):
  """Where the sdist goes: <staging_bucket>/<display_name>/<sdist file name>."""
  return '%s/%s/%s' % (staging_bucket.rstrip('/'), display_name, os.path.basename(package_path))


def _pool(job, replicas, package_uri, chief_or_worker=True):
  machine = {'machineType': job.machine_type}
  accelerator = machine_rules.pool_accelerator(job.machine_type, job.accelerator_type,
                                               job.accelerator_count, chief_or_worker)
  if accelerator:
    machine.update(acceleratorType=accelerator[0], acceleratorCount=accelerator[1])
  pool = {'machineSpec': machine, 'replicaCount': str(replicas)}
  if job.container_uri:  # the image's ENTRYPOINT is `python -m trainer.main`
    pool['containerSpec'] = {'imageUri': job.container_uri, 'args': list(job.trainer_args)}
  else:
    pool['pythonPackageSpec'] = {'executorImageUri': job.executor_image_uri,
                                 'packageUris': [package_uri], 'pythonModule': PYTHON_MODULE,
                                 'args': list(job.trainer_args)}
  return pool


def task_spec(pool):
  """The containerSpec or pythonPackageSpec of a worker pool dict."""
  return pool.get('containerSpec') or pool['pythonPackageSpec']


def custom_job_spec(job, package_uri=None):
  """The CustomJobSpec of `job` as a camelCase dict: pool 0 chief, 1 workers, 2 parameter servers
  (an N1 machine's GPUs left out), and the scheduling. `package_uri`: the staged sdist, for a
  prebuilt executor image only.
  """
  pools = [_pool(job, 1, package_uri)]
  if job.worker_count:
    pools.append(_pool(job, job.worker_count, package_uri))
  if job.ps_count:
    pools.append(_pool(job, job.ps_count, package_uri, chief_or_worker=False))
  spec = {'workerPoolSpecs': pools}
  if job.base_output_dir:
    spec['baseOutputDirectory'] = {'outputUriPrefix': job.base_output_dir}
  if job.service_account:
    spec['serviceAccount'] = job.service_account
  if job.tensorboard:
    spec['tensorboard'] = job.tensorboard
  if scheduling.spec(job.scheduling):
    spec['scheduling'] = scheduling.spec(job.scheduling)
  return job_options.apply_to_spec(job.options, spec)


def custom_job(job, package_uri=None):
  """The CustomJob request body of `job`."""
  body = {'displayName': job.display_name, 'jobSpec': custom_job_spec(job, package_uri)}
  if job.labels:
    body['labels'] = dict(job.labels)
  return job_options.apply_to_job(job.options, body)


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
  for key in ('maxTrialCount', 'parallelTrialCount'):  # REQUIRED (hyperparameter_tuning_job.proto)
    if not isinstance(config.get(key), int) or isinstance(config[key], bool) or config[key] < 1:
      raise PipelineError('--hptuning_config: %s is required, a whole number of 1 or more '
                          '(the API refuses a study without it; gcloud would fill in 1).' % key)
  metric = _tuning_metric(study['metrics'])
  modes = _trainer_flag_values(job.trainer_args, 'mode')
  if modes and modes[-1] != 'train_and_eval':
    raise PipelineError('--mode=%s after `--`: a tuning trial reports %s from its evaluation, so '
                        'it runs --mode=train_and_eval (the default): drop --mode.'
                        % (modes[-1], metric))
  body = {'displayName': job.display_name}
  if job.labels:
    body['labels'] = dict(job.labels)
  body.update((k, config[k]) for k in allowed if k in config)
  body['trialJobSpec'] = custom_job_spec(job, package_uri)
  job_options.apply_to_job(job.options, body)
  # The trainer reports the metric named by $CLOUD_ML_HP_METRIC_TAG (aiplatform_env). Set it in
  # every replica rather than rely on Vertex AI to set it: without it a trial reports nothing.
  tag = {'name': aiplatform_env.METRIC_TAG_ENV, 'value': metric}
  for pool in body['trialJobSpec']['workerPoolSpecs']:
    task_spec(pool)['env'] = [tag]
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


def gcloud_commands(job, body, hptuning=False):
  """The gcloud command that creates the same job, as lines of shell: the --config file first
  (a here-document), then the command. `gcloud ai custom-jobs create --config` reads a
  CustomJobSpec (google-cloud-sdk lib/googlecloudsdk/command_lib/ai/flags.py, CUSTOM_JOB_CONFIG;
  lib/surface/ai/custom_jobs/create.py imports the file as 'CustomJobSpec'), so the file holds
  body['jobSpec']; `gcloud ai hp-tuning-jobs create --config` reads a whole
  HyperparameterTuningJob (lib/googlecloudsdk/api_lib/ai/hp_tuning_jobs/client.py), so it holds
  the body. `body`: the request as the API's JSON (camelCase, enum names)."""
  config = body if hptuning else body['jobSpec']
  name = 'hptuning_job.json' if hptuning else 'job_spec.json'
  command = ['gcloud', 'ai', 'hp-tuning-jobs' if hptuning else 'custom-jobs', 'create',
             '--project=' + job.project, '--region=' + job.region,
             '--display-name=' + job.display_name, '--config=' + name]
  if not hptuning and body.get('labels'):  # a CustomJob's, outside the CustomJobSpec file
    command.append('--labels=' + ','.join('%s=%s' % kv for kv in sorted(body['labels'].items())))
  if not hptuning and body.get('encryptionSpec'):  # likewise (gcloud ai custom-jobs create)
    command.append('--kms-key=' + body['encryptionSpec']['kmsKeyName'])
  return ["cat > %s <<'EOF'" % name, json.dumps(config, indent=2), 'EOF',
          ' '.join(shlex.quote(c) for c in command)]


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
  command = ['python', '-m', 'trainer.submit', '--platform=vertex', '--region=' + region,
             '--build_image', '--container_uri=' + IMAGE_EXAMPLE, '--base_output_dir=' + job_dir]
  command += _SCALE_TIER_FLAGS.get(scale_tier, ['--machine_type=MACHINE_TYPE'])
  return ' '.join(shlex.quote(c) for c in command + ['--'] + list(trainer_args))
