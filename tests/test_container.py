"""The trainer image (the Dockerfile's cpu target) run as Vertex AI runs a custom container: the
entry point takes the trainer's flags, the job's directories come from AIP_*, CLUSTER_SPEC and
TF_CONFIG are a single chief's, the data is mounted read-only and the network is off
(`docker run --network=none`). A tuning trial reports its metric into a root-owned
/var/hypertune, as Google's training service lays it out, while the trainer runs as uid 1000.
Then a Spot preemption: `docker stop` (SIGTERM) ends the container with status 75 after saving a
checkpoint, and the same container command, as Vertex AI restarts a replica, resumes from it to
the accuracy of an uninterrupted run. And a user's own package (`trainer.submit --build_image
--user_package`): the derived image's build, its network trained by the image's trainer, and pip
held to the image's versions.

`make test` builds the image (scripts/build-image) with its own Docker daemon and passes
TRAINER_IMAGE, DOCKER_HOST and DOCKER (the client) here. Runs once, on the TF 2.15 runtime: the
image holds TF 2.15 whichever runtime runs pytest.
"""

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import uuid

import pytest

from trainer.cloud import image_build
from trainer.cloud import user_package

from helpers import BackgroundRun
from helpers import REPO

IMAGE = os.environ.get('TRAINER_IMAGE')
DOCKER = os.environ.get('DOCKER', 'docker')
EXIT_RESUMABLE = 75  # trainer.errors.EXIT_RESUMABLE, seen from outside the container

pytestmark = [
    pytest.mark.one_runtime('the trainer image holds TF 2.15 whichever runtime runs pytest'),
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


def _vertex_run(job, data_dir, name, env=None, docker_args=(), image=IMAGE):
  """`docker run` as Vertex AI starts a single-replica CustomJob's container (vertex_env.py);
  `env`: more variables, `docker_args`: more options of `docker run`."""
  cluster_spec = {'cluster': {'workerpool0': ['workerpool0-0:2222']}, 'environment': 'cloud',
                  'task': {'type': 'workerpool0', 'index': 0}}
  tf_config = {'cluster': {'chief': ['workerpool0-0:2222']}, 'environment': 'cloud',
               'task': {'type': 'chief', 'index': 0}}
  env = {'AIP_MODEL_DIR': '/job/model/', 'AIP_CHECKPOINT_DIR': '/job/checkpoints/',
         'AIP_TENSORBOARD_LOG_DIR': '/job/logs/', 'CLUSTER_SPEC': json.dumps(cluster_spec),
         'TF_CONFIG': json.dumps(tf_config), **(env or {})}
  command = [DOCKER, 'run', '--name', name, '--network=none',
             '-v', '%s:/data:ro' % _readable_copy(data_dir, job.parent), '-v', '%s:/job' % job]
  command += list(docker_args)
  for key, value in sorted(env.items()):
    command += ['-e', '%s=%s' % (key, value)]
  return command + [image]


@pytest.fixture
def container_name():
  """A unique container name; the container is removed at the end whatever happened."""
  name = 'trainer-test-' + uuid.uuid4().hex[:12]
  yield name
  _docker('rm', '-f', name)


def _results(job):
  return json.loads((job / 'checkpoints' / 'results.json').read_text())


def _hypertune_dir(tmp_path):
  """/var/hypertune as the service lays it out: root's, mode 0755 (cloudml-hypertune#6)."""
  path = tmp_path / 'hypertune'
  path.mkdir()
  os.chmod(str(path), 0o755)
  assert path.stat().st_uid == 0  # make test runs this module as root only
  return path


TRIAL_ENV = {'CLOUD_ML_HP_METRIC_TAG': 'top_1_accuracy', 'CLOUD_ML_TRIAL_ID': '7',
             'CLOUD_ML_HP_METRIC_FILE': '/var/hypertune/output.metrics'}


def test_the_image_trains_evaluates_exports_and_reports_a_trial_where_vertex_ai_says(
    tiny_dir, tmp_path, container_name):
  job, hypertune = _job_dir(tmp_path), _hypertune_dir(tmp_path)
  command = _vertex_run(job, tiny_dir, container_name, env=TRIAL_ENV,
                        docker_args=('-v', '%s:/var/hypertune' % hypertune))
  proc = subprocess.run(command + TRAIN_ARGS + [
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
  # The trial's metric reached the service's root-owned directory, written by uid 1000: the
  # entrypoint handed over that one file and dropped root, so the trainer wrote as `trainer`.
  (line,) = (hypertune / 'output.metrics').read_text().splitlines()
  reported = json.loads(line)
  assert float(reported['top_1_accuracy']) == pytest.approx(results['top_1_accuracy'])
  assert reported['trial'] == '7' and reported['global_step'] == '10'
  assert (hypertune / 'output.metrics').stat().st_uid == 1000
  assert hypertune.stat().st_uid == 0 and oct(hypertune.stat().st_mode)[-3:] == '755'
  assert (job / 'checkpoints' / 'model.ckpt-10.index').stat().st_uid == 1000


def test_a_trial_that_cannot_write_its_metric_stops_before_training(tiny_dir, tmp_path,
                                                                    container_name):
  """Started as uid 1000 itself (`docker run --user`), the entrypoint cannot hand the file over:
  the trainer refuses at start, not after hours of training."""
  job, hypertune = _job_dir(tmp_path), _hypertune_dir(tmp_path)
  proc = subprocess.run(_vertex_run(job, tiny_dir, container_name, env=TRIAL_ENV, docker_args=(
      '-v', '%s:/var/hypertune' % hypertune, '--user', '1000:1000')) + TRAIN_ARGS + [
          '--train_steps=10'], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        universal_newlines=True, timeout=300)
  assert proc.returncode == 2, proc.stderr[-3000:]
  assert ('error: this hyperparameter-tuning trial cannot write its metric file '
          '/var/hypertune/output.metrics as uid 1000 (Permission denied)') in proc.stderr
  assert not (job / 'checkpoints').exists() and not os.listdir(str(hypertune))


def test_the_entrypoint_hands_over_no_path_but_a_metric_file_of_its_own(tiny_dir, tmp_path,
                                                                         container_name):
  """As root, the entrypoint creates and chowns $CLOUD_ML_HP_METRIC_FILE: a value that points
  elsewhere (a symbolic link to /etc/passwd, a hard link, a directory, a path outside the
  hypertune folders, an option-like value) is refused before anything is created or chowned."""
  hypertune = _hypertune_dir(tmp_path)
  os.symlink('/etc/passwd', str(hypertune / 'link.metrics'))
  (hypertune / 'kept').write_text('')
  os.link(str(hypertune / 'kept'), str(hypertune / 'hard.metrics'))
  (hypertune / 'folder').mkdir()
  os.symlink('/etc', str(hypertune / 'sub'))
  cases = {'/var/hypertune/link.metrics':
               'goes through the symbolic link /var/hypertune/link.metrics',
           '/var/hypertune/sub/passwd': 'goes through the symbolic link /var/hypertune/sub',
           '/var/hypertune/hard.metrics': 'has other hard links',
           '/var/hypertune/folder': 'is not a regular file',
           '/var/hypertune/new/': 'is not a plain path to a file',
           '/var/hypertune/../etc/passwd': 'is not a plain path to a file',
           '/etc/passwd': 'is outside /var/hypertune and /tmp/hypertune',
           '-rf': 'is outside /var/hypertune and /tmp/hypertune',
           '/etc/passwd\\nerror: forged': 'is outside /var/hypertune and /tmp/hypertune'}
  before = sorted(os.listdir(str(hypertune)))
  jobs = []
  for i, (metric_file, says) in enumerate(sorted(cases.items())):
    _docker('rm', '-f', container_name)
    (tmp_path / str(i)).mkdir()
    jobs.append(_job_dir(tmp_path / str(i)))
    proc = subprocess.run(_vertex_run(jobs[-1], tiny_dir, container_name, docker_args=(
        '-v', '%s:/var/hypertune' % hypertune), env=dict(
            TRIAL_ENV, CLOUD_ML_HP_METRIC_FILE=metric_file)) + TRAIN_ARGS,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=120)
    assert proc.returncode == 2, (metric_file, proc.stderr[-2000:])
    errors = [l for l in proc.stderr.splitlines() if l.startswith('error: ')]
    assert errors == [l for l in proc.stderr.splitlines() if l.strip()], proc.stderr
    assert errors[0].startswith('error: CLOUD_ML_HP_METRIC_FILE=%s %s: ' % (metric_file, says))
  # Nothing was created or given away; the trainer never started.
  assert sorted(os.listdir(str(hypertune))) == before
  assert all((hypertune / n).lstat().st_uid == 0 for n in before)
  assert not any((job / 'checkpoints').exists() for job in jobs)


# The Spot case: the CNN on 1,280 real Fashion-MNIST training images, evaluated on 1,000 real test
# images, 400 steps: an uninterrupted run, then one preempted near step 100 and resumed.
SPOT_ARGS = ['--data_dir=/data', '--model=cnn', '--image_size=28', '--train_batch_size=32',
             '--eval_batch_size=100', '--skip_host_call', '--seed=1', '--train_steps=400',
             '--steps_per_eval=400', '--save_checkpoints_steps=100000']
# A resumed Estimator run draws new shuffles from its start step (docs/reliability.md), so its
# accuracy is that of another seed's uninterrupted run. Uninterrupted runs of this command with
# seeds 1-8 reached 0.764-0.794 (mean 0.781, standard deviation 0.011) on TF 2.15.1 on a Zen 4
# host, the image's TensorFlow run outside it (BENCHMARKS.md, "Spot preemption"): the bound is 3.8
# standard deviations under that mean, so the test needs no uninterrupted run of its own.
MIN_ACCURACY = 0.74
_LOSS = re.compile(r'\] step (\d+)/\d+ loss ([\d.]+)')


@pytest.fixture
def spot_data(fashion_mnist_dir, tmp_path):
  from helpers import write_subset  # pylint: disable=g-import-not-at-top
  return write_subset(fashion_mnist_dir, str(tmp_path / 'spot_data'), 1280, 1000)


def test_a_spot_preemption_resumes_to_the_accuracy_of_uninterrupted_runs(spot_data, tmp_path,
                                                                         container_name):
  """As Vertex AI preempts a Spot replica: SIGTERM, a grace period, then the replica restarted
  with the same command and AIP_* environment (the trainer's exit 75 is a non-zero exit, which
  the service restarts; scheduling.py cites the page)."""
  job = _job_dir(tmp_path)
  command = _vertex_run(job, spot_data, container_name)
  with BackgroundRun('--log_every_n_secs=0.2', *SPOT_ARGS, command=command) as run:
    logged = run.wait_for_step(100)
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
  assert logged <= step < 400
  assert (job / 'checkpoints' / ('model.ckpt-%d.index' % step)).exists()
  assert not (job / 'checkpoints' / 'results.json').exists()

  _docker('rm', container_name)
  resumed = subprocess.run(command + SPOT_ARGS, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=600)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert 'Resuming from the checkpoint at step %d' % step in resumed.stderr
  # The weights came back, not only the step count: the resumed run's first logged loss is the
  # trained network's, far below the first loss of the run from scratch (6.0 at step 1).
  (first_step, first_loss), = _LOSS.findall(run.stderr)[:1]
  (resumed_step, resumed_loss), = _LOSS.findall(resumed.stderr)[:1]
  assert int(first_step) <= 2 and int(resumed_step) > step
  assert float(resumed_loss) < 0.5 * float(first_loss), (resumed_loss, first_loss)
  results = _results(job)
  print('preempted at step %d: top_1_accuracy %.4f resumed'
        % (step, results['top_1_accuracy']))  # shown by pytest -s
  assert results['global_step'] == 400
  assert results['top_1_accuracy'] > MIN_ACCURACY, results['top_1_accuracy']


# The user's package: tests/fixtures/user_package, one network (acme_nets.small_cnn) and no
# dependencies, given as the wheel `pip wheel` makes of it, so that the derived build runs with
# no network (`--network=none`: nothing leaves the machine; a source directory would need pip's
# setuptools from PyPI).
USER_PACKAGE = os.path.join(REPO, 'tests', 'fixtures', 'user_package')


def _wheel(source, tmp_path):
  """The wheel of the package at `source`, built here with this venv's setuptools from a copy
  (setuptools writes build/ and *.egg-info beside the sources: never into the repository)."""
  copy, out = tmp_path / 'wheel_source', tmp_path / 'wheel'
  shutil.copytree(str(source), str(copy))
  subprocess.run([sys.executable, '-m', 'pip', 'wheel', '-q', '--no-deps', '--no-build-isolation',
                  '-w', str(out), str(copy)], check=True, timeout=300)
  (wheel,) = out.glob('*.whl')
  return str(wheel)


def _build_user_image(package, tag):
  """trainer.submit --build_image --user_package's derived build (image_build.commands' second
  command), on the image make test built, offline."""
  context, name = user_package.build_context(package)
  command = image_build.user_image_build(IMAGE, tag, context, name, DOCKER, ['--network=none'])
  return subprocess.run(command, env=dict(os.environ, **image_build.BUILD_ENV),
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                        universal_newlines=True, timeout=600)


@pytest.fixture
def user_image_tag():
  tag = 'trainer-user-test:' + uuid.uuid4().hex[:12]
  yield tag
  _docker('rmi', '-f', tag)


def test_a_users_package_trains_in_an_image_derived_from_the_trainers(
    tiny_dir, tmp_path, container_name, user_image_tag):
  build = _build_user_image(_wheel(USER_PACKAGE, tmp_path), user_image_tag)
  assert build.returncode == 0, build.stdout[-3000:]
  job = _job_dir(tmp_path)
  args = [a for a in TRAIN_ARGS if a != '--model=cnn'] + [
      '--network=acme_nets.small_cnn:small_cnn', '--network_params={"width": 8}',
      '--train_steps=10', '--steps_per_eval=10']
  proc = subprocess.run(_vertex_run(job, tiny_dir, container_name, image=user_image_tag) + args,
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        universal_newlines=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  results = _results(job)
  assert results['model'] == 'acme_nets.small_cnn:small_cnn' and results['global_step'] == 10
  assert (job / results['export_path'][len('/job/'):] / 'saved_model.pb').exists()
  # The trainer's TensorFlow and the trainer itself are the base image's, untouched.
  versions = ('import importlib.metadata as m; print(sorted((d.metadata["Name"], d.version) '
              'for d in m.distributions()))')
  base, derived = (_docker('run', '--rm', '--network=none', '--entrypoint', 'python', image, '-c',
                           versions) for image in (IMAGE, user_image_tag))
  assert base.returncode == 0 and derived.returncode == 0, (base.stderr, derived.stderr)
  added = set(ast.literal_eval(derived.stdout)) - set(ast.literal_eval(base.stdout))
  assert added == {('acme-nets', '0.1.0')}, added


@pytest.mark.parametrize('project, says', [
    # Needs another NumPy than the image's: held to the image's versions, pip's resolver refuses
    # it before looking for one.
    (('version = "0.1.0"', 'version = "0.1.0"\ndependencies = ["numpy<1.20"]'),
     ('ResolutionImpossible', 'depends on numpy<1.20', 'The user requested (constraint) numpy==')),
    # A distribution named tensorflow (as a requirement of `tensorflow` would bring) lands on the
    # cpu image's tensorflow-cpu: refused after pip. Named so here to need no download.
    (('name = "acme-nets"', 'name = "tensorflow"'),
     ('error: your package requires tensorflow, which pip installed over the image\'s '
      'tensorflow-cpu',)),
], ids=['another_version', 'tensorflow_over_tensorflow_cpu'])
def test_a_users_package_that_would_replace_the_images_tensorflow_fails_the_build(
    tmp_path, user_image_tag, project, says):
  package = tmp_path / 'package'
  shutil.copytree(USER_PACKAGE, str(package))
  pyproject = package / 'pyproject.toml'
  pyproject.write_text(pyproject.read_text().replace(*project))
  build = _build_user_image(_wheel(package, tmp_path), user_image_tag)
  assert build.returncode != 0
  for text in says:
    assert text in build.stdout, build.stdout[-3000:]
