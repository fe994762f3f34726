"""An AI Platform Training job of this package: the source distribution built from setup.py and
the `gcloud ai-platform jobs submit training` command that runs it with `trainer.main`.

The sdist carries setup.py's one package, trainer (with trainer.models and trainer.flags), and
requires no TensorFlow: the 1.15 runtime brings its own, which pip must not replace.
"""

import fcntl
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

from trainer.errors import PipelineError

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SDIST_LOCK = '.sdist.lock'  # in the repo; .gitignore lists it
_JOB_NAME = re.compile(r'^[A-Za-z][A-Za-z0-9_]{0,127}$')


def build_sdist(dist_dir, repo=REPO):
  """Builds the source distribution of `repo` into `dist_dir`; returns the .tar.gz path.

  Raises:
    PipelineError: setup.py failed (its output is included).
  """
  os.makedirs(dist_dir, exist_ok=True)
  # setup.py sdist assembles its tree inside `repo`: two builds at once (two submissions, or
  # parallel tests) would delete each other's files, so builds of one repo take turns on a lock
  # file inside the repo (which setup.py writes to anyway), never at a guessable path in a
  # shared /tmp: opened without following a link and without truncating.
  lock_path = os.path.join(repo, SDIST_LOCK)
  try:
    lock_fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
  except OSError as e:
    raise PipelineError('cannot open the build lock %s (%s): it must be a plain file this user '
                        'can write; remove it if it is a link.' % (lock_path, e.strerror))
  with os.fdopen(lock_fd, 'r+') as lock, tempfile.TemporaryDirectory() as scratch:
    fcntl.flock(lock, fcntl.LOCK_EX)
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
