"""Submits the trainer to AI Platform Training: builds the source distribution from setup.py and
runs (or, with --dry_run, prints) the `gcloud ai-platform jobs submit training` command.

  python -m trainer.submit --job_dir=gs://BUCKET/jobs/r18 --scale_tier=BASIC_GPU \\
      -- --data_dir=gs://BUCKET/fashion_mnist --resnet_depth=18 --train_epochs=9

Everything after `--` goes to `python -m trainer.main` on AI Platform, which also passes
--job-dir (the trainer's default --model_dir). The sdist carries trainer/, models/ and flags/ and
requires no TensorFlow: the 1.15 runtime brings its own, which pip must not replace.
"""

import datetime
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

from absl import app
from absl import flags as absl_flags
from absl import logging

from flags import submit_flags  # pylint: disable=unused-import  # defines the flags
from trainer.config import PipelineError

FLAGS = absl_flags.FLAGS
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_JOB_NAME = re.compile(r'^[A-Za-z][A-Za-z0-9_]{0,127}$')


def build_sdist(dist_dir, repo=REPO):
  """Builds the source distribution of `repo` into `dist_dir`; returns the .tar.gz path.

  Raises:
    PipelineError: setup.py failed (its output is included).
  """
  os.makedirs(dist_dir, exist_ok=True)
  with tempfile.TemporaryDirectory() as scratch:
    proc = subprocess.run([sys.executable, 'setup.py', '-q', 'sdist', '--formats=gztar',
                           '--dist-dir', scratch], cwd=repo, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True)
    built = glob.glob(os.path.join(scratch, '*.tar.gz'))
    if proc.returncode or len(built) != 1:
      raise PipelineError('building the source distribution failed:\n%s' % proc.stdout[-3000:])
    target = os.path.join(os.path.abspath(dist_dir), os.path.basename(built[0]))
    shutil.move(built[0], target)
  return target


def submit_command(job_name, package, job_dir, trainer_args, region='us-central1',
                   scale_tier=None, config=None, runtime_version='1.15', python_version='3.7',
                   gcloud='gcloud'):
  """The gcloud argument list that submits `package` as a training job.

  Raises:
    PipelineError: a bad job name, job_dir, or scale tier / config combination.
  """
  if not _JOB_NAME.match(job_name):
    raise PipelineError('job name %r is invalid: letters, digits and underscores, starting with a '
                        'letter, at most 128 characters.' % job_name)
  if not job_dir.startswith('gs://'):
    raise PipelineError('--job_dir=%s must be a gs:// path: AI Platform stages the package there '
                        'and the trainer writes its checkpoints there.' % job_dir)
  if (scale_tier is None) == (config is None):
    raise PipelineError('give exactly one of --scale_tier (BASIC_GPU, BASIC_TPU, ...) and --config '
                        '(a job YAML such as aiplatform/custom_multiworker.yaml).')
  if scale_tier == 'CUSTOM':
    raise PipelineError('--scale_tier=CUSTOM needs the machine types of a --config YAML; pass '
                        '--config=aiplatform/custom_multiworker.yaml (or your own) instead.')
  if config is not None and not os.path.isfile(config):
    raise PipelineError('--config=%s does not exist.' % config)
  if any(a.split('=')[0] in ('--job-dir', '--job_dir') for a in trainer_args):
    raise PipelineError('pass the job directory as --job_dir of trainer.submit, not after `--`.')
  command = [gcloud, 'ai-platform', 'jobs', 'submit', 'training', job_name,
             '--region=' + region, '--runtime-version=' + runtime_version,
             '--python-version=' + python_version, '--module-name=trainer.main',
             '--packages=' + package, '--job-dir=' + job_dir]
  command.append('--scale-tier=' + scale_tier if scale_tier else '--config=' + config)
  return command + ['--'] + list(trainer_args)


def main(argv):
  trainer_args = argv[1:]  # absl leaves what follows `--` here
  job_name = FLAGS.job_name or datetime.datetime.utcnow().strftime('tpu_pipeline_%Y%m%d_%H%M%S')
  try:
    # Validate before building anything.
    submit_command(job_name, 'package.tar.gz', FLAGS.job_dir, trainer_args, FLAGS.region,
                   FLAGS.scale_tier, FLAGS.config)
    package = build_sdist(FLAGS.dist_dir)
    command = submit_command(job_name, package, FLAGS.job_dir, trainer_args, FLAGS.region,
                             FLAGS.scale_tier, FLAGS.config, FLAGS.runtime_version,
                             FLAGS.python_version, FLAGS.gcloud)
    if FLAGS.dry_run:
      print(' '.join(shlex.quote(c) for c in command))
      return
    if not shutil.which(FLAGS.gcloud):
      raise PipelineError('%s is not on PATH: install the Google Cloud SDK, or use --dry_run to '
                          'print the command.' % FLAGS.gcloud)
    logging.info('Running %s', ' '.join(shlex.quote(c) for c in command))
    sys.exit(subprocess.call(command))
  except PipelineError as e:
    print('error: %s' % e, file=sys.stderr)
    sys.exit(2)


def run():
  logging.set_verbosity(logging.INFO)
  app.run(main)


if __name__ == '__main__':
  run()
