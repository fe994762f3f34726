"""`python -m trainer.submit [flags] -- [trainer.main flags]`: submits the trainer to Google Cloud.

--platform=vertex (the default): a Vertex AI CustomJob, or with --hptuning_config a
HyperparameterTuningJob (trainer/cloud/vertex_job.py builds it, trainer/cloud/vertex_submit.py
sends it; needs `pip install '.[cloud]'`, on Python 3.7 with `-c constraints/py37.txt`). The job runs the trainer's own image (--container_uri,
built from the repository's Dockerfile; --build_image builds and pushes it first, with
--user_package installing your own package into it):

  python -m trainer.submit --project=PROJECT --region=us-central1 --build_image \\
      --container_uri=us-central1-docker.pkg.dev/PROJECT/REPO/tpu-pipeline:gpu \\
      --base_output_dir=gs://BUCKET/jobs/r18 \\
      --machine_type=n1-standard-8 --accelerator_type=NVIDIA_TESLA_T4 --wait \\
      -- --data_dir=gs://BUCKET/fashion_mnist --resnet_depth=18 --train_epochs=9

--platform=ai_platform (also chosen by --job_dir/--scale_tier/--config without --platform): the
legacy `gcloud ai-platform jobs submit training` command (trainer/cloud/aiplatform_job.py); the
service was shut down on 2025-01-31, so a warning prints the Vertex AI equivalent.

Everything after `--` goes to `python -m trainer.main`. Bad flags are refused before anything is
built or uploaded; every refusal is one `error: ...` line on stderr and exit status 2.
"""

import datetime
import json
import shlex
import shutil
import subprocess
import sys

from absl import flags as absl_flags
from absl import logging

from trainer.cli import outcome
from trainer.cloud import aiplatform_job
from trainer.cloud import image_build
from trainer.cloud import job_labels
from trainer.cloud import job_options
from trainer.cloud import scheduling
from trainer.cloud import user_package
from trainer.cloud import vertex_job
from trainer.errors import PipelineError
from trainer.flags import submit_flags

FLAGS = absl_flags.FLAGS
SHUTDOWN_DATE = '2025-01-31'


def _default_name():
  return datetime.datetime.utcnow().strftime('tpu_pipeline_%Y%m%d_%H%M%S')


def platform():
  """--platform, or ai_platform when only AI Platform's flags (--job_dir, ...) were given."""
  if FLAGS['platform'].present:
    return FLAGS.platform
  if any(FLAGS[f].present for f in submit_flags.AI_PLATFORM_SELECTORS):
    return 'ai_platform'
  return FLAGS.platform


def submit_ai_platform(trainer_args):
  """The legacy AI Platform Training submission (unchanged command); returns the exit status."""
  if FLAGS['platform'].present:
    chosen_by = '--platform=ai_platform'
  else:
    chosen_by = ' '.join('--' + f for f in submit_flags.AI_PLATFORM_SELECTORS if FLAGS[f].present)
  for flag, instead in sorted(submit_flags.VERTEX_ONLY.items()):
    if FLAGS[flag].present:
      raise PipelineError(
          '--%s is Vertex AI\'s, but %s submits to the legacy AI Platform: there, %s. To submit '
          'to Vertex AI instead, drop %s (docs/cloud.md).'
          % (flag, chosen_by, instead, chosen_by))
  if FLAGS.job_dir is None:
    raise PipelineError('--platform=ai_platform needs --job_dir=gs://...')
  logging.warning('AI Platform Training was shut down on %s: this gcloud command no longer runs '
                  'a job. The Vertex AI equivalent (docs/cloud.md):\n  %s', SHUTDOWN_DATE,
                  vertex_job.vertex_equivalent(FLAGS.job_dir, FLAGS.region, FLAGS.scale_tier,
                                               trainer_args))
  job_name = FLAGS.job_name or _default_name()
  # Validate before building anything.
  aiplatform_job.submit_command(job_name, 'package.tar.gz', FLAGS.job_dir, trainer_args,
                                FLAGS.region, FLAGS.scale_tier, FLAGS.config)
  package = aiplatform_job.build_sdist(FLAGS.dist_dir)
  command = aiplatform_job.submit_command(
      job_name, package, FLAGS.job_dir, trainer_args, FLAGS.region, FLAGS.scale_tier,
      FLAGS.config, FLAGS.runtime_version, FLAGS.python_version, FLAGS.gcloud)
  if FLAGS.dry_run:
    print(' '.join(shlex.quote(c) for c in command))
    return 0
  if not shutil.which(FLAGS.gcloud):
    raise PipelineError('%s is not on PATH: install the Google Cloud SDK, or use --dry_run to '
                        'print the command.' % FLAGS.gcloud)
  logging.info('Running %s', ' '.join(shlex.quote(c) for c in command))
  return subprocess.call(command)


def vertex_request(trainer_args):
  """The JobRequest of the flags, validated (warnings logged).

  Raises:
    PipelineError: a flag that cannot work.
  """
  for flag, instead in sorted(submit_flags.AI_PLATFORM_ONLY.items()):
    if FLAGS[flag].present:
      raise PipelineError('--%s is AI Platform\'s; with Vertex AI, %s (docs/cloud.md).'
                          % (flag, instead))
  job = vertex_job.JobRequest(
      project=vertex_job.project_from(FLAGS.project), region=FLAGS.region,
      staging_bucket=FLAGS.staging_bucket, base_output_dir=FLAGS.base_output_dir,
      machine_type=FLAGS.machine_type, accelerator_type=FLAGS.accelerator_type,
      allow_unlisted_machine=FLAGS.allow_unlisted_machine,
      labels=job_labels.parse(FLAGS.labels),
      options=job_options.Options(
          encryption_key=FLAGS.encryption_key, reservation=FLAGS.reservation,
          network=FLAGS.network, reserved_ip_ranges=job_options.ip_ranges(FLAGS.reserved_ip_ranges),
          network_attachment=FLAGS.network_attachment,
          boot_disk_type=FLAGS.boot_disk_type, boot_disk_size_gb=FLAGS.boot_disk_size_gb,
          persistent_resource_id=FLAGS.persistent_resource_id,
          enable_web_access=FLAGS.enable_web_access),
      accelerator_count=vertex_job.resolve_accelerator_count(
          FLAGS.accelerator_type, FLAGS.accelerator_count, FLAGS.machine_type),
      worker_count=FLAGS.worker_count, ps_count=FLAGS.ps_count,
      container_uri=FLAGS.container_uri, display_name=FLAGS.display_name or _default_name(),
      trainer_args=tuple(trainer_args), executor_image_uri=FLAGS.executor_image_uri,
      tensorboard=FLAGS.tensorboard, service_account=FLAGS.service_account,
      scheduling=scheduling.Scheduling(
          strategy=FLAGS.scheduling_strategy,
          max_wait_duration=scheduling.seconds('max_wait_duration', FLAGS.max_wait_duration),
          timeout=scheduling.seconds('timeout', FLAGS.timeout),
          restart_job_on_worker_restart=FLAGS.restart_job_on_worker_restart,
          disable_retries=FLAGS.disable_retries))
  if FLAGS.build_image:
    if not job.container_uri:
      raise PipelineError('--build_image builds and pushes --container_uri: give it, e.g. '
                          '--container_uri=%s.' % vertex_job.IMAGE_EXAMPLE)
    if not vertex_job.ARTIFACT_REGISTRY_IMAGE.match(job.container_uri):
      upper = ''
      if job.container_uri != job.container_uri.lower():
        upper = (' (image names are lower case: replace the placeholders such as PROJECT with '
                 'your own names)')
      raise PipelineError('--build_image pushes to Artifact Registry: --container_uri=%s must read '
                          '%s%s.' % (job.container_uri, vertex_job.IMAGE_EXAMPLE, upper))
  for warning in vertex_job.validate(job):
    logging.warning('%s', warning)
  return job


def user_package_context(trainer_args):
  """(context, package) of --user_package for the image --build_image builds, or None; its
  warnings logged.

  Raises:
    PipelineError: --user_package without --build_image, a bad package, or user code named after
      `--` that the built image would not hold.
  """
  if not FLAGS.build_image:
    if FLAGS.user_package is not None:
      raise PipelineError('--user_package is installed into the image that --build_image builds: '
                          'add --build_image (with --dry_run the commands are printed, not run).')
    return None
  for warning in user_package.check(FLAGS.user_package, trainer_args):
    logging.warning('%s', warning)
  if FLAGS.user_package is None:
    return None
  return user_package.build_context(FLAGS.user_package)


def _hptuning_config(path):
  try:
    import yaml  # pylint: disable=g-import-not-at-top
  except ImportError:
    raise PipelineError('--hptuning_config needs PyYAML: pip install pyyaml')
  try:
    with open(path) as f:
      return yaml.safe_load(f)
  except (OSError, yaml.YAMLError) as e:
    raise PipelineError('--hptuning_config=%s cannot be read: %s' % (path, e))


def _print_dry_run(job, text, hptuning, package):
  """The request JSON, then the shell commands: build and push the image (--container_uri), and
  the same job with gcloud."""
  print(text)
  if job.container_uri:
    print('# The image, built and pushed from the repository root%s:' % (
        '' if FLAGS.build_image else ' (what --build_image runs)'))
    target = vertex_job.docker_target(job.accelerator_type)
    print('\n'.join(image_build.shell_lines(job.container_uri, target, FLAGS.docker, package)))
  print('# The same job with gcloud:')
  print('\n'.join(vertex_job.gcloud_commands(job, json.loads(text), hptuning)))


def submit_vertex(trainer_args):
  """The Vertex AI submission; returns the exit status."""
  from trainer.cloud import vertex_submit  # pylint: disable=g-import-not-at-top
  job = vertex_request(trainer_args)
  package_context = user_package_context(trainer_args)
  hptuning = FLAGS.hptuning_config is not None
  config = _hptuning_config(FLAGS.hptuning_config) if hptuning else None
  if FLAGS.cancel_on_interrupt and not FLAGS.wait:
    raise PipelineError('--cancel_on_interrupt is what Ctrl-C does under --wait: add --wait.')
  if FLAGS.poll_interval <= 0:
    raise PipelineError('--poll_interval=%s: give the seconds between two polls, > 0.'
                        % FLAGS.poll_interval)
  if hptuning:  # its errors (an empty or malformed file too) before building anything
    vertex_job.hyperparameter_tuning_job(job, 'gs://x/p.tar.gz', config)
  v1 = vertex_submit.aiplatform_v1()
  package = package_uri = None
  if job.executor_image_uri:  # a prebuilt image runs the staged source distribution
    package = aiplatform_job.build_sdist(FLAGS.dist_dir)
    package_uri = vertex_job.staged_package_uri(job.staging_bucket, job.display_name, package)
  body = (vertex_job.hyperparameter_tuning_job(job, package_uri, config) if hptuning else
          vertex_job.custom_job(job, package_uri))
  _, text = vertex_submit.message_json(v1.HyperparameterTuningJob if hptuning else v1.CustomJob,
                                       body)
  if FLAGS.dry_run:
    _print_dry_run(job, text, hptuning, package_context)
    return 0
  if FLAGS.build_image:
    image_build.build_and_push(job.container_uri, vertex_job.docker_target(job.accelerator_type),
                               FLAGS.docker, package_context)
  if package:
    vertex_submit.stage_package(package, package_uri, job.project)
  return vertex_submit.send(body, hptuning, job.project, job.region, FLAGS.api_endpoint,
                            FLAGS.wait, FLAGS.poll_interval, job.service_account,
                            FLAGS.cancel_on_interrupt,
                            _ask if sys.stdin.isatty() and sys.stderr.isatty() else None)


def _ask(question):
  """A yes/no question on the terminal (stderr: stdout carries the job's name for scripts); no
  on anything but y or yes, a second Ctrl-C too."""
  try:
    sys.stderr.write(question)
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() in ('y', 'yes')
  except KeyboardInterrupt:
    return False


def main(argv):
  trainer_args = argv[1:]  # absl leaves what follows `--` here
  try:
    if platform() == 'ai_platform':
      sys.exit(submit_ai_platform(trainer_args))
    sys.exit(submit_vertex(trainer_args))
  except PipelineError as e:
    outcome.refuse(e)


def run():
  """The console entry point (`tpu-pipeline-submit`)."""
  outcome.start(__doc__, submit_flags.define_submit_flags(), main, 'docs/cloud.md')


if __name__ == '__main__':
  run()
