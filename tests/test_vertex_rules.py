"""The Vertex AI stand-in refuses what the service refuses (tests/vertex_rules.py), and
trainer.submit refuses the same job first, with one clearer `error:` line and exit status 2.

Each raw request goes to the loopback stand-in through the real google-cloud-aiplatform client,
past trainer.submit's own checks; the requests trainer.submit builds for good flags are accepted.
Runs where the client has its REST transport (the TF 2.15 runtime), as test_vertex_submit.py.
"""

import datetime
import json
import os

import pytest

import vertex_rules
import vertex_standin

aiplatform_v1 = pytest.importorskip(
    'google.cloud.aiplatform_v1', reason="no google-cloud-aiplatform: pip install '.[cloud]'")
pytest.importorskip('google.cloud.aiplatform_v1.services.job_service.transports.rest',
                    reason='google-cloud-aiplatform 1.34.0 (Python 3.7) has no REST transport')
from vertex_requests import ARGS  # noqa: E402  (these after the library check)
from vertex_requests import dry_run_body  # noqa: E402
from vertex_requests import FLAGS  # noqa: E402
from vertex_requests import IMAGE  # noqa: E402
from vertex_requests import refused_in_one_line  # noqa: E402
from vertex_requests import send  # noqa: E402
from vertex_requests import submit  # noqa: E402

from trainer.cloud import vertex_submit  # noqa: E402
from trainer.errors import PipelineError  # noqa: E402

pytestmark = pytest.mark.one_runtime("the Vertex AI stand-in's rules: no TensorFlow")

STUDY = {'metrics': [{'metricId': 'loss', 'goal': 'MINIMIZE'}],
         'parameters': [{'parameterId': 'weight_decay',
                         'doubleValueSpec': {'minValue': 0.0001, 'maxValue': 0.01}}]}


def _pool(machine, accelerator=None, count=None, task=None):
  spec = {'machineType': machine}
  if accelerator:
    spec.update(acceleratorType=accelerator, acceleratorCount=count)
  return {'machineSpec': spec, 'replicaCount': '1',
          **(task if task is not None else {'containerSpec': {'imageUri': IMAGE, 'args': ARGS}})}


def _job(*pools, display_name='j', scheduling=None):
  spec = {'workerPoolSpecs': list(pools)}
  if scheduling:
    spec['scheduling'] = scheduling
  return {'displayName': display_name, 'jobSpec': spec}


@pytest.fixture(scope='module')
def standin():
  server = vertex_standin.VertexStandIn().start()
  yield server
  server.stop()


def _submit(tmp_path, *args):
  """`trainer.submit --dry_run ARGS`: checked and printed, nothing sent."""
  return submit(tmp_path, '--dry_run', *args)


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
        'that machine takes 1, 2, 4 of them'),
    'one_v100_on_32_vcpus': (
        _job(_pool('n1-standard-32', 'NVIDIA_TESLA_V100', 1)), 'supported counts: [4, 8]',
        ('--machine_type=n1-standard-32', '--accelerator_type=NVIDIA_TESLA_V100'),
        'that machine takes 4, 8 of them (Vertex AI "Configure compute resources", N1 table); 1 '
        'fit n1-highmem-2'),
    'a_gpu_on_an_n1_machine_vertex_does_not_offer_it_on': (
        _job(_pool('n1-standard-2', 'NVIDIA_TESLA_T4', 1)), 'is not supported for machine type',
        ('--machine_type=n1-standard-2', '--accelerator_type=NVIDIA_TESLA_T4'),
        '--machine_type=n1-standard-2 takes no GPU on Vertex AI'),
    'p100_on_64_vcpus_with_240_gb': (
        _job(_pool('n1-standard-64', 'NVIDIA_TESLA_P100', 4)), 'is not supported for machine type',
        ('--machine_type=n1-standard-64', '--accelerator_type=NVIDIA_TESLA_P100',
         '--accelerator_count=4'), 'that machine takes none of them'),
    'tpu_v4_has_no_training_machine': (
        _job(_pool('cloud-tpu', 'TPU_V4_POD', 8)), 'is not supported for machine type',
        ('--machine_type=cloud-tpu', '--accelerator_type=TPU_V4_POD'),
        'offer no TPU v4 machine type'),
    'flex_start_on_a_cpu': (
        _job(_pool('n1-standard-8'), scheduling={'strategy': 'FLEX_START'}),
        'FLEX_START requires one of NVIDIA_L4',
        ('--scheduling_strategy=FLEX_START',), 'FLEX_START takes NVIDIA_L4'),
    'flex_start_for_eight_days': (
        _job(_pool('g2-standard-8', 'NVIDIA_L4', 1),
             scheduling={'strategy': 'FLEX_START', 'timeout': '691200s'}),
        'at most 7 days',
        ('--machine_type=g2-standard-8', '--accelerator_type=NVIDIA_L4',
         '--scheduling_strategy=FLEX_START', '--timeout=8d'), 'runs at most 7 days'),
    'a_display_name_of_129_characters': (
        _job(_pool('n1-standard-8'), display_name='x' * 129), 'up to 128 characters',
        ('--display_name=' + 'x' * 129,), '--display_name must have 1 to 128 characters'),
    'tpu_v2_with_4_cores': (
        _job(_pool('cloud-tpu', 'TPU_V2', 4)), 'acceleratorCount 8 (a TPU VM) or a multiple of 32',
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
  refusal = send(standin, body)
  assert refusal and service_says in refusal, refusal
  refused_in_one_line(_submit(tmp_path, *FLAGS, *flags, '--', *ARGS), submit_says)


def test_a_tpu_v3_outside_its_regions_is_refused_by_both(standin, tmp_path):
  refusal = send(standin, _job(_pool('cloud-tpu', 'TPU_V3', 8)), region='us-east1')
  assert 'not supported in location us-east1' in refusal
  refused_in_one_line(_submit(tmp_path, *FLAGS, '--region=us-east1', '--machine_type=cloud-tpu',
                   '--accelerator_type=TPU_V3', '--', *ARGS),
           'TPU_V3 is not offered for training in --region=us-east1')


def test_a_study_without_parallel_trial_count_is_refused_by_both(standin, tmp_path):
  body = {'displayName': 'j', 'studySpec': STUDY, 'maxTrialCount': 4,
          'trialJobSpec': _job(_pool('n1-standard-8'))['jobSpec']}
  assert 'Field: parallelTrialCount; Message: Required' in send(standin, body, hptuning=True)
  assert send(standin, dict(body, parallelTrialCount=2), hptuning=True) is None
  config = tmp_path / 'study.json'
  config.write_text(json.dumps({'studySpec': STUDY, 'maxTrialCount': 4}))
  refused_in_one_line(_submit(tmp_path, *FLAGS, '--hptuning_config=' + str(config), '--', *ARGS),
           '--hptuning_config: parallelTrialCount is required')


@pytest.mark.parametrize('body, field', [
    ({'jobSpec': _job(_pool('n1-standard-8'))['jobSpec']}, 'Field: displayName'),
    ({'displayName': 'j'}, 'Field: jobSpec'),
    (_job(_pool('n1-standard-8', task={'containerSpec': {'args': ARGS}})),
     'container_spec.imageUri'),
    (_job(_pool('n1-standard-8', task={})), 'One of container_spec or python_package_spec'),
])
def test_the_standin_refuses_a_job_without_a_required_field(standin, body, field):
  assert field in send(standin, body)


def test_a_study_without_metrics_or_goal_is_refused(standin):
  trial = _job(_pool('n1-standard-8'))['jobSpec']
  body = {'displayName': 'j', 'maxTrialCount': 4, 'parallelTrialCount': 2, 'trialJobSpec': trial}
  assert 'study_spec.metrics' in send(standin, dict(body, studySpec={
      'parameters': STUDY['parameters']}), hptuning=True)
  assert 'study_spec.metrics.goal' in send(standin, dict(body, studySpec=dict(
      STUDY, metrics=[{'metricId': 'loss'}])), hptuning=True)


def test_gcloud_config_holds_a_custom_job_spec(standin, tmp_path):
  """gcloud reads `custom-jobs create --config` as a CustomJobSpec: a whole CustomJob there
  leaves the spec without worker pools (its keys are not CustomJobSpec fields), which the service
  refuses; the file trainer.submit prints is a CustomJobSpec the service takes."""
  whole_job = _job(_pool('n1-standard-8'))
  fields = {f.json_name for f in aiplatform_v1.CustomJobSpec.pb().DESCRIPTOR.fields}
  as_gcloud_reads_it = {k: v for k, v in whole_job.items() if k in fields}
  assert as_gcloud_reads_it == {}  # the REST client then sends no jobSpec at all
  refusal = send(standin, {'displayName': 'j', 'jobSpec': as_gcloud_reads_it})
  assert 'Field: jobSpec; Message: Required field is not set.' in refusal, refusal
  proc = _submit(tmp_path, *FLAGS, '--machine_type=g2-standard-24', '--accelerator_type=NVIDIA_L4',
                 '--worker_count=1', '--ps_count=1', '--', *ARGS)
  assert proc.returncode == 0, proc.stderr[-3000:]
  lines = proc.stdout.splitlines()
  start = lines.index("cat > job_spec.json <<'EOF'")
  config = json.loads('\n'.join(lines[start + 1:lines.index('EOF', start)]))
  assert set(config) <= fields and config['workerPoolSpecs']
  assert send(standin, {'displayName': 'j', 'jobSpec': config}) is None


def test_the_rules_module_stands_alone():
  """The stand-in's rules import no trainer code, so they can catch trainer.submit's mistakes."""
  with open(os.path.join(os.path.dirname(__file__), 'vertex_rules.py')) as f:
    source = f.read()
  assert 'import trainer' not in source and 'from trainer' not in source
  assert vertex_rules.refusal('customJobs', _job(_pool('n1-standard-8')), 'us-central1') is None


SPOT = ('--scheduling_strategy=SPOT', '--timeout=36h', '--restart_job_on_worker_restart')


def _tuning_flags(tmp_path):
  """trainer.submit's flags for a tuning study of STUDY (4 trials, 2 at a time)."""
  config = tmp_path / 'study.json'
  config.write_text(json.dumps({'studySpec': STUDY, 'maxTrialCount': 4, 'parallelTrialCount': 2}))
  return ('--hptuning_config=' + str(config),)


@pytest.mark.parametrize('flags, hptuning', [
    (('--machine_type=a3-megagpu-8g', '--accelerator_type=NVIDIA_H100_MEGA_80GB'), False),
    (('--machine_type=a3-highgpu-1g', '--accelerator_type=NVIDIA_H100_80GB'), False),
    (('--machine_type=a3-ultragpu-8g', '--accelerator_type=NVIDIA_H200_141GB',
      '--scheduling_strategy=FLEX_START', '--max_wait_duration=6h', '--timeout=7d'), False),
    (('--machine_type=a2-ultragpu-1g', '--accelerator_type=NVIDIA_A100_80GB',
      '--worker_count=2', '--ps_count=1') + SPOT, False),
    (('--accelerator_type=NVIDIA_TESLA_T4',) + SPOT, True),
])
def test_todays_machines_and_spot_jobs_pass_both(flags, hptuning, standin, tmp_path):
  """What trainer.submit takes, the service takes: a Spot CustomJob and a Spot tuning study."""
  extra = _tuning_flags(tmp_path) if hptuning else ()
  body = dry_run_body(_submit(tmp_path, *FLAGS, *flags, *extra, '--', *ARGS))
  spec = body['trialJobSpec'] if hptuning else body['jobSpec']
  if '--scheduling_strategy=SPOT' in flags:
    assert spec['scheduling'] == {'strategy': 'SPOT', 'timeout': '129600s',
                                  'restartJobOnWorkerRestart': True}
  assert send(standin, body, hptuning=hptuning) is None


@pytest.mark.parametrize('flags, pool, submit_says', [
    (('--machine_type=a4-highgpu-8g', '--accelerator_type=NVIDIA_B200'),
     _pool('a4-highgpu-8g', 'NVIDIA_B200', 8), 'is a Blackwell GPU: TensorFlow 2.15'),
    (('--machine_type=a4x-highgpu-4g', '--accelerator_type=NVIDIA_GB200'),
     _pool('a4x-highgpu-4g', 'NVIDIA_GB200', 4), 'has Arm CPUs'),
    (('--machine_type=ct5lp-hightpu-4t', '--accelerator_type=TPU_V5_LITEPOD'),
     _pool('ct5lp-hightpu-4t', 'TPU_V5_LITEPOD', 4), 'only support PJRT'),
    (('--machine_type=ct6e-standard-4t',), _pool('ct6e-standard-4t'),
     'TensorFlow is no longer supported'),
    (('--machine_type=tpu7x-standard-4t',), _pool('tpu7x-standard-4t'),
     'TensorFlow is not supported on Ironwood'),
    (('--machine_type=g4-standard-48', '--accelerator_type=NVIDIA_RTX_PRO_6000'),
     _pool('g4-standard-48', 'NVIDIA_RTX_PRO_6000', 1), 'is a Blackwell GPU'),
])
def test_machines_the_service_offers_but_the_image_cannot_use(flags, pool, submit_says, standin,
                                                              tmp_path):
  assert send(standin, _job(pool)) is None
  refused_in_one_line(_submit(tmp_path, *FLAGS, *flags, '--', *ARGS), submit_says)


@pytest.mark.parametrize('hptuning', [False, True])
def test_labels_go_into_the_request_and_break_no_rule_of_the_service(hptuning, standin, tmp_path):
  """--labels=team=vision,cost-center=cc42 is the request's `labels` (CustomJob field 11, tuning
  job 16), which the stand-in takes; a label with an uppercase letter, which the service refuses,
  the submitter refuses first."""
  extra = _tuning_flags(tmp_path) if hptuning else ()
  proc = _submit(tmp_path, *FLAGS, '--labels=team=vision,cost-center=cc42,', *extra, '--', *ARGS)
  body = dry_run_body(proc)
  assert body['labels'] == {'team': 'vision', 'cost-center': 'cc42'}
  # gcloud's config file of a CustomJob holds its spec only: the labels go on the command.
  assert ('--labels=cost-center=cc42,team=vision' in proc.stdout) != hptuning
  assert send(standin, body, hptuning=hptuning) is None
  for labels in ({'Team': 'vision'}, {'1st': 'x'}):
    assert 'Invalid labels' in send(standin, dict(body, labels=labels), hptuning=hptuning)
  refused_in_one_line(_submit(tmp_path, *FLAGS, '--labels=Team=vision', '--', *ARGS), "label key 'Team'")


def test_a_tpu_v5p_machine_gets_the_pjrt_explanation(tmp_path):
  """ct5p (TPU v5p) is refused as v5e is, saying why (PJRT), not as an unknown machine."""
  proc = _submit(tmp_path, *FLAGS, '--machine_type=ct5p-hightpu-4t', '--', *ARGS)
  refused_in_one_line(proc, 'TPU v5p, released after v5e')
  assert 'only support PJRT' in proc.stderr


@pytest.mark.parametrize('body, service_says', [
    (_job(dict(_pool('n1-standard-8'), replicaCount='2')), 'replica_count must be 1'),
    (_job(dict(_pool('n1-standard-8'), containerSpec={
        'imageUri': IMAGE, 'env': [{'name': 'HP-TAG', 'value': 'loss'}]})), 'valid C identifier'),
    (_job(dict(_pool('n1-standard-8'), diskSpec={'bootDiskType': 'pd-balanced'})),
     'valid values are pd-ssd, pd-standard, hyperdisk-balanced'),
    (_job(dict(_pool('n1-standard-8'), diskSpec={'bootDiskSizeGb': 99})),
     'boot_disk_size_gb 99: it must be between 100 and 64000'),
    (_job(_pool('cloud-tpu', 'TPU_V3', 0)), 'acceleratorCount 8 (a TPU VM) or a multiple of 32'),
    (_job(_pool('ct6e-standard-5t')), 'Machine type "ct6e-standard-5t" is not supported'),
    (_job(dict(_pool('ct5lp-hightpu-4t', 'TPU_V5_LITEPOD', 4),
               machineSpec={'machineType': 'ct5lp-hightpu-4t', 'acceleratorType': 'TPU_V5_LITEPOD',
                            'acceleratorCount': 4, 'tpuTopology': '2xx'})),
     'Invalid job_spec.worker_pool_specs[0].machine_spec.tpu_topology "2xx"'),
    (_job(_pool('cloud-tpu', 'TPU_V3', 32), scheduling={'strategy': 'SPOT'}),
     'Spot VMs cannot be used with TPU Pods'),
    (_job(_pool('a2-highgpu-1g', 'NVIDIA_TESLA_A100', 1),
          _pool('a2-highgpu-2g', 'NVIDIA_TESLA_A100', 2), scheduling={'strategy': 'FLEX_START'}),
     'same machine configuration in every'),
])
def test_the_standin_refuses_what_trainer_submit_never_builds(standin, body, service_says):
  refusal = send(standin, body)
  assert refusal and service_says in refusal, refusal


def _gcloud_refusal(job_spec):
  """gcloud's own check of a `--config` CustomJobSpec, restated from google-cloud-sdk 578.0.0
  lib/googlecloudsdk/command_lib/ai/custom_jobs/validation.py, _ValidateWorkerPoolSpecsFromConfig:
  every entry of workerPoolSpecs needs exactly one of a containerSpec with imageUri and a
  pythonPackageSpec with executorImageUri or pythonModule (an empty `{}` pool has neither)."""
  for spec in job_spec.get('workerPoolSpecs') or []:
    package = spec.get('pythonPackageSpec') or {}
    use_package = bool(package.get('executorImageUri') or package.get('pythonModule'))
    use_container = bool((spec.get('containerSpec') or {}).get('imageUri'))
    if use_package == use_container:
      return ('Exactly one of fields [pythonPackageSpec, containerSpec] is required for a '
              '[workerPoolSpecs] in the YAML config file.')
  return None


@pytest.mark.parametrize('pools', [(), ('--worker_count=2',), ('--worker_count=1', '--ps_count=2'),
                                   ('--ps_count=1',)])
@pytest.mark.parametrize('image', ['container', 'prebuilt'])
def test_the_printed_gcloud_config_passes_gclouds_own_check(pools, image, tmp_path):
  from trainer.cloud import vertex_job  # pylint: disable=g-import-not-at-top
  flags = {flag.split('=')[0][2:]: int(flag.split('=')[1]) for flag in pools}
  job = vertex_job.JobRequest(
      project='test-project', region='us-central1', staging_bucket='gs://bkt/s',
      base_output_dir='gs://bkt/out', machine_type='n1-standard-8', accelerator_type=None,
      accelerator_count=0, worker_count=flags.get('worker_count', 0),
      ps_count=flags.get('ps_count', 0), display_name='j', trainer_args=tuple(ARGS),
      container_uri=IMAGE if image == 'container' else None,
      executor_image_uri=None if image == 'container' else
      'us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-15.py310:latest')
  if pools == ('--ps_count=1',):  # the one combination gcloud's --config cannot hold
    with pytest.raises(PipelineError, match='--ps_count=1 without --worker_count'):
      vertex_job.validate(job, today=datetime.date(2025, 1, 1))
    return
  vertex_job.validate(job, today=datetime.date(2025, 1, 1))
  for hptuning in (False, True):
    body = (vertex_job.hyperparameter_tuning_job(job, 'gs://bkt/s/p.tar.gz', {
        'studySpec': STUDY, 'maxTrialCount': 2, 'parallelTrialCount': 1}) if hptuning else
            vertex_job.custom_job(job, 'gs://bkt/s/p.tar.gz'))
    _, text = vertex_submit.message_json(
        aiplatform_v1.HyperparameterTuningJob if hptuning else aiplatform_v1.CustomJob, body)
    lines = vertex_job.gcloud_commands(job, json.loads(text), hptuning)
    config = json.loads('\n'.join(lines[1:lines.index('EOF')]))
    spec = config['trialJobSpec'] if hptuning else config
    assert _gcloud_refusal(spec) is None
    assert len(spec['workerPoolSpecs']) == 1 + bool(job.worker_count) + bool(job.ps_count)
