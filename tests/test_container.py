"""The trainer image (the Dockerfile's cpu target) run as Vertex AI runs a custom container: the
entry point takes the trainer's flags, the job's directories come from AIP_*, CLUSTER_SPEC and
TF_CONFIG are a single chief's, the data is mounted read-only and the network is off
(`docker run --network=none`). Then a preemption: `docker stop` (SIGTERM) ends the container with
status 75 after saving a checkpoint, and a new container resumes from it.

`make test` builds the image (scripts/build-image) with its own Docker daemon and passes
TRAINER_IMAGE, DOCKER_HOST and DOCKER (the client) here. Runs once, on the TF 2.15 runtime: the
image holds TF 2.15 whichever runtime runs pytest.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import uuid

import pytest

from helpers import BackgroundRun

IMAGE = os.environ.get('TRAINER_IMAGE')
DOCKER = os.environ.get('DOCKER', 'docker')
EXIT_RESUMABLE = 75  # trainer.errors.EXIT_RESUMABLE, seen from outside the container

pytestmark = [
    pytest.mark.skipif(sys.version_info < (3, 8), reason='the trainer image is tested once, on '
                       'the TF 2.15 runtime (.venv-tf2): it holds TF 2.15 whichever runtime runs '
                       'pytest'),
    pytest.mark.skipif(not IMAGE, reason='no TRAINER_IMAGE: `make test` builds the image and '
                       'sets it when it runs as root (Docker needs root here; BUILD.md)'),
]

# Tiny but real: the seed CNN on 64 real Fashion-MNIST images (tests/conftest.py tiny_dir).
TRAIN_ARGS = ['--data_dir=/data', '--model=cnn', '--image_size=28', '--train_batch_size=8',
              '--eval_batch_size=50', '--skip_host_call', '--seed=1']


def _docker(*args, timeout=120):
  return subprocess.run([DOCKER] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        universal_newlines=True, timeout=timeout)


@pytest.fixture(scope='module', autouse=True)
def _image_present():
  """A missing image or daemon fails here once, with docker's own words."""
  found = _docker('image', 'inspect', IMAGE)
  assert found.returncode == 0, 'TRAINER_IMAGE=%s: %s' % (IMAGE, found.stderr)


def _readable_copy(data_dir, tmp_path):
  """data_dir copied where the image's user (uid 1000, not root) may read it: pytest makes its
  directories 0700."""
  copy = str(tmp_path / 'data')
  shutil.copytree(data_dir, copy)
  os.chmod(copy, 0o755)
  for name in os.listdir(copy):
    os.chmod(os.path.join(copy, name), 0o644)
  return copy


def _job_dir(tmp_path):
  """The job's output directory (Vertex AI's baseOutputDirectory), writable by the image's user."""
  job = tmp_path / 'job'
  job.mkdir()
  os.chmod(str(job), 0o777)
  return job


def _vertex_run(job, data_dir, name):
  """`docker run` as Vertex AI starts a single-replica CustomJob's container (vertex_env.py)."""
  cluster_spec = {'cluster': {'workerpool0': ['workerpool0-0:2222']}, 'environment': 'cloud',
                  'task': {'type': 'workerpool0', 'index': 0}}
  tf_config = {'cluster': {'chief': ['workerpool0-0:2222']}, 'environment': 'cloud',
               'task': {'type': 'chief', 'index': 0}}
  env = {'AIP_MODEL_DIR': '/job/model/', 'AIP_CHECKPOINT_DIR': '/job/checkpoints/',
         'AIP_TENSORBOARD_LOG_DIR': '/job/logs/', 'CLUSTER_SPEC': json.dumps(cluster_spec),
         'TF_CONFIG': json.dumps(tf_config)}
  command = [DOCKER, 'run', '--name', name, '--network=none',
             '-v', '%s:/data:ro' % _readable_copy(data_dir, job.parent), '-v', '%s:/job' % job]
  for key, value in sorted(env.items()):
    command += ['-e', '%s=%s' % (key, value)]
  return command + [IMAGE]


@pytest.fixture
def container_name():
  """A unique container name; the container is removed at the end whatever happened."""
  name = 'trainer-test-' + uuid.uuid4().hex[:12]
  yield name
  _docker('rm', '-f', name)


def _results(job):
  return json.loads((job / 'checkpoints' / 'results.json').read_text())


def test_the_image_trains_evaluates_and_exports_where_vertex_ai_says(tiny_dir, tmp_path,
                                                                    container_name):
  job = _job_dir(tmp_path)
  proc = subprocess.run(_vertex_run(job, tiny_dir, container_name) + TRAIN_ARGS + [
      '--train_steps=10', '--steps_per_eval=10', '--log_every_n_secs=1'],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        universal_newlines=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert 'from $AIP_CHECKPOINT_DIR' in proc.stderr and 'from $AIP_MODEL_DIR' in proc.stderr
  results = _results(job)
  assert results['global_step'] == 10
  assert (job / 'checkpoints' / 'model.ckpt-10.index').exists()
  # Paths in results.json are the container's: /job/... is the mounted job directory.
  assert results['export_path'].startswith('/job/model/')
  export = job / results['export_path'][len('/job/'):]
  assert (export / 'saved_model.pb').exists()
  assert list((job / 'logs').glob('events.out.tfevents.*'))
  assert list((job / 'logs' / 'eval').glob('events.out.tfevents.*'))


def test_docker_stop_saves_a_checkpoint_exits_75_and_a_new_container_resumes(tiny_dir, tmp_path,
                                                                             container_name):
  """As Vertex AI preempts a replica: SIGTERM, a grace period, then a new container."""
  job = _job_dir(tmp_path)
  args = TRAIN_ARGS + ['--mode=train', '--save_checkpoints_steps=100000']
  command = _vertex_run(job, tiny_dir, container_name)
  with BackgroundRun('--train_steps=100000', '--log_every_n_secs=0.2', *args,
                     command=command) as run:
    logged = run.wait_for_step(5)
    # SIGTERM now; SIGKILL only if the trainer outlives its own grace period (25 s) by far.
    stopped = _docker('stop', '-t', '90', container_name, timeout=150)
    assert stopped.returncode == 0, stopped.stderr
    assert run.wait() == EXIT_RESUMABLE, run.stderr[-3000:]
  state = _docker('inspect', '--format', '{{.State.ExitCode}}', container_name)
  assert state.stdout.strip() == str(EXIT_RESUMABLE)
  saved = re.search(r'preempted \(SIGTERM\): the checkpoint at step (\d+) in /job/checkpoints '
                    r'is saved', run.stderr)
  assert saved, run.stderr[-3000:]
  step = int(saved.group(1))
  assert step >= logged
  assert (job / 'checkpoints' / ('model.ckpt-%d.index' % step)).exists()
  assert not (job / 'checkpoints' / 'results.json').exists()

  _docker('rm', container_name)
  resumed = subprocess.run(command + ['--train_steps=%d' % (step + 5)] + args,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=600)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert 'Resuming from the checkpoint at step %d' % step in resumed.stderr
  assert _results(job)['global_step'] == step + 5
