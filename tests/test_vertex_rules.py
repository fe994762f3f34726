"""The Vertex AI stand-in refuses what the service refuses (tests/vertex_rules.py), and
trainer.submit refuses the same job first, with one clearer `error:` line and exit status 2.

Each raw request goes to the loopback stand-in through the real google-cloud-aiplatform client,
past trainer.submit's own checks; the requests trainer.submit builds for good flags are accepted.
Runs where the client has its REST transport (the TF 2.15 runtime), as test_vertex_submit.py.
"""

import json
import os
import subprocess
import sys

import pytest

from helpers import REPO
import vertex_rules
import vertex_standin

aiplatform_v1 = pytest.importorskip(
    'google.cloud.aiplatform_v1', reason="no google-cloud-aiplatform: pip install '.[cloud]'")
pytest.importorskip('google.cloud.aiplatform_v1.services.job_service.transports.rest',
                    reason='google-cloud-aiplatform 1.34.0 (Python 3.7) has no REST transport')
from trainer.cloud import vertex_submit  # noqa: E402  (after the library check)
from trainer.errors import PipelineError  # noqa: E402

IMAGE = 'us-central1-docker.pkg.dev/test-project/trainer/tp:gpu'
ARGS = ['--data_dir=gs://bkt/d']
FLAGS = ('--project=test-project', '--region=us-central1', '--display_name=j',
         '--base_output_dir=gs://bkt/out', '--container_uri=' + IMAGE)
STUDY = {'metrics': [{'metricId': 'loss', 'goal': 'MINIMIZE'}],
         'parameters': [{'parameterId': 'weight_decay',
                         'doubleValueSpec': {'minValue': 0.0001, 'maxValue': 0.01}}]}


def _pool(machine, accelerator=None, count=None, task=None):
  spec = {'machineType': machine}
  if accelerator:
    spec.update(acceleratorType=accelerator, acceleratorCount=count)
  return {'machineSpec': spec, 'replicaCount': '1',
          **(task if task is not None else {'containerSpec': {'imageUri': IMAGE, 'args': ARGS}})}


def _job(*pools, display_name='j'):
  return {'displayName': display_name, 'jobSpec': {'workerPoolSpecs': list(pools)}}


@pytest.fixture(scope='module')
def standin():
  server = vertex_standin.VertexStandIn().start()
  yield server
  server.stop()


def _send(standin, body, hptuning=False, region='us-central1'):
  """Sends `body` with the real client; returns None, or the service's refusal message."""
  try:
    vertex_submit.send(body, hptuning, 'test-project', region, standin.endpoint,
                       wait_for_end=False, poll_interval=0.01)
  except PipelineError as e:
    assert 'InvalidArgument' in str(e), e
    return str(e)
  return None


def _submit(tmp_path, *args):
  return subprocess.run([sys.executable, '-m', 'trainer.submit', '--dry_run',
                         '--dist_dir=' + str(tmp_path / 'dist')] + list(args), cwd=REPO,
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        universal_newlines=True, timeout=300)


def _refused(proc, message):
  errors = [l for l in proc.stderr.splitlines() if l.startswith('error: ')]
  assert proc.returncode == 2 and len(errors) == 1, proc.stderr[-3000:]
  assert message in errors[0], errors[0]


# (raw request body the service refuses, what its refusal says, trainer.submit flags for the same
# job, what trainer.submit says).
CASES = {
    'ps_pool_of_g2_without_its_gpu': (
        _job(_pool('g2-standard-8', 'NVIDIA_L4', 1), {}, _pool('g2-standard-8')),
        'requires accelerator type NVIDIA_L4',
        ('--machine_type=g2-standard-8',), '--machine_type=g2-standard-8 comes with 1 x NVIDIA_L4'),
    'n1_with_a100': (
        _job(_pool('n1-standard-8', 'NVIDIA_TESLA_A100', 1)), 'is not supported for machine type',
        ('--machine_type=n1-standard-8', '--accelerator_type=NVIDIA_TESLA_A100'),
        'does not attach to an N1 machine: it comes with a2-highgpu-1g'),
    'n1_with_l4': (
        _job(_pool('n1-standard-8', 'NVIDIA_L4', 1)), 'is not supported for machine type',
        ('--machine_type=n1-standard-8', '--accelerator_type=NVIDIA_L4'),
        'it comes with g2-standard-12'),
    'a2_with_fewer_gpus_than_it_has': (
        _job(_pool('a2-highgpu-2g', 'NVIDIA_TESLA_A100', 1)), 'with count 2',
        ('--machine_type=a2-highgpu-2g', '--accelerator_type=NVIDIA_TESLA_A100',
         '--accelerator_count=1'), 'comes with 2 x NVIDIA_TESLA_A100'),
    'three_t4_on_n1': (
        _job(_pool('n1-standard-8', 'NVIDIA_TESLA_T4', 3)), 'supported counts: [1, 2, 4]',
        ('--accelerator_type=NVIDIA_TESLA_T4', '--accelerator_count=3'),
        'an N1 machine takes 1, 2, 4 x NVIDIA_TESLA_T4'),
    'tpu_v2_with_4_cores': (
        _job(_pool('cloud-tpu', 'TPU_V2', 4)), 'only acceleratorCount 8',
        ('--machine_type=cloud-tpu', '--accelerator_type=TPU_V2', '--accelerator_count=4'),
        'a single-host TPU_V2 VM has 8 cores'),
    'custom_image_as_executor_image': (
        _job(_pool('n1-standard-8', task={'pythonPackageSpec': {
            'executorImageUri': IMAGE, 'packageUris': ['gs://bkt/p.tar.gz'],
            'pythonModule': 'trainer.main'}})), 'must be one of the Vertex AI prebuilt',
        ('--container_uri=', '--executor_image_uri=' + IMAGE, '--staging_bucket=gs://bkt/s'),
        "is not one of Vertex AI's prebuilt training images"),
    'expired_prebuilt_image': (
        _job(_pool('n1-standard-8', task={'pythonPackageSpec': {
            'executorImageUri': 'us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-15.py310:latest',
            'packageUris': ['gs://bkt/p.tar.gz'], 'pythonModule': 'trainer.main'}})),
        'end of availability 2025-11-14',
        ('--container_uri=', '--staging_bucket=gs://bkt/s',
         '--executor_image_uri=us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-15.py310:latest'),
        'reached its end of availability on 2025-11-14'),
}


@pytest.mark.parametrize('case', sorted(CASES))
def test_the_standin_refuses_and_trainer_submit_refuses_first(case, standin, tmp_path):
  body, service_says, flags, submit_says = CASES[case]
  refusal = _send(standin, body)
  assert refusal and service_says in refusal, refusal
  _refused(_submit(tmp_path, *FLAGS, *flags, '--', *ARGS), submit_says)


def test_a_tpu_v3_outside_its_regions_is_refused_by_both(standin, tmp_path):
  refusal = _send(standin, _job(_pool('cloud-tpu', 'TPU_V3', 8)), region='us-east1')
  assert 'not supported in location us-east1' in refusal
  _refused(_submit(tmp_path, *FLAGS, '--region=us-east1', '--machine_type=cloud-tpu',
                   '--accelerator_type=TPU_V3', '--', *ARGS),
           'TPU_V3 is not offered for training in --region=us-east1')


def test_a_study_without_parallel_trial_count_is_refused_by_both(standin, tmp_path):
  body = {'displayName': 'j', 'studySpec': STUDY, 'maxTrialCount': 4,
          'trialJobSpec': _job(_pool('n1-standard-8'))['jobSpec']}
  assert 'Field: parallelTrialCount; Message: Required' in _send(standin, body, hptuning=True)
  assert _send(standin, dict(body, parallelTrialCount=2), hptuning=True) is None
  config = tmp_path / 'study.json'
  config.write_text(json.dumps({'studySpec': STUDY, 'maxTrialCount': 4}))
  _refused(_submit(tmp_path, *FLAGS, '--hptuning_config=' + str(config), '--', *ARGS),
           '--hptuning_config: parallelTrialCount is required')


@pytest.mark.parametrize('body, field', [
    ({'jobSpec': _job(_pool('n1-standard-8'))['jobSpec']}, 'Field: displayName'),
    ({'displayName': 'j'}, 'Field: jobSpec'),
    (_job(_pool('n1-standard-8', task={'containerSpec': {'args': ARGS}})),
     'container_spec.imageUri'),
    (_job(_pool('n1-standard-8', task={})), 'One of container_spec or python_package_spec'),
])
def test_the_standin_refuses_a_job_without_a_required_field(standin, body, field):
  assert field in _send(standin, body)


def test_a_study_without_metrics_or_goal_is_refused(standin):
  trial = _job(_pool('n1-standard-8'))['jobSpec']
  body = {'displayName': 'j', 'maxTrialCount': 4, 'parallelTrialCount': 2, 'trialJobSpec': trial}
  assert 'study_spec.metrics' in _send(standin, dict(body, studySpec={
      'parameters': STUDY['parameters']}), hptuning=True)
  assert 'study_spec.metrics.goal' in _send(standin, dict(body, studySpec=dict(
      STUDY, metrics=[{'metricId': 'loss'}])), hptuning=True)


def test_gcloud_config_holds_a_custom_job_spec(standin, tmp_path):
  """gcloud reads `custom-jobs create --config` as a CustomJobSpec: a whole CustomJob there
  leaves the spec without worker pools (its keys are not CustomJobSpec fields), which the service
  refuses; the file trainer.submit prints is a CustomJobSpec the service takes."""
  whole_job = _job(_pool('n1-standard-8'))
  fields = {f.json_name for f in aiplatform_v1.CustomJobSpec.pb().DESCRIPTOR.fields}
  as_gcloud_reads_it = {k: v for k, v in whole_job.items() if k in fields}
  assert as_gcloud_reads_it == {}  # the REST client then sends no jobSpec at all
  refusal = _send(standin, {'displayName': 'j', 'jobSpec': as_gcloud_reads_it})
  assert 'Field: jobSpec; Message: Required field is not set.' in refusal, refusal
  proc = _submit(tmp_path, *FLAGS, '--machine_type=g2-standard-24', '--accelerator_type=NVIDIA_L4',
                 '--worker_count=1', '--ps_count=1', '--', *ARGS)
  assert proc.returncode == 0, proc.stderr[-3000:]
  lines = proc.stdout.splitlines()
  start = lines.index("cat > job_spec.json <<'EOF'")
  config = json.loads('\n'.join(lines[start + 1:lines.index('EOF', start)]))
  assert set(config) <= fields and config['workerPoolSpecs']
  assert _send(standin, {'displayName': 'j', 'jobSpec': config}) is None


def test_the_rules_module_stands_alone():
  """The stand-in's rules import no trainer code, so they can catch trainer.submit's mistakes."""
  with open(os.path.join(os.path.dirname(__file__), 'vertex_rules.py')) as f:
    source = f.read()
  assert 'import trainer' not in source and 'from trainer' not in source
  assert vertex_rules.refusal('customJobs', _job(_pool('n1-standard-8')), 'us-central1') is None
