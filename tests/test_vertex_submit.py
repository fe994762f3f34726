"""Vertex AI submission (`trainer.submit --platform=vertex`): the request it builds and refuses,
the real google-cloud-aiplatform JobServiceClient talking REST to a local stand-in of the API
(tests/vertex_standin.py, which refuses what the service refuses; nothing leaves the machine),
the trainer's own image in containerSpec (with the user's own package installed into a derived
image: --user_package; tests/test_container.py builds one), the package of a prebuilt image staged on the GCS
emulator and installed as the TF 2.15 container would, the hyperparameter-tuning job of the
shipped YAML, and the legacy AI Platform warning. tests/test_vertex_rules.py has the rules.

Runtimes: the request, the refusals and --dry_run run on both; what talks to the stand-in runs
where the library has REST (1.34.0, the last release for Python 3.7, has gRPC only: untested).
"""

import datetime
import glob
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest

from trainer.cloud import scheduling
from trainer.cloud import user_package
from trainer.cloud import vertex_job
from trainer.errors import PipelineError

from helpers import IN_GCS_SANDBOX
from helpers import REPO
import vertex_standin

aiplatform_v1 = pytest.importorskip(
    'google.cloud.aiplatform_v1', reason="no google-cloud-aiplatform: pip install '.[cloud]'")
from trainer.cloud import vertex_submit  # noqa: E402  (after the library check)

try:
  from google.cloud.aiplatform_v1.services.job_service.transports import rest  # noqa: F401
  HAS_REST = True
except ImportError:
  HAS_REST = False

needs_rest = pytest.mark.skipif(
    not HAS_REST, reason='google-cloud-aiplatform 1.34.0 (the last release for Python 3.7) has no '
    'REST transport, so the REST stand-in cannot serve it; the submission code is the same on '
    'both runtimes and is run against the stand-in on .venv-tf2')
needs_gcs = pytest.mark.skipif(
    not IN_GCS_SANDBOX,
    reason='needs the GCS emulator for the staging upload: run inside scripts/gcs-sandbox (root, '
           'unshare), as `make test` does')

HPT_YAML = os.path.join(REPO, 'vertex', 'hptuning_resnet.yaml')
TRAINER_ARGS = ('--data_dir=gs://bkt/fashion_mnist', '--resnet_depth=18', '--train_epochs=1')
DISTRIBUTED = ('--project=test-project', '--region=us-central1', '--display_name=vtx_test',
               '--container_uri=' + 'us-central1-docker.pkg.dev/test-project/trainer/tp:gpu',
               '--base_output_dir=gs://bkt/out/vtx',
               '--machine_type=n1-standard-8', '--accelerator_type=NVIDIA_TESLA_T4',
               '--accelerator_count=2', '--worker_count=2', '--ps_count=1')
IMAGE = 'us-central1-docker.pkg.dev/test-project/trainer/tp:gpu'
PREBUILT = 'us-docker.pkg.dev/vertex-ai/training/tf-gpu.2-15.py310:latest'
BEFORE_END = datetime.date(2025, 1, 1)  # the TF 2.15 prebuilt images still ran


def _submit(tmp_path, *args, env=None):
  return subprocess.run([sys.executable, '-m', 'trainer.submit',
                         '--dist_dir=' + str(tmp_path / 'dist')] + list(args), cwd=REPO,
                        env=dict(os.environ, **(env or {})), stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, universal_newlines=True, timeout=300)


def _job(**overrides):
  fields = dict(project='test-project', region='us-central1', staging_bucket='gs://bkt/staging',
                base_output_dir='gs://bkt/out', machine_type='n1-standard-8',
                accelerator_type=None, accelerator_count=0, worker_count=0, ps_count=0,
                container_uri=IMAGE, display_name='j', trainer_args=TRAINER_ARGS)
  fields.update(overrides)
  return vertex_job.JobRequest(**fields)


@pytest.fixture
def standin():
  server = vertex_standin.VertexStandIn().start()
  yield server
  server.stop()


def _normal(body):
  """`body` as the API's JSON with enum names (the REST client sends enums as numbers)."""
  return json.loads(vertex_submit.message_json(aiplatform_v1.CustomJob, body)[1])


def _check_pools(spec):
  chief, workers, ps = spec['workerPoolSpecs']
  assert [p['replicaCount'] for p in (chief, workers, ps)] == ['1', '2', '1']
  gpu = {'machineType': 'n1-standard-8', 'acceleratorType': 'NVIDIA_TESLA_T4',
         'acceleratorCount': 2}
  assert chief['machineSpec'] == workers['machineSpec'] == gpu
  assert ps['machineSpec'] == {'machineType': 'n1-standard-8'}
  for pool in (chief, workers, ps):
    assert pool['containerSpec'] == {'imageUri': IMAGE, 'args': list(TRAINER_ARGS)}
  assert spec['baseOutputDirectory'] == {'outputUriPrefix': 'gs://bkt/out/vtx'}


def _dry_run_parts(stdout):
  """A dry run's request (a dict), its shell lines and the gcloud --config file (a dict)."""
  body, end = json.JSONDecoder().raw_decode(stdout)
  lines = stdout[end:].strip().splitlines()
  start, stop = lines.index("cat > job_spec.json <<'EOF'"), lines.index('EOF')
  return body, lines, json.loads('\n'.join(lines[start + 1:stop]))


def test_dry_run_prints_the_request_the_docker_and_the_gcloud_commands(tmp_path):
  proc = _submit(tmp_path, '--dry_run', *DISTRIBUTED, '--', *TRAINER_ARGS)
  assert proc.returncode == 0, proc.stderr[-3000:]
  body, lines, config = _dry_run_parts(proc.stdout)
  assert body['displayName'] == 'vtx_test'
  _check_pools(body['jobSpec'])
  assert not (tmp_path / 'dist').exists()  # an image of its own: no package is built
  assert ('DOCKER_BUILDKIT=1 docker build --platform=linux/amd64 --target gpu -t %s .' % IMAGE
          in lines)
  assert 'docker push ' + IMAGE in lines
  assert lines[-1] == ('gcloud ai custom-jobs create --project=test-project --region=us-central1 '
                       '--display-name=vtx_test --config=job_spec.json')
  # gcloud reads --config as a CustomJobSpec: the file holds the jobSpec, in its field names.
  assert config == body['jobSpec']
  fields = {f.json_name for f in aiplatform_v1.CustomJobSpec.pb().DESCRIPTOR.fields}
  assert 'workerPoolSpecs' in config and set(config) <= fields
  assert 'Staged' not in proc.stderr and 'Created' not in proc.stderr


def test_tensorboard_and_service_account_go_into_the_job_spec():
  job = _job(tensorboard='projects/p/locations/us-central1/tensorboards/7',
             service_account='trainer@p.iam.gserviceaccount.com')
  assert vertex_job.validate(job) == []
  spec = vertex_job.custom_job_spec(job)
  assert spec['tensorboard'] == 'projects/p/locations/us-central1/tensorboards/7'
  assert spec['serviceAccount'] == 'trainer@p.iam.gserviceaccount.com'


def test_the_parameter_servers_of_a_g2_job_keep_the_machines_gpu():
  job = _job(machine_type='g2-standard-24', accelerator_type='NVIDIA_L4', accelerator_count=2,
             worker_count=1, ps_count=1)
  vertex_job.validate(job)
  pools = vertex_job.custom_job_spec(job)['workerPoolSpecs']
  assert [p['machineSpec'] for p in pools] == [{
      'machineType': 'g2-standard-24', 'acceleratorType': 'NVIDIA_L4', 'acceleratorCount': 2}] * 3


def test_a_prebuilt_image_runs_the_staged_package_while_it_is_available():
  job = _job(container_uri=None, executor_image_uri=PREBUILT)
  vertex_job.validate(job, today=BEFORE_END)
  (pool,) = vertex_job.custom_job_spec(job, 'gs://bkt/p.tar.gz')['workerPoolSpecs']
  assert pool['pythonPackageSpec'] == {'executorImageUri': PREBUILT,
                                       'packageUris': ['gs://bkt/p.tar.gz'],
                                       'pythonModule': 'trainer.main', 'args': list(TRAINER_ARGS)}


@pytest.mark.parametrize('overrides,message', [
    (dict(staging_bucket='/tmp/staging'), '--staging_bucket=/tmp/staging must be a gs://'),
    (dict(staging_bucket=None, container_uri=None, executor_image_uri=PREBUILT),
     'is required'),
    (dict(base_output_dir='out'), '--base_output_dir=out must be a gs://'),
    (dict(base_output_dir=None), 'give --base_output_dir'),
    (dict(machine_type='n1-superfast-8'), 'unknown --machine_type=n1-superfast-8'),
    (dict(machine_type='cloud-tpu', accelerator_type='TPU_V3', accelerator_count=8,
          region='us-east1'), 'TPU_V3 is not offered for training in --region=us-east1'),
    (dict(machine_type='cloud-tpu', accelerator_type='TPU_V2', accelerator_count=8,
          worker_count=2), 'a TPU job is a single TPU VM'),
    (dict(machine_type='cloud-tpu', accelerator_type='TPU_V2', accelerator_count=4),
     'a single-host TPU_V2 VM has 8 cores'),
    (dict(accelerator_type='TPU_V2', accelerator_count=8), 'runs on --machine_type=cloud-tpu'),
    (dict(accelerator_type='NVIDIA_TESLA_K80', accelerator_count=1), 'unknown --accelerator_type'),
    (dict(machine_type='e2-standard-8', accelerator_type='NVIDIA_TESLA_T4', accelerator_count=1),
     'does not attach to --machine_type=e2-standard-8'),
    (dict(worker_count=-1), '--worker_count=-1'),
    (dict(ps_count=-2), '--ps_count=-2'),
    (dict(project='My Project'), 'is not a project ID'),
    (dict(trainer_args=('--job-dir=gs://bkt/j',)), "--job-dir is AI Platform's"),
    (dict(trainer_args=('--model_dir', '/tmp/m')), '--model_dir=/tmp/m after `--`'),
    (dict(trainer_args=('--data_dir=data/fashion_mnist',)), '--data_dir=data/fashion_mnist after'),
    # absl reads the last value, and one dash too.
    (dict(trainer_args=('--data_dir=gs://b/d', '--data_dir=/tmp/d')), '--data_dir=/tmp/d after'),
    (dict(trainer_args=('-export_dir=/tmp/e',)), '--export_dir=/tmp/e after'),
    (dict(trainer_args=('--data_dir=gs://',)), '--data_dir=gs:// after'),
    (dict(trainer_args=('--model_dir',)), '--model_dir after `--` has no value'),
    (dict(scheduling=scheduling.Scheduling(max_wait_duration=3600)),
     '--max_wait_duration is how long a Flex-start job queues'),
    (dict(scheduling=scheduling.Scheduling(strategy='SPOT', restart_job_on_worker_restart=True,
                                           disable_retries=True)),
     '--disable_retries turns --restart_job_on_worker_restart off'),
    (dict(scheduling=scheduling.Scheduling(timeout=0)), '--timeout must be longer than 0 s'),
    (dict(machine_type='cloud-tpu', accelerator_type='TPU_V3', accelerator_count=8,
          scheduling=scheduling.Scheduling(strategy='FLEX_START')), 'FLEX_START takes'),
])
def test_bad_requests_are_refused_before_any_upload(overrides, message):
  with pytest.raises(PipelineError) as raised:
    vertex_job.validate(_job(**overrides), today=BEFORE_END)
  assert message in str(raised.value)


def test_a_machine_newer_than_the_table_is_sent_only_with_allow_unlisted_machine(tmp_path):
  """c3-standard-8 is outside the table (trainer/cloud/vertex_machines.json): refused, naming the
  flag; with --allow_unlisted_machine the request carries it, with a warning."""
  args = [a for a in DISTRIBUTED if not a.startswith(('--machine_type', '--accelerator'))]
  proc = _submit(tmp_path, '--dry_run', *args, '--machine_type=c3-standard-8', '--',
                 *TRAINER_ARGS)
  assert proc.returncode == 2 and '--allow_unlisted_machine sends it unchecked' in proc.stderr
  proc = _submit(tmp_path, '--dry_run', *args, '--machine_type=c3-standard-8',
                 '--allow_unlisted_machine', '--', *TRAINER_ARGS)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert 'is not in this pipeline\'s table of Vertex AI machines' in proc.stderr
  body, _, _ = _dry_run_parts(proc.stdout)
  assert {p['machineSpec']['machineType'] for p in body['jobSpec']['workerPoolSpecs'] if p} == {
      'c3-standard-8'}
  # Only the table is skipped: a TPU still needs cloud-tpu.
  proc = _submit(tmp_path, '--dry_run', *args, '--machine_type=c3-standard-8',
                 '--allow_unlisted_machine', '--accelerator_type=TPU_V3', '--', *TRAINER_ARGS)
  assert proc.returncode == 2 and 'runs on --machine_type=cloud-tpu' in proc.stderr, proc.stderr


def test_a_domain_scoped_project_id_is_a_project_id():
  vertex_job.validate(_job(project='example.com:my-project'), today=BEFORE_END)
  for project in ('example.com:My Project', 'nodot:my-project'):
    with pytest.raises(PipelineError, match='is not a project ID'):
      vertex_job.validate(_job(project=project), today=BEFORE_END)
  # Artifact Registry writes a domain-scoped project as DOMAIN/PROJECT.
  assert vertex_job.ARTIFACT_REGISTRY_IMAGE.match(
      'us-central1-docker.pkg.dev/example.com/my-project/trainer/tp:gpu')


def test_durations_read_as_seconds():
  assert [scheduling.seconds('timeout', t) for t in ('90', '90s', '30m', '12h', '7d', None)] == [
      90, 90, 1800, 43200, 604800, None]
  with pytest.raises(PipelineError, match=r'--timeout=1\.5h is not a duration'):
    scheduling.seconds('timeout', '1.5h')
  # google.protobuf.Duration's limit, 315,576,000,000 s: the longest the API takes.
  assert scheduling.seconds('timeout', '3652500d') == 315576000000
  with pytest.raises(PipelineError, match=r'--timeout=99999999d is 8639999913600 s, longer than '
                     r'the longest duration Vertex AI takes'):
    scheduling.seconds('timeout', '99999999d')


def test_spot_needs_a_client_library_that_knows_it(tmp_path):
  """Spot and Flex-start came to the client library in 1.62/1.66; 1.34.0 (Python 3.7) refuses
  the field by name, and the error says which library to install."""
  proc = _submit(tmp_path, '--dry_run', *DISTRIBUTED, '--scheduling_strategy=SPOT',
                 '--', *TRAINER_ARGS)
  if 'strategy' in aiplatform_v1.Scheduling.meta.fields:
    assert proc.returncode == 0, proc.stderr[-3000:]
    body, _, config = _dry_run_parts(proc.stdout)
    assert body['jobSpec']['scheduling'] == config['scheduling'] == {'strategy': 'SPOT'}
  else:
    assert proc.returncode == 2
    assert 'has no field named "strategy"' in proc.stderr
    assert 'needs `pip install -U google-cloud-aiplatform` on Python 3.8' in proc.stderr


def test_a_model_dir_in_either_flag_form_stands_for_base_output_dir():
  for args in (('--model_dir', 'gs://b/m'), ('--model_dir=/gcs/b/m',)):
    vertex_job.validate(_job(base_output_dir=None, trainer_args=args))


def test_project_comes_from_the_flag_or_the_environment():
  assert vertex_job.project_from('p-flag', {'GOOGLE_CLOUD_PROJECT': 'p-env'}) == 'p-flag'
  assert vertex_job.project_from(None, {'CLOUDSDK_CORE_PROJECT': 'p-sdk'}) == 'p-sdk'
  with pytest.raises(PipelineError, match='no Google Cloud project'):
    vertex_job.project_from(None, {})


def test_tpu_job_is_one_tpu_vm_with_the_tpu_image():
  job = _job(machine_type='cloud-tpu', accelerator_type='TPU_V3', region='europe-west4',
             accelerator_count=vertex_job.resolve_accelerator_count('TPU_V3', None))
  (warning,) = vertex_job.validate(job)  # the trainer is not told to use the TPU
  assert 'trains on its TPU only with `--use_tpu --tpu=local`' in warning
  job = job._replace(trainer_args=TRAINER_ARGS + ('--use_tpu', '--tpu=local'))
  assert vertex_job.validate(job) == []
  (pool,) = vertex_job.custom_job_spec(job, 'gs://bkt/p.tar.gz')['workerPoolSpecs']
  assert pool['machineSpec'] == {'machineType': 'cloud-tpu', 'acceleratorType': 'TPU_V3',
                                 'acceleratorCount': 8}
  assert pool['containerSpec']['imageUri'] == IMAGE


@needs_rest
def test_hptuning_job_of_the_shipped_yaml_is_accepted(standin):
  import yaml  # pylint: disable=g-import-not-at-top
  with open(HPT_YAML) as f:
    config = yaml.safe_load(f)
  body = vertex_job.hyperparameter_tuning_job(_job(), 'gs://bkt/staging/j/p.tar.gz', config)
  status = vertex_submit.send(body, True, 'test-project', 'us-central1', standin.endpoint,
                              wait_for_end=True, poll_interval=0.01)
  assert status == 0
  post = standin.requests[0]
  assert post['path'] == '/v1/projects/test-project/locations/us-central1/hyperparameterTuningJobs'
  sent = post['body']
  assert sent['maxTrialCount'] == 12 and sent['parallelTrialCount'] == 3
  (metric,) = sent['studySpec']['metrics']
  assert metric['metricId'] == 'top_1_accuracy' and metric['goal'] in (1, 'MAXIMIZE')
  assert [p['parameterId'] for p in sent['studySpec']['parameters']] == [
      'base_learning_rate', 'weight_decay', 'label_smoothing']
  (pool,) = sent['trialJobSpec']['workerPoolSpecs']
  assert pool['containerSpec']['imageUri'] == IMAGE
  # The metric the trainer reports, whether or not Vertex AI sets the variable itself.
  assert pool['containerSpec']['env'] == [
      {'name': 'CLOUD_ML_HP_METRIC_TAG', 'value': 'top_1_accuracy'}]
  assert [r['method'] for r in standin.requests] == ['POST', 'GET', 'GET', 'GET']


@pytest.mark.parametrize('config, message', [
    ({'studySpec': {}, 'trialJobSpec': {}}, 'unknown key'),
    (None, 'must be a YAML mapping'),  # an empty file: never a plain CustomJob instead
    ({'studySpec': [], 'maxTrialCount': 2}, 'studySpec needs metrics'),
    ({'studySpec': {'metrics': [{'metricId': 'loss', 'goal': 'MINIMIZE'}], 'parameters': [{}]},
      'parallelTrialCount': 2}, 'maxTrialCount is required'),
    ({'studySpec': {'metrics': 'top_1_accuracy', 'parameters': []}}, 'studySpec needs metrics'),
    ({'studySpec': {'metrics': [{'metricId': 'accuracy'}], 'parameters': [{}]},
      'maxTrialCount': 2}, "metricId 'accuracy' is not a metric the trainer reports; use one of "
                           "top_1_accuracy, top_5_accuracy, loss"),
    ({'studySpec': {'metrics': [{'metricId': 'loss'}, {'metricId': 'top_1_accuracy'}],
                    'parameters': [{}]}, 'maxTrialCount': 2}, 'keep one of the 2'),
    ({'studySpec': {'metrics': ['top_1_accuracy'], 'parameters': [{}]}, 'maxTrialCount': 2},
     'each entry of studySpec.metrics is a mapping'),
    ({'studySpec': {'metrics': [{'metricId': 'loss', 'goal': 'MAXIMIZE'}], 'parameters': [{}]},
      'maxTrialCount': 2}, 'loss needs goal: MINIMIZE \\(given: MAXIMIZE\\)'),
    ({'studySpec': {'metrics': [{'metricId': 'top_5_accuracy'}], 'parameters': [{}]},
      'maxTrialCount': 2}, 'top_5_accuracy needs goal: MAXIMIZE \\(no goal given\\)'),
])
def test_a_malformed_hptuning_config_is_refused(config, message):
  if isinstance(config, dict) and 'maxTrialCount' in config:
    config = dict(config, parallelTrialCount=1)
  with pytest.raises(PipelineError, match=message):
    vertex_job.hyperparameter_tuning_job(_job(), 'gs://b/p', config)


def test_every_pool_of_a_tuning_trial_gets_the_metric_and_a_trial_mode_is_train_and_eval():
  study = {'studySpec': {'metrics': [{'metricId': 'loss', 'goal': 'MINIMIZE'}],
                         'parameters': [{'parameterId': 'weight_decay'}]}, 'maxTrialCount': 2,
           'parallelTrialCount': 1}
  job = _job(worker_count=1, ps_count=1)  # pools: chief, workers, parameter servers
  pools = vertex_job.hyperparameter_tuning_job(job, 'gs://b/p', study)['trialJobSpec'][
      'workerPoolSpecs']
  assert [p['containerSpec']['env'] for p in pools] == [
      [{'name': 'CLOUD_ML_HP_METRIC_TAG', 'value': 'loss'}]] * 3
  with pytest.raises(PipelineError, match='--mode=train after `--`: a tuning trial reports loss'):
    vertex_job.hyperparameter_tuning_job(_job(trainer_args=('--mode', 'train')), 'gs://b/p', study)


@needs_rest
def test_a_failed_job_exits_1_with_its_error(standin):
  standin.final_state = 'JOB_STATE_FAILED'
  body = vertex_job.custom_job(_job(), 'gs://bkt/p.tar.gz')
  assert vertex_submit.send(body, False, 'test-project', 'us-central1', standin.endpoint,
                            wait_for_end=True, poll_interval=0.01) == 1


@pytest.fixture(scope='module')
def submitted(tmp_path_factory):
  """One real submission with --wait against the stand-in: (process, stand-in, tmp dir)."""
  tmp_path = tmp_path_factory.mktemp('vertex')
  server = vertex_standin.VertexStandIn().start()
  try:
    proc = _submit(tmp_path, *DISTRIBUTED, '--api_endpoint=' + server.endpoint, '--wait',
                   '--poll_interval=0.01', '--', *TRAINER_ARGS)
  finally:
    server.stop()
  return proc, server, tmp_path


@needs_rest
def test_submission_creates_the_job_of_the_image_and_waits_for_success(submitted):
  proc, server, tmp_path = submitted
  assert proc.returncode == 0, proc.stderr[-3000:]
  post = server.requests[0]
  assert post['method'] == 'POST'
  assert post['path'] == '/v1/projects/test-project/locations/us-central1/customJobs'
  sent = _normal(post['body'])
  assert sent['displayName'] == 'vtx_test'
  _check_pools(sent['jobSpec'])
  assert [r['method'] for r in server.requests] == ['POST', 'GET', 'GET', 'GET']
  link = ('https://console.cloud.google.com/agent-platform/locations/us-central1/training/1000'
          '?project=test-project')
  for state in ('JOB_STATE_PENDING', 'JOB_STATE_RUNNING', 'JOB_STATE_SUCCEEDED'):
    assert '1000: %s  %s' % (state, link) in proc.stderr
  assert proc.stdout.strip() == 'projects/test-project/locations/us-central1/customJobs/1000'
  # The dry run of the same flags prints the very body the submission sent.
  dry = _submit(tmp_path, '--dry_run', *DISTRIBUTED, '--', *TRAINER_ARGS)
  assert _dry_run_parts(dry.stdout)[0] == sent


@needs_gcs
@needs_rest
def test_staged_package_installs_and_imports_as_in_the_prebuilt_tf215_container(tmp_path):
  """The package of a prebuilt executor image, staged on the emulator and downloaded, goes into a
  fresh venv that sees TF 2.15 (as the tf-cpu.2-15 image had it) with pip --no-index: nothing is
  downloaded or replaced."""
  from google.cloud import storage  # pylint: disable=g-import-not-at-top

  from trainer.cloud import aiplatform_job  # pylint: disable=g-import-not-at-top
  package = aiplatform_job.build_sdist(str(tmp_path / 'dist'))
  job = _job(container_uri=None, executor_image_uri=PREBUILT)
  package_uri = vertex_job.staged_package_uri('gs://bkt/staging', 'vtx_test', package)
  vertex_submit.stage_package(package, package_uri, 'test-project')
  staged = tmp_path / 'staged' / os.path.basename(package)
  staged.parent.mkdir()
  blob = storage.Client(project='test-project').bucket('bkt').blob(
      'staging/vtx_test/' + os.path.basename(package))
  blob.download_to_filename(str(staged))
  assert vertex_job.custom_job(job, package_uri)['jobSpec']['workerPoolSpecs'][0][
      'pythonPackageSpec']['packageUris'] == ['gs://bkt/staging/vtx_test/' + staged.name]
  subprocess.run([sys.executable, '-m', 'venv', str(tmp_path / 'runtime')], check=True)
  (site,) = glob.glob(str(tmp_path / 'runtime/lib/python3.*/site-packages'))
  ours = [p for p in sys.path if p.endswith('site-packages')][0]
  with open(os.path.join(site, 'runtime_tf.pth'), 'w') as f:
    f.write(ours + '\n')
  python = str(tmp_path / 'runtime/bin/python')
  install = subprocess.run([python, '-m', 'pip', 'install', '--no-index', '--no-build-isolation',
                            str(staged)], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, universal_newlines=True, cwd=str(tmp_path))
  assert install.returncode == 0, install.stdout[-3000:]
  installed = [l for l in install.stdout.splitlines() if l.startswith('Successfully installed')]
  assert installed == ['Successfully installed tpu-estimator-pipeline-0.1.0'], install.stdout
  check = subprocess.run(
      [python, '-c', 'import tensorflow as tf, trainer.main, trainer.models.resnet, '
       'trainer.flags.to_config; '
       'print(tf.__version__, trainer.main.__file__)'], cwd=str(tmp_path),
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
  assert check.returncode == 0, check.stderr[-3000:]
  version, main_file = check.stdout.split()
  assert version.startswith('2.15') and main_file.startswith(site)


@needs_rest
def test_permission_denied_is_one_error_line_and_exit_2(standin, tmp_path):
  standin.deny = 403
  account = 'trainer@test-project.iam.gserviceaccount.com'
  proc = _submit(tmp_path, *DISTRIBUTED, '--api_endpoint=' + standin.endpoint,
                 '--service_account=' + account, '--', *TRAINER_ARGS)
  assert proc.returncode == 2, proc.stderr[-3000:]
  errors = [l for l in proc.stderr.splitlines() if l.startswith('error: ')]
  assert len(errors) == 1 and 'failed: PermissionDenied (' in errors[0], proc.stderr[-3000:]
  assert 'roles/aiplatform.user on project test-project' in errors[0]
  # Running a job as a service account also needs the right to act as it.
  assert ('roles/iam.serviceAccountUser on that service account (gcloud iam service-accounts '
          'add-iam-policy-binding %s' % account) in errors[0]
  assert 'Traceback' not in proc.stderr


def test_ai_platform_still_prints_its_command_and_warns_of_the_shutdown(tmp_path):
  proc = _submit(tmp_path, '--platform=ai_platform', '--dry_run', '--job_name=j',
                 '--job_dir=gs://bkt/jobs/j', '--scale_tier=BASIC_GPU', '--', '--use_tpu')
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert proc.stdout.startswith('gcloud ai-platform jobs submit training j --region=us-central1 ')
  assert 'shut down on 2025-01-31' in proc.stderr
  assert ('python -m trainer.submit --platform=vertex --region=us-central1 '
          '--build_image --container_uri=REGION-docker.pkg.dev/PROJECT/REPOSITORY/tpu-pipeline:TAG '
          '--base_output_dir=gs://bkt/jobs/j '
          '--machine_type=n1-standard-8 --accelerator_type=NVIDIA_TESLA_T4 -- --use_tpu'
          in proc.stderr)


def test_the_other_platforms_flags_are_refused_not_ignored(tmp_path):
  proc = _submit(tmp_path, *DISTRIBUTED, '--runtime_version=1.15', '--', *TRAINER_ARGS)
  assert proc.returncode == 2 and (
      "--runtime_version is AI Platform's; with Vertex AI, use --container_uri" in proc.stderr), (
          proc.stderr[-3000:])
  assert not (tmp_path / 'dist').exists()


def test_every_submit_flag_belongs_to_one_platform_or_both():
  """A new flag must be classified, or the other platform would silently ignore it."""
  from trainer.flags import submit_flags  # pylint: disable=g-import-not-at-top
  defined = json.loads(subprocess.check_output(  # a process of its own: absl's FLAGS is global
      [sys.executable, '-c', 'import json; from absl import flags; from trainer.flags import submit_flags; '
       'submit_flags.define_submit_flags(); print(json.dumps([f.name for f in '
       'flags.FLAGS.get_flags_for_module("trainer.flags.submit_flags")]))'], cwd=REPO))
  shared = set(submit_flags.SHARED)
  vertex, ai_platform = set(submit_flags.VERTEX_ONLY), set(submit_flags.AI_PLATFORM_ONLY)
  assert not (vertex & ai_platform) and not (shared & (vertex | ai_platform))
  assert set(defined) == shared | vertex | ai_platform


USER_PACKAGE = os.path.join(REPO, 'tests', 'fixtures', 'user_package')
USER_NETWORK = '--network=acme_nets.small_cnn:small_cnn'


def test_a_user_package_is_built_into_an_image_derived_from_the_trainers(tmp_path):
  proc = _submit(tmp_path, '--dry_run', '--build_image', '--user_package=' + USER_PACKAGE,
                 *DISTRIBUTED, '--', *TRAINER_ARGS, USER_NETWORK)
  assert proc.returncode == 0, proc.stderr[-3000:]
  body, lines, _ = _dry_run_parts(proc.stdout)
  assert body['jobSpec']['workerPoolSpecs'][0]['containerSpec'] == {
      'imageUri': IMAGE, 'args': list(TRAINER_ARGS) + [USER_NETWORK]}
  base = 'tpu-estimator-pipeline-trainer:gpu'
  start = lines.index('DOCKER_BUILDKIT=1 docker build --platform=linux/amd64 --target gpu -t %s .'
                      % base)
  assert lines[start + 1:start + 3] == [
      'DOCKER_BUILDKIT=1 docker build --platform=linux/amd64 -f %s --build-arg TRAINER_IMAGE=%s '
      '--build-arg USER_PACKAGE=. -t %s %s' % (os.path.join(REPO, 'trainer', 'cloud',
                                                            'user_package.Dockerfile'),
                                               base, IMAGE, USER_PACKAGE),
      'docker push ' + IMAGE]
  assert 'shows no module' not in proc.stderr


@pytest.mark.parametrize('args, message', [
    (('--user_package=' + USER_PACKAGE,),
     'error: --user_package is installed into the image that --build_image builds: add '
     '--build_image'),
    (('--build_image',), 'error: --network=acme_nets.small_cnn:small_cnn: the image --build_image '
     "builds holds only this project's packages, not acme_nets: add --user_package=DIR"),
])
def test_submit_refuses_user_code_the_image_would_not_hold(args, message, tmp_path):
  proc = _submit(tmp_path, '--dry_run', *args, *DISTRIBUTED, '--', *TRAINER_ARGS, USER_NETWORK)
  errors = [l for l in proc.stderr.splitlines() if l.startswith('error: ')]
  assert proc.returncode == 2 and len(errors) == 1 and errors[0].startswith(message), (
      proc.stderr[-3000:])
  assert proc.stdout == ''


def test_a_user_package_is_a_source_directory_a_wheel_or_an_sdist(tmp_path):
  assert user_package.build_context(USER_PACKAGE) == (USER_PACKAGE, '.')
  args = ['--model_fn', 'acme_jobs.legacy:model_fn', '--input_fn=acme_jobs.data:input_fn',
          '--network=trainer.models.networks:resnet', '--network=models.mine:net',
          '--network=no_callable_spec']
  assert user_package.named_modules(args) == [
      ('model_fn', 'acme_jobs.legacy:model_fn', 'acme_jobs'),
      ('input_fn', 'acme_jobs.data:input_fn', 'acme_jobs'),
      ('network', 'trainer.models.networks:resnet', 'trainer'),
      ('network', 'models.mine:net', 'models')]
  wheel = tmp_path / 'acme_nets-0.1.0-py3-none-any.whl'
  with zipfile.ZipFile(str(wheel), 'w') as archive:
    archive.writestr('acme_nets/small_cnn.py', '')
    archive.writestr('acme_nets-0.1.0.dist-info/METADATA', '')
  assert user_package.build_context(str(wheel)) == (str(tmp_path), wheel.name)
  sdist = tmp_path / 'acme-nets-0.1.0.tar.gz'
  with tarfile.open(str(sdist), 'w:gz') as archive:
    archive.add(os.path.join(USER_PACKAGE, 'acme_nets'), 'acme-nets-0.1.0/src/acme_nets')
  for package in (USER_PACKAGE, str(wheel), str(sdist)):
    assert user_package.check(package, [USER_NETWORK]) == []
    (warning,) = user_package.check(package, ['--model_fn=acme_jobs.legacy:model_fn'])
    assert 'shows no module acme_jobs' in warning
  # What the image holds already needs no package. A user's `models` (the commonest name) is
  # theirs: the trainer installs only `trainer`. A package that would overwrite that, and a
  # directory that is not a package, are refused.
  assert user_package.check(None, ['--network=trainer.models.networks:resnet']) == []
  beside = tmp_path / 'beside'
  shutil.copytree(USER_PACKAGE, str(beside))
  (beside / 'models').mkdir()
  (beside / 'models' / '__init__.py').write_text('')
  assert user_package.check(str(beside), [USER_NETWORK]) == []
  (beside / 'trainer').mkdir()
  (beside / 'trainer' / '__init__.py').write_text('')
  with pytest.raises(PipelineError, match="installs a top-level trainer, a name the trainer's "
                     'image already installs'):
    user_package.check(str(beside), [USER_NETWORK])
  for bad, message in ((tmp_path, 'without setup.py or pyproject.toml'),
                       (tmp_path / 'missing', 'does not exist'),
                       (tmp_path / 'acme_nets-0.1.0-py3-none-any.whl.txt', 'is not a package')):
    if bad.name.endswith('.txt'):
      bad.write_text('')
    with pytest.raises(PipelineError, match=message):
      user_package.build_context(str(bad))


def test_the_image_packages_are_setup_pys():
  """IMAGE_PACKAGES are the top-level names setup.py installs: only `trainer`."""
  proc = subprocess.run(
      [sys.executable, '-c', 'from distutils.core import run_setup; '
       'print(" ".join(run_setup("setup.py", stop_after="init").packages))'],
      cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
      check=True)
  packages = proc.stdout.split()
  assert 'trainer.models.specs' in packages and 'trainer.keras_models' in packages
  assert sorted({name.split('.')[0] for name in packages}) == sorted(user_package.IMAGE_PACKAGES)
