"""What a user's first real Vertex AI job meets beyond its machines: the project's and
organization's settings a job carries (labels, a customer-managed encryption key, a reservation,
a VPC network, boot disks, a persistent resource, interactive shells), a job that stays QUEUED,
Ctrl-C under --wait, and where its logs are.

Each request goes through the real google-cloud-aiplatform client over REST to the loopback
stand-in (tests/vertex_standin.py), which refuses what the service refuses (tests/vertex_rules.py,
each rule with its source); trainer.submit refuses the same job first. Runs where the client has
its REST transport (the TF 2.15 runtime), as tests/test_vertex_rules.py.
"""

import json
import logging
import select
import signal
import subprocess
import sys

import pytest

from helpers import as_in_a_terminal
from helpers import REPO
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

pytestmark = pytest.mark.one_runtime("the Vertex AI stand-in's rules: no TensorFlow")

A100 = ('--machine_type=a2-highgpu-1g', '--accelerator_type=NVIDIA_TESLA_A100')
KEY = 'projects/test-project/locations/us-central1/keyRings/ring/cryptoKeys/trainer'
RESERVATION = 'projects/test-project/zones/us-central1-a/reservations/a100s'
NETWORK = 'projects/123456789/global/networks/training-vpc'
# The project as the stand-in holds it: one A100 reservation, one persistent resource.
RESERVATIONS = {RESERVATION: {'machineType': 'a2-highgpu-1g',
                              'acceleratorType': 'NVIDIA_TESLA_A100', 'acceleratorCount': 1},
                'projects/test-project/zones/us-central1-b/reservations/t4s': {
                    'machineType': 'n1-standard-8', 'acceleratorType': 'NVIDIA_TESLA_T4',
                    'acceleratorCount': 1}}
PERSISTENT_RESOURCES = {'team-pool': {'network': NETWORK}}
OPTIONS = ('--labels=team=vision,cost-center=cc42', '--encryption_key=' + KEY,
           '--reservation=' + RESERVATION, '--boot_disk_type=pd-standard',
           '--boot_disk_size_gb=500', '--network=' + NETWORK,
           '--reserved_ip_ranges=vertex-range-a,vertex-range-b', '--enable_web_access')
STUDY = {'studySpec': {'metrics': [{'metricId': 'loss', 'goal': 'MINIMIZE'}],
                       'parameters': [{'parameterId': 'weight_decay', 'doubleValueSpec': {
                           'minValue': 0.0001, 'maxValue': 0.01}}]},
         'maxTrialCount': 4, 'parallelTrialCount': 2}


@pytest.fixture(scope='module')
def standin():
  server = vertex_standin.VertexStandIn(reservations=RESERVATIONS,
                                        persistent_resources=PERSISTENT_RESOURCES).start()
  yield server
  server.stop()


def _dry_run_body(tmp_path, *args):
  """The request and the process of `trainer.submit --dry_run` of FLAGS and `args`."""
  proc = submit(tmp_path, '--dry_run', *FLAGS, *args, '--', *ARGS)
  return dry_run_body(proc), proc


@pytest.mark.parametrize('hptuning', [False, True])
def test_labels_cmek_a_reservation_and_boot_disks_reach_the_service_which_takes_them(
    hptuning, standin, tmp_path):
  """The request of a first job in an organization's project: each setting in its field of
  custom_job.proto v1 (a tuning job: the key on the study, the rest in each trial's spec)."""
  extra = ()
  if hptuning:
    (tmp_path / 'study.json').write_text(json.dumps(STUDY))
    extra = ('--hptuning_config=' + str(tmp_path / 'study.json'),)
  body, proc = _dry_run_body(tmp_path, *A100, *OPTIONS, *extra)
  assert body['labels'] == {'team': 'vision', 'cost-center': 'cc42'}
  assert body['encryptionSpec'] == {'kmsKeyName': KEY}
  spec = body['trialJobSpec' if hptuning else 'jobSpec']
  (pool,) = spec['workerPoolSpecs']
  assert pool['machineSpec']['reservationAffinity'] == {
      'reservationAffinityType': 'SPECIFIC_RESERVATION',
      'key': 'compute.googleapis.com/reservation-name', 'values': [RESERVATION]}
  assert pool['diskSpec'] == {'bootDiskType': 'pd-standard', 'bootDiskSizeGb': 500}
  assert spec['network'] == NETWORK
  assert spec['reservedIpRanges'] == ['vertex-range-a', 'vertex-range-b']
  assert spec['enableWebAccess'] is True
  # What only the service can know is said, not guessed.
  assert 'its VMs must be a2-highgpu-1g with 1 x NVIDIA_TESLA_A100 exactly' in proc.stderr
  if not hptuning:  # gcloud's --config file holds the CustomJobSpec: the key goes on the command
    assert '--kms-key=' + KEY in proc.stdout
  assert send(standin, body, hptuning) is None
  # `any` and `none` are affinities without a reservation name.
  for reservation, kind in (('any', 'ANY_RESERVATION'), ('none', 'NO_RESERVATION')):
    body, _ = _dry_run_body(tmp_path, '--reservation=' + reservation)
    affinity = body['jobSpec']['workerPoolSpecs'][0]['machineSpec']['reservationAffinity']
    assert affinity == {'reservationAffinityType': kind}
    assert send(standin, body) is None


def _spec_with(**fields):
  """A one-pool A100 CustomJob body with `fields` in its jobSpec (pool fields under `pool`,
  machine fields under `machine`, job fields under `job`)."""
  machine = dict({'machineType': 'a2-highgpu-1g', 'acceleratorType': 'NVIDIA_TESLA_A100',
                  'acceleratorCount': 1}, **fields.pop('machine', {}))
  pool = dict({'machineSpec': machine, 'replicaCount': '1',
               'containerSpec': {'imageUri': IMAGE, 'args': ARGS}}, **fields.pop('pool', {}))
  job = fields.pop('job', {})
  return dict({'displayName': 'j', 'jobSpec': dict({'workerPoolSpecs': [pool]}, **fields)}, **job)


OTHER_KEY = KEY.replace('us-central1', 'europe-west4')
OTHER_ATTACHMENT = 'projects/123456789/regions/europe-west4/networkAttachments/vertex-psc'
H200_MACHINE = {'machineType': 'a3-ultragpu-8g', 'acceleratorType': 'NVIDIA_H200_141GB',
                'acceleratorCount': 8}
H200 = ('--machine_type=a3-ultragpu-8g', '--accelerator_type=NVIDIA_H200_141GB')
T4_RESERVATION = 'projects/test-project/zones/us-central1-b/reservations/t4s'
T4_AFFINITY = {'reservationAffinityType': 'SPECIFIC_RESERVATION',
               'key': 'compute.googleapis.com/reservation-name', 'values': [T4_RESERVATION]}
# (raw request the service refuses, what it says, trainer.submit flags for it, what submit says).
CASES = {
    'key_in_another_region': (
        _spec_with(job={'encryptionSpec': {'kmsKeyName': OTHER_KEY}}),
        'needs to be in the same region', ('--encryption_key=' + OTHER_KEY,),
        '--encryption_key is in europe-west4, the job in --region=us-central1'),
    'key_not_a_key_name': (
        _spec_with(job={'encryptionSpec': {'kmsKeyName': 'trainer-key'}}),
        'Invalid encryption_spec.kms_key_name', ('--encryption_key=trainer-key',),
        'is not a Cloud KMS key name'),
    'reservation_in_another_region': (
        _spec_with(machine={'reservationAffinity': {
            'reservationAffinityType': 'SPECIFIC_RESERVATION',
            'key': 'compute.googleapis.com/reservation-name',
            'values': [RESERVATION.replace('us-central1-a', 'europe-west4-a')]}}),
        'not found in us-central1',
        ('--reservation=' + RESERVATION.replace('us-central1-a', 'europe-west4-a'),),
        'is in zone europe-west4-a, outside --region=us-central1'),
    'reservation_by_its_short_name': (
        _spec_with(machine={'reservationAffinity': {
            'reservationAffinityType': 'SPECIFIC_RESERVATION', 'values': ['a100s']}}),
        'SPECIFIC_RESERVATION needs key', ('--reservation=a100s',),
        "a reservation's full name, projects/PROJECT/zones/ZONE/reservations/NAME"),
    'network_by_project_id': (
        _spec_with(network='projects/test-project/global/networks/training-vpc'),
        'projects/{project_number}/global/networks',
        ('--network=projects/test-project/global/networks/training-vpc',),
        "with the project's number, not its ID"),
    'a_gpu_reservation_for_gpu_less_parameter_servers': (
        dict(_spec_with(), jobSpec={'workerPoolSpecs': [
            {'machineSpec': {'machineType': 'n1-standard-8', 'acceleratorType': 'NVIDIA_TESLA_T4',
                             'acceleratorCount': 1, 'reservationAffinity': T4_AFFINITY},
             'replicaCount': '1', 'containerSpec': {'imageUri': IMAGE}},
            {'machineSpec': {'machineType': 'n1-standard-8', 'acceleratorType': 'NVIDIA_TESLA_T4',
                             'acceleratorCount': 1, 'reservationAffinity': T4_AFFINITY},
             'replicaCount': '1', 'containerSpec': {'imageUri': IMAGE}},
            {'machineSpec': {'machineType': 'n1-standard-8', 'reservationAffinity': T4_AFFINITY},
             'replicaCount': '1', 'containerSpec': {'imageUri': IMAGE}}]}),
        'must match the workload exactly',
        ('--machine_type=n1-standard-8', '--accelerator_type=NVIDIA_TESLA_T4',
         '--worker_count=1', '--ps_count=1', '--reservation=' + T4_RESERVATION),
        'the parameter servers of an N1 job go without its GPUs'),
    'boot_disk_of_50_gb': (
        _spec_with(pool={'diskSpec': {'bootDiskSizeGb': 50}}), 'between 100 and 64000',
        ('--boot_disk_size_gb=50',), 'a boot disk has 100 to 64000 GB'),
    'boot_disk_pd_balanced': (
        _spec_with(pool={'diskSpec': {'bootDiskType': 'pd-balanced'}}),
        'valid values are pd-ssd, pd-standard, hyperdisk-balanced',
        ('--boot_disk_type=pd-balanced',),
        'Vertex AI takes pd-ssd, pd-standard, hyperdisk-balanced'),
    'network_attachment_in_another_region': (
        _spec_with(pscInterfaceConfig={'networkAttachment': OTHER_ATTACHMENT}),
        'is not in the region of the job', ('--network_attachment=' + OTHER_ATTACHMENT,),
        '--network_attachment is in europe-west4, the job in --region=us-central1'),
    'network_attachment_not_a_name': (
        _spec_with(pscInterfaceConfig={'networkAttachment': 'Vertex_PSC'}),
        'Invalid job_spec.psc_interface_config.network_attachment',
        ('--network_attachment=Vertex_PSC',), "give the network attachment's name"),
    'vpc_peering_with_h200s': (
        _spec_with(network=NETWORK, machine=dict(H200_MACHINE)),
        'VPC peering (job_spec.network) is not supported with NVIDIA_H200_141GB',
        H200 + ('--network=' + NETWORK,), 'reach your network through a Private Service Connect '
        'interface instead: --network_attachment=NAME'),
    'persistent_resource_id_in_capitals': (
        _spec_with(persistentResourceId='Team-Pool'), 'Invalid job_spec.persistent_resource_id',
        ('--persistent_resource_id=Team-Pool',), 'is not a persistent resource ID'),
}


@pytest.mark.parametrize('case', sorted(CASES))
def test_the_service_refuses_a_bad_setting_and_trainer_submit_refuses_it_first(case, standin,
                                                                              tmp_path):
  body, service_says, flags, submit_says = CASES[case]
  refusal = send(standin, body)
  assert refusal and service_says in refusal, refusal
  refused_in_one_line(submit(tmp_path, '--dry_run', *FLAGS, *A100, *flags, '--', *ARGS), submit_says)


@pytest.mark.parametrize('flags, says', [
    (('--reserved_ip_ranges=vertex-range-a',), 'are ranges under a VPC network: give --network'),
    (('--network=' + NETWORK, '--reserved_ip_ranges= , '), 'names no range'),
])
def test_ip_ranges_that_would_go_unused_are_refused(flags, says, tmp_path):
  """Ranges "under the VPC network" (custom_job.proto) without one, or none at all, would be
  sent unused: refused instead."""
  refused_in_one_line(submit(tmp_path, '--dry_run', *FLAGS, *flags, '--', *ARGS), says)


@pytest.mark.parametrize('attachment', [
    'vertex-psc', 'projects/123456789/regions/us-central1/networkAttachments/vertex-psc'])
def test_an_h200_job_reaches_a_vpc_network_through_a_network_attachment(attachment, standin,
                                                                        tmp_path):
  """H100 Mega, H200 and B200 jobs cannot be VPC-peered (refused above): a Private Service Connect
  interface, psc_interface_config (custom_job.proto field 21), is their road to the user's
  network."""
  body, _ = _dry_run_body(tmp_path, *H200, '--network_attachment=' + attachment)
  assert body['jobSpec']['pscInterfaceConfig'] == {'networkAttachment': attachment}
  assert 'network' not in body['jobSpec']
  assert send(standin, body) is None


def test_what_only_the_service_can_check_is_refused_there_and_warned_of_here(standin, tmp_path):
  """A reservation of other machines, a persistent resource on another network: trainer.submit
  cannot see them, so it names the rule; the service refuses."""
  body, proc = _dry_run_body(tmp_path, '--machine_type=a2-highgpu-2g',
                             '--accelerator_type=NVIDIA_TESLA_A100', '--reservation=' + RESERVATION)
  assert 'its VMs must be a2-highgpu-2g with 2 x NVIDIA_TESLA_A100 exactly' in proc.stderr
  assert 'must match the workload exactly' in send(standin, body)
  body, proc = _dry_run_body(tmp_path, *A100, '--persistent_resource_id=team-pool')
  assert body['jobSpec']['persistentResourceId'] == 'team-pool'
  assert "its network (or network attachment) and encryption key must be the job's" in proc.stderr
  assert 'is not the network of PersistentResource team-pool' in send(standin, body)
  body, _ = _dry_run_body(tmp_path, *A100, '--persistent_resource_id=team-pool',
                          '--network=' + NETWORK)
  assert send(standin, body) is None


class _Clock(object):
  """Minutes pass only when the poll loop sleeps: no wall-clock time in the test."""

  def __init__(self):
    self.now = 0.0

  def sleep(self, seconds):
    self.now += seconds


@pytest.mark.parametrize('strategy, says', [
    (None, 'custom_model_training_nvidia_t4_gpus'),
    ('SPOT', 'a Spot job also waits for spare capacity'),
    ('FLEX_START', 'Dynamic Workload Scheduler finds its machines'),
])
def test_a_job_queued_for_five_minutes_gets_its_likely_causes_once(strategy, says, caplog):
  """Without quota Vertex AI keeps a job QUEUED: --wait says why after 5 minutes, once; once the
  job runs, the interactive shells' URLs of --enable_web_access are logged."""
  body = _spec_with(enableWebAccess=True)
  if strategy:
    body['jobSpec']['scheduling'] = {'strategy': strategy}
  status = _wait_with_a_clock(body, caplog)
  assert status == 0
  hints = [r.getMessage() for r in caplog.records if 'has been QUEUED' in r.getMessage()]
  assert len(hints) == 1 and says in hints[0], hints
  assert 'has been QUEUED for 5 min' in hints[0]
  assert 'iam-admin/quotas?project=test-project' in hints[0] or strategy == 'FLEX_START'
  shells = [r.getMessage() for r in caplog.records if 'Interactive shells' in r.getMessage()]
  assert len(shells) == 1 and 'workerpool0-0 https://' in shells[0]


def _wait_with_a_clock(body, caplog, hptuning=False):
  """Creates `body` on a stand-in that keeps it QUEUED for 12 polls, and waits for it polling
  every simulated minute; returns wait's status."""
  server = vertex_standin.VertexStandIn(queued_polls=12,
                                        persistent_resources=PERSISTENT_RESOURCES).start()
  try:
    client = vertex_submit.job_service_client('us-central1', server.endpoint)
    message, _ = vertex_submit.message_json(
        aiplatform_v1.HyperparameterTuningJob if hptuning else aiplatform_v1.CustomJob, body)
    created = vertex_submit.create(client, 'projects/test-project/locations/us-central1', message,
                                   hptuning)
    clock = _Clock()
    with caplog.at_level(logging.INFO, logger='absl'):  # absl's own level may be higher
      return vertex_submit.wait(client, created.name, 'test-project', 'us-central1', hptuning,
                                poll_interval=60, sleep=clock.sleep, clock=lambda: clock.now)
  finally:
    server.stop()


def test_a_study_on_a_persistent_resource_names_it_and_its_trials_shells(caplog):
  """A study's shells are its trials' (Trial.web_access_uris); a job on a persistent resource
  queues for that resource's machines, not for quota."""
  spec = _spec_with(enableWebAccess=True, persistentResourceId='team-pool',
                    network=NETWORK)['jobSpec']
  assert _wait_with_a_clock(dict(STUDY, displayName='s', trialJobSpec=spec), caplog, True) == 0
  messages = [r.getMessage() for r in caplog.records]
  (hint,) = [m for m in messages if 'has been QUEUED' in m]
  assert 'gcloud ai persistent-resources describe team-pool --region=us-central1' in hint
  (shells,) = [m for m in messages if 'Interactive shells' in m]
  assert 'trial 1 workerpool0-0 https://' in shells


@pytest.mark.parametrize('cancel', [True, False])
def test_ctrl_c_under_wait_cancels_the_job_only_when_asked(cancel, tmp_path):
  """Ctrl-C while --wait polls: with --cancel_on_interrupt the job is cancelled (CancelCustomJob);
  without it, and no terminal to ask, the job keeps running and the command to cancel it is
  printed. Either way the exit status is 130, and the logs' command was printed at create."""
  server = vertex_standin.VertexStandIn(queued_polls=10 ** 6).start()
  try:
    command = [sys.executable, '-m', 'trainer.submit', '--dist_dir=' + str(tmp_path / 'dist'),
               *FLAGS, '--api_endpoint=' + server.endpoint, '--wait', '--poll_interval=0.05']
    command += ['--cancel_on_interrupt'] if cancel else []
    proc = subprocess.Popen(command + ['--'] + ARGS, cwd=REPO, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            universal_newlines=True, preexec_fn=as_in_a_terminal)
    name = _line_within(proc.stdout, 60).strip()  # the created job's name, printed first
    assert '/customJobs/' in name, proc.communicate(timeout=60)[1][-3000:]
    logged = []
    while not logged or 'Its logs:' not in logged[-1]:  # then it polls: press Ctrl-C
      logged.append(_line_within(proc.stderr, 60))
      assert logged[-1], ''.join(logged)[-3000:]
    proc.send_signal(signal.SIGINT)
    stderr = ''.join(logged) + proc.communicate(timeout=60)[1]
  finally:
    server.stop()
  assert proc.returncode == 130, stderr[-3000:]
  job_id = name.rsplit('/', 1)[-1]
  assert ('Its logs: gcloud ai custom-jobs stream-logs %s --project=test-project '
          '--region=us-central1' % job_id) in stderr
  cancels = [r for r in server.requests if r['path'].endswith(':cancel')]
  if cancel:
    assert [r['path'] for r in cancels] == ['/v1/%s:cancel' % name]
    assert 'Cancelling job %s' % job_id in stderr
  else:
    assert not cancels
    assert ('keeps running on Vertex AI (and costing). To cancel it: gcloud ai custom-jobs cancel '
            '%s --project=test-project --region=us-central1' % job_id) in stderr


def _line_within(stream, seconds):
  """The next line of a child's pipe, or '' when none comes within `seconds` (no hang)."""
  if not select.select([stream], [], [], seconds)[0]:
    return ''
  return stream.readline()


def test_a_cancelled_job_reads_cancelling_then_cancelled(caplog):
  """The stand-in's cancel as job_service.proto says: asynchronous, then CANCELLED with code 1;
  --wait then exits 1 naming the state."""
  server = vertex_standin.VertexStandIn(queued_polls=10 ** 6).start()
  try:
    client = vertex_submit.job_service_client('us-central1', server.endpoint)
    message, _ = vertex_submit.message_json(aiplatform_v1.CustomJob, _spec_with())
    created = vertex_submit.create(client, 'projects/test-project/locations/us-central1', message)
    assert vertex_submit.interrupted(client, created.name, 'test-project', 'us-central1',
                                     ask=lambda question: 'Cancel job' in question) == 130
    states = [client.get_custom_job(name=created.name).state.name for _ in range(2)]
    assert states == ['JOB_STATE_CANCELLING', 'JOB_STATE_CANCELLED']
    assert vertex_submit.wait(client, created.name, 'test-project', 'us-central1',
                              poll_interval=0, sleep=lambda s: None) == 1
    # A cancel that fails leaves the job running, and says how to cancel it.
    server.deny = 503
    with caplog.at_level(logging.INFO, logger='absl'):  # absl's own level may be higher
      assert vertex_submit.interrupted(client, created.name, 'test-project', 'us-central1',
                                       cancel=True) == 130
  finally:
    server.stop()
  (failed,) = [r.getMessage() for r in caplog.records if 'failed' in r.getMessage()]
  assert 'keeps running' in failed and 'gcloud ai custom-jobs cancel' in failed


def test_cancel_on_interrupt_needs_wait(tmp_path):
  refused_in_one_line(submit(tmp_path, *FLAGS, '--cancel_on_interrupt', '--', *ARGS),
           '--cancel_on_interrupt is what Ctrl-C does under --wait')


@pytest.mark.parametrize('status, message, says', [
    (403, "Request is prohibited by organization's policy. vpcServiceControlsUniqueIdentifier: "
          'Xy12', 'a VPC Service Controls perimeter stopped this request'),
    (400, 'Constraint constraints/gcp.restrictNonCmekServices violated for '
          'projects/test-project attempting to create a CustomJob without CMEK.',
     'pass --encryption_key=projects/P/locations/us-central1/keyRings/R/cryptoKeys/K'),
])
def test_an_organization_policy_refusal_says_what_fixes_it(status, message, says, tmp_path):
  """A VPC Service Controls perimeter and a required-CMEK policy refuse with their own words;
  the hint for a missing role or a malformed request would send the user the wrong way."""
  server = vertex_standin.VertexStandIn().start()
  server.deny, server.deny_message = status, message
  try:
    proc = submit(tmp_path, *FLAGS, '--api_endpoint=' + server.endpoint, '--', *ARGS)
  finally:
    server.stop()
  refused_in_one_line(proc, says)
  assert 'roles/aiplatform.user' not in proc.stderr and 'check the machine' not in proc.stderr
