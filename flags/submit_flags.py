"""Flags of `python -m trainer.submit [flags] -- [trainer.main flags]`.

Vertex AI custom training (`--platform=vertex`, the default) and, for wrappers that still build it,
the legacy AI Platform Training command (`--platform=ai_platform`; AI Platform Training was shut
down on 2025-01-31). Without --platform, any of --job_dir, --scale_tier or --config selects
ai_platform (they exist only there), so commands written for it keep producing the same gcloud
command.
"""

from absl import flags

from trainer.cli import help_text

SCALE_TIERS = ('BASIC', 'STANDARD_1', 'PREMIUM_1', 'BASIC_GPU', 'BASIC_TPU', 'CUSTOM')
PLATFORMS = ('vertex', 'ai_platform')
# Flags that exist only for AI Platform: given without --platform, they select ai_platform.
AI_PLATFORM_SELECTORS = ('job_dir', 'scale_tier', 'config')
# The flags both platforms read.
SHARED = ('platform', 'region', 'dist_dir', 'dry_run')
# Each platform's own flags, with what to do on the other platform, which refuses them rather
# than ignore them.
AI_PLATFORM_ONLY = {
    'job_dir': 'use --staging_bucket and --base_output_dir',
    'scale_tier': 'use --machine_type, --accelerator_type, --worker_count, --ps_count',
    'config': 'use --machine_type, --accelerator_type, --worker_count, --ps_count (and for a '
              'tuning study --hptuning_config)',
    'job_name': 'use --display_name',
    'runtime_version': 'use --container_uri (an image with the TensorFlow you want)',
    'python_version': 'use --container_uri (an image with the Python you want)',
    'gcloud': 'drop it (the client library submits; --dry_run prints the gcloud command)',
}
VERTEX_ONLY = {
    'project': 'drop it (gcloud\'s project is used: `gcloud config set project`)',
    'staging_bucket': 'use --job_dir',
    'base_output_dir': 'use --job_dir',
    'machine_type': 'use --scale_tier or --config',
    'allow_unlisted_machine': 'use --scale_tier or --config',
    'labels': 'drop it (AI Platform is shut down: submit to Vertex AI)',
    'encryption_key': 'drop it (AI Platform is shut down: submit to Vertex AI)',
    'reservation': 'drop it (AI Platform is shut down: submit to Vertex AI)',
    'network': 'use a trainingInput.network in --config',
    'reserved_ip_ranges': 'drop it (AI Platform is shut down: submit to Vertex AI)',
    'network_attachment': 'drop it (AI Platform is shut down: submit to Vertex AI)',
    'boot_disk_type': 'use a trainingInput.masterConfig.diskConfig in --config',
    'boot_disk_size_gb': 'use a trainingInput.masterConfig.diskConfig in --config',
    'persistent_resource_id': 'drop it (AI Platform is shut down: submit to Vertex AI)',
    'enable_web_access': 'use trainingInput.enableWebAccess in --config',
    'cancel_on_interrupt': 'drop it (AI Platform is shut down: submit to Vertex AI)',
    'accelerator_type': 'use --scale_tier or --config',
    'accelerator_count': 'use --config',
    'worker_count': 'use --config',
    'ps_count': 'use --config',
    'container_uri': 'use --runtime_version',
    'executor_image_uri': 'use --runtime_version',
    'build_image': 'drop it (AI Platform runs a package, not an image)',
    'docker': 'drop it (AI Platform runs a package, not an image)',
    'user_package': 'drop it (AI Platform ran one package, not an image; submit to Vertex AI)',
    'tensorboard': 'drop it (TensorBoard reads --job_dir)',
    'service_account': 'use a trainingInput.serviceAccount in --config',
    'display_name': 'use --job_name',
    'wait': 'drop it (follow the job with `gcloud ai-platform jobs stream-logs`)',
    'poll_interval': 'drop it (follow the job with `gcloud ai-platform jobs stream-logs`)',
    'hptuning_config': 'use a trainingInput.hyperparameters block in --config',
    'api_endpoint': 'drop it (gcloud chooses the endpoint)',
    'scheduling_strategy': 'drop it (AI Platform had no Spot VMs)',
    'max_wait_duration': 'drop it (AI Platform had no Flex-start)',
    'timeout': 'use trainingInput.scheduling.maxRunningTime in --config',
    'restart_job_on_worker_restart': 'drop it',
    'disable_retries': 'drop it',
}


def define_submit_flags():
  """Defines the flags of `trainer.submit` (once per process).

  Returns:
    The groups `trainer.submit --help` shows (`trainer.cli.help_text.define_groups`).
  """
  return help_text.define_groups([('Every platform', _define_common_flags),
                                  ('Vertex AI', _define_vertex_flags),
                                  ('AI Platform (shut down on 2025-01-31)',
                                   _define_ai_platform_flags)])


def _define_common_flags():
  flags.DEFINE_enum('platform', 'vertex', PLATFORMS,
                    'vertex: a Vertex AI CustomJob (or HyperparameterTuningJob). ai_platform: the '
                    'legacy `gcloud ai-platform jobs submit training` command (service shut down '
                    'on 2025-01-31). Default vertex, or ai_platform when --job_dir, --scale_tier '
                    'or --config is given.')
  flags.DEFINE_string('region', 'us-central1', 'Region (location) of the job.')
  flags.DEFINE_string('dist_dir', 'dist', 'Where the source distribution is built.')
  flags.DEFINE_bool('dry_run', False,
                    'Print the request (Vertex: the job JSON and the equivalent gcloud command; AI '
                    'Platform: the gcloud command); upload and create nothing.')


def _define_vertex_flags():
  flags.DEFINE_string('project', None, 'Google Cloud project of the Vertex AI job. Default: '
                      '$GOOGLE_CLOUD_PROJECT, else $CLOUDSDK_CORE_PROJECT.')
  flags.DEFINE_string('staging_bucket', None,
                      'gs://BUCKET[/PREFIX] where the source distribution is uploaded '
                      '(<prefix>/<display name>/<sdist>); with --executor_image_uri only.')
  flags.DEFINE_string('base_output_dir', None,
                      'gs:// base output directory of the CustomJob: Vertex AI sets AIP_MODEL_DIR, '
                      'AIP_CHECKPOINT_DIR and AIP_TENSORBOARD_LOG_DIR under it for the trainer.')
  flags.DEFINE_string('machine_type', 'n1-standard-8',
                      'Vertex AI: machine type of every worker pool (cloud-tpu for a TPU VM).')
  flags.DEFINE_string('labels', None,
                      'Vertex AI: the job\'s labels, KEY=VALUE,... (e.g. '
                      'team=vision,cost-center=cc42; lowercase letters, digits, _ and -), for cost '
                      'attribution.')
  flags.DEFINE_string('encryption_key', None,
                      'Vertex AI: a customer-managed encryption key (CMEK) for the job, '
                      'projects/PROJECT/locations/REGION/keyRings/RING/cryptoKeys/KEY, in the '
                      'job\'s --region; Vertex AI\'s service agent needs '
                      'roles/cloudkms.cryptoKeyEncrypterDecrypter on it (docs/cloud.md).')
  flags.DEFINE_string('reservation', None,
                      'Vertex AI: the Compute Engine reservation every replica consumes: any (a '
                      'matching one if there is one, else on-demand), none (on-demand only), or '
                      'projects/PROJECT/zones/ZONE/reservations/NAME (that one: of the job\'s '
                      'machine type and accelerators exactly, in the job\'s region).')
  flags.DEFINE_string('network', None,
                      'Vertex AI: the VPC network the job is peered with, '
                      'projects/PROJECT_NUMBER/global/networks/NETWORK (VPC Network Peering for '
                      'Vertex AI set up first).')
  flags.DEFINE_string('reserved_ip_ranges', None,
                      'Vertex AI: with --network, the names of its reserved IP ranges the job may '
                      'use, comma-separated.')
  flags.DEFINE_string('network_attachment', None,
                      'Vertex AI: reach your VPC network through a Private Service Connect '
                      'interface: the Compute Engine network attachment\'s name, in the job\'s '
                      'project and region, or projects/PROJECT/regions/REGION/networkAttachments/'
                      'NAME (the road for H100 Mega, H200 and B200 jobs, which --network cannot '
                      'peer).')
  flags.DEFINE_string('boot_disk_type', None,
                      'Vertex AI: every replica\'s boot disk type: pd-ssd, pd-standard or '
                      'hyperdisk-balanced (service default: pd-ssd; hyperdisk-balanced on A3 '
                      'Ultra).')
  flags.DEFINE_integer('boot_disk_size_gb', None,
                       'Vertex AI: every replica\'s boot disk, 100 to 64000 GB (service default '
                       '100).')
  flags.DEFINE_string('persistent_resource_id', None,
                      'Vertex AI: run on the machines of this persistent resource (same project '
                      'and region; its network and encryption key must be the job\'s).')
  flags.DEFINE_bool('enable_web_access', False,
                    'Vertex AI: interactive shells into the training containers (their URLs, a '
                    'tuning job\'s per trial, are logged with --wait once they run).')
  flags.DEFINE_bool('allow_unlisted_machine', False,
                    'Vertex AI: send a --machine_type that this pipeline\'s table of Vertex AI '
                    'machines (trainer/cloud/vertex_machines.json) does not list, unchecked, with '
                    'a warning (a family newer than the table); Vertex AI decides at create.')
  flags.DEFINE_string('accelerator_type', None,
                      'NVIDIA_TESLA_T4, NVIDIA_TESLA_V100, NVIDIA_L4, NVIDIA_TESLA_A100, ... or '
                      'TPU_V2 / TPU_V3 (with --machine_type=cloud-tpu). Default: none (CPU).')
  flags.DEFINE_integer('accelerator_count', None,
                       'Accelerators per replica. Default: 1 GPU, 8 TPU cores.')
  flags.DEFINE_integer('worker_count', 0, 'Vertex AI: replicas of worker pool 1 (workers).')
  flags.DEFINE_integer('ps_count', 0,
                       'Vertex AI: replicas of worker pool 2 (parameter servers).')
  flags.DEFINE_string('container_uri', None,
                      'The trainer\'s own image (containerSpec.imageUri), built from the '
                      'repository\'s Dockerfile: '
                      'REGION-docker.pkg.dev/PROJECT/REPOSITORY/IMAGE:TAG. '
                      'Its entrypoint runs trainer.main with the flags after `--`. This or '
                      '--executor_image_uri is required (docs/cloud.md).')
  flags.DEFINE_bool('build_image', False,
                    'Before submitting, build --container_uri from the repository root (`docker '
                    'build --target cpu|gpu|tpu`, by --accelerator_type) and push it. With '
                    '--dry_run the commands are printed, not run.')
  flags.DEFINE_string('docker', 'docker', 'The docker executable of --build_image.')
  flags.DEFINE_string('user_package', None,
                      'With --build_image: your own Python package (its root directory, with '
                      'setup.py or pyproject.toml, or a wheel or sdist file), installed into an '
                      'image derived from the trainer\'s, so that the --network, --model_fn or '
                      '--input_fn of yours after `--` import in the job; pip holds it to the '
                      'image\'s versions (docs/your-model.md).')
  flags.DEFINE_string('executor_image_uri', None,
                      'A prebuilt Vertex AI training image to run the source distribution in '
                      '(pythonPackageSpec; the package is staged under --staging_bucket). The '
                      'TensorFlow 2.15 images, the last with tf.estimator, reached end of '
                      'availability: one past its date is refused.')
  flags.DEFINE_string('tensorboard', None,
                      'projects/PROJECT/locations/REGION/tensorboards/ID: a Vertex AI TensorBoard '
                      'instance the job streams its logs to. Needs --service_account and '
                      '--base_output_dir.')
  flags.DEFINE_string('service_account', None,
                      'Service account e-mail the job runs as (CustomJobSpec.serviceAccount). '
                      'Default: Vertex AI\'s Custom Code Service Agent.')
  flags.DEFINE_string('display_name', None,
                      'Display name of the Vertex AI job. Default: tpu_pipeline_<UTC time>.')
  flags.DEFINE_bool('wait', False, 'Vertex AI: poll the job until it ends, logging each state; '
                    'exit 0 if it succeeded, 1 otherwise.')
  flags.DEFINE_float('poll_interval', 30.0, 'Vertex AI: seconds between two polls of --wait.')
  flags.DEFINE_bool('cancel_on_interrupt', False,
                    'Vertex AI, with --wait: Ctrl-C cancels the job without asking (without it, '
                    'Ctrl-C asks in a terminal and leaves the job running elsewhere).')
  flags.DEFINE_string('hptuning_config', None,
                      'A YAML with studySpec, maxTrialCount and parallelTrialCount (as '
                      '`gcloud ai hp-tuning-jobs create --config`): submit a '
                      'HyperparameterTuningJob whose trials run the CustomJob; see vertex/*.yaml. '
                      'One metric: top_1_accuracy or top_5_accuracy (goal MAXIMIZE) or loss '
                      '(MINIMIZE).')
  flags.DEFINE_enum('scheduling_strategy', None, ('STANDARD', 'SPOT', 'FLEX_START'),
                    'CustomJobSpec.scheduling.strategy, also of each tuning trial. STANDARD: '
                    'on-demand VMs (the service\'s default). SPOT: Spot VMs, cheaper and '
                    'reclaimable: a reclaimed replica saves a checkpoint, exits 75 and is '
                    'restarted from $AIP_CHECKPOINT_DIR (docs/cloud.md, Spot VMs). FLEX_START: '
                    'queue for L4, A100, H100 or H200 machines (Dynamic Workload Scheduler), 7 '
                    'days at most.')
  flags.DEFINE_string('max_wait_duration', None,
                      'FLEX_START: how long the job may queue for its machines, e.g. 6h or 2d; 0 '
                      'waits indefinitely. Service default: 1 day.')
  flags.DEFINE_string('timeout', None,
                      'The job\'s (each trial\'s) longest running time, e.g. 36h or 7d. Service '
                      'default: 7 days, also the most for FLEX_START.')
  flags.DEFINE_bool('restart_job_on_worker_restart', False,
                    'Restart the whole job when one replica restarts (for clusters that cannot '
                    'take a replica leaving and rejoining).')
  flags.DEFINE_bool('disable_retries', False,
                    'Do not let Vertex AI retry the job after internal errors once it runs.')
  flags.DEFINE_string('api_endpoint', None,
                      'Vertex AI API endpoint. Default: REGION-aiplatform.googleapis.com. An '
                      'http:// URL (a local stand-in in tests) is called without credentials.')


def _define_ai_platform_flags():
  flags.DEFINE_string('job_name', None,
                      'AI Platform job name (letters, digits, underscores; starts with a letter). '
                      'Default: tpu_pipeline_<UTC time>.')
  flags.DEFINE_string('job_dir', None, 'AI Platform: gs:// directory for the job: the staged '
                      'package and, as the trainer\'s --job-dir, its default model_dir.')
  flags.DEFINE_enum('scale_tier', None, SCALE_TIERS,
                    'AI Platform: predefined machines; exclusive with --config. CUSTOM needs '
                    '--config.')
  flags.DEFINE_string('config', None,
                      'AI Platform: a job config YAML (trainingInput: scaleTier, masterType, '
                      'workerCount, ...); see aiplatform/*.yaml.')
  flags.DEFINE_string('runtime_version', '1.15', 'AI Platform runtime version (TensorFlow).')
  flags.DEFINE_string('python_version', '3.7', 'AI Platform: Python version of the runtime.')
  flags.DEFINE_string('gcloud', 'gcloud', 'AI Platform: the gcloud executable.')
