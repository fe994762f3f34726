"""Sends a Vertex AI job (trainer/cloud/vertex_job.py builds it): stages the source distribution
on Cloud Storage, creates the CustomJob or HyperparameterTuningJob with the Vertex AI client
library's low-level JobServiceClient, and with --wait polls it to its end.

google-cloud-aiplatform is the optional extra `cloud` (`pip install '.[cloud]'`), imported only
here and only when a Vertex AI job is sent or printed. The client speaks REST where the library
has it (google-cloud-aiplatform >= 1.4x, Python >= 3.8) and gRPC otherwise (1.34.0, the last
release for Python 3.7): both reach the same service. Errors of the service become a
PipelineError that says what to check.
"""

import json
import time

from absl import logging

from trainer.errors import PipelineError

PIP_COMMAND = "pip install '.[cloud]' in the repository (or: pip install google-cloud-aiplatform)"
TERMINAL_STATES = ('JOB_STATE_SUCCEEDED', 'JOB_STATE_FAILED', 'JOB_STATE_CANCELLED',
                   'JOB_STATE_EXPIRED', 'JOB_STATE_PARTIALLY_SUCCEEDED')
# The job's page in the Cloud console, as python-aiplatform links it since the console moved with
# the product's new name, Gemini Enterprise Agent Platform (jobs.py `_dashboard_uri`, v1.150.0,
# "Custom job url after rebrand"): CustomJobs and tuning jobs alike under /training/.
_CONSOLE = 'https://console.cloud.google.com/agent-platform/locations/%s/training/%s?project=%s'
# What to check for each kind of refusal (google.api_core.exceptions class names: the gRPC
# transport raises the first of each pair, REST the HTTP one).
_HINTS = {
    'PermissionDenied': 'check that your account (gcloud auth application-default login, or the '
                        'VM\'s service account) has roles/aiplatform.user on project %(project)s '
                        'and that the Vertex AI API is enabled there (gcloud services enable '
                        'aiplatform.googleapis.com --project=%(project)s)%(act_as)s',
    'Unauthenticated': 'run `gcloud auth application-default login`',
    'NotFound': 'check --project=%(project)s and --region=%(region)s',
    'InvalidArgument': 'the service refused the request as invalid: check the machine and '
                       'accelerator flags and --hptuning_config',
    'ResourceExhausted': 'the project\'s quota for these machines or accelerators in %(region)s '
                         'is used up: request more quota or choose another region',
}
_HTTP_NAMES = {'Forbidden': 'PermissionDenied', 'Unauthorized': 'Unauthenticated',
               'BadRequest': 'InvalidArgument', 'TooManyRequests': 'ResourceExhausted'}
# A job still QUEUED after this long gets the likely causes once (--wait). Vertex AI
# "Understanding the training service": a project without enough custom-training quota for the
# job's machines has the job kept in the queue; "Use Spot VMs with training": Spot VMs are
# Compute Engine's excess capacity; "Schedule training jobs based on resource availability"
# (schedule-jobs-dws): Flex-start queues until its machines are found, up to max_wait_duration.
QUEUED_HINT_SECONDS = 300.0
_QUOTAS = 'https://console.cloud.google.com/iam-admin/quotas?project=%s'
_QUOTA = ('Vertex AI keeps a job QUEUED while the project has not enough custom-training quota '
          'for its machines in %(region)s (e.g. aiplatform.googleapis.com/'
          'custom_model_training_nvidia_t4_gpus for T4s): check them and request more at '
          '%(quotas)s, or cancel the job and choose another region')
_QUEUED_CAUSES = {
    'FLEX_START': 'a Flex-start job waits until Dynamic Workload Scheduler finds its machines, up '
                  'to its --max_wait_duration (1 day by default): nothing is wrong yet',
    'SPOT': _QUOTA + '; a Spot job also waits for spare capacity (Spot VMs are Compute Engine\'s '
            'excess capacity)',
    'PERSISTENT_RESOURCE': 'it runs on the machines of persistent resource %(resource)s, which '
                           'may be busy with other jobs, or not running: check it with `gcloud ai '
                           'persistent-resources describe %(resource)s --region=%(region)s`',
    None: _QUOTA,
}
_STORAGE_HINTS = {
    'PermissionDenied': 'check that your account has roles/storage.objectAdmin on the staging '
                        'bucket',
    'NotFound': 'check that the staging bucket exists (gcloud storage buckets create gs://NAME '
                '--location=REGION)',
}


def aiplatform_v1():
  """The `google.cloud.aiplatform_v1` module.

  Raises:
    PipelineError: google-cloud-aiplatform is not installed.
  """
  try:
    from google.cloud import aiplatform_v1 as module  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise PipelineError('submitting to Vertex AI needs the Vertex AI client library (%s): %s'
                        % (e, PIP_COMMAND))
  return module


# Refusals of an organization policy, whatever the status: (what the message holds, the hint).
_POLICY_HINTS = (
    ('vpcServiceControlsUniqueIdentifier',
     'a VPC Service Controls perimeter stopped this request: no role or enabled API fixes that; '
     'ask the perimeter\'s administrator to look the identifier above up (VPC Service Controls '
     'troubleshooting: cloud.google.com/vpc-service-controls/docs/troubleshooting) and to let '
     'you in with an access level or an ingress rule'),
    ('restrictNonCmekServices',
     'your organization requires customer-managed encryption keys: pass '
     '--encryption_key=projects/P/locations/%(region)s/keyRings/R/cryptoKeys/K and grant Vertex '
     'AI\'s service agent (service-PROJECT_NUMBER@gcp-sa-aiplatform.iam.gserviceaccount.com) '
     'roles/cloudkms.cryptoKeyEncrypterDecrypter on that key'),
)


def service_error(error, project, region, action, storage=False, service_account=None):
  """A PipelineError of one line for an exception of the Google client libraries;
  `service_account`: the job's --service_account, which the caller must be allowed to act as."""
  kind = type(error).__name__
  message = ' '.join(str(getattr(error, 'message', None) or error).split())
  hints = _STORAGE_HINTS if storage else _HINTS
  hint = hints.get(_HTTP_NAMES.get(kind, kind), 'check --project=%(project)s and '
                   '--region=%(region)s')
  hint = next((h for marker, h in _POLICY_HINTS if marker in message), hint)
  act_as = ('; and, for --service_account=%s, that your account may act as it: '
            'roles/iam.serviceAccountUser on that service account (gcloud iam service-accounts '
            'add-iam-policy-binding %s --member=user:YOU --role=roles/iam.serviceAccountUser)'
            % (service_account, service_account)) if service_account else ''
  return PipelineError('%s failed: %s (%s); %s.' % (
      action, _HTTP_NAMES.get(kind, kind), message,
      hint % {'project': project, 'region': region, 'act_as': act_as}))


def _client_errors():
  from google.api_core import exceptions  # pylint: disable=g-import-not-at-top
  from google.auth import exceptions as auth_exceptions  # pylint: disable=g-import-not-at-top
  return (exceptions.GoogleAPIError, auth_exceptions.GoogleAuthError)


def message_json(message_class, body):
  """`body` (a camelCase dict) read into the library's proto-plus `message_class` and written back
  as the REST API's JSON: unknown or misspelled fields are refused here, not by the service.

  Raises:
    PipelineError: a field the API does not have.
  """
  from google.protobuf import json_format  # pylint: disable=g-import-not-at-top
  try:
    message = message_class.from_json(json.dumps(body))
  except Exception as e:  # json_format.ParseError and friends: the message names the field
    raise PipelineError(
        'the job request is not valid for the Vertex AI API as google-cloud-aiplatform %s knows '
        'it: %s. A field or value newer than that library (Spot needs 1.62 or later, Flex-start '
        '1.66; H100, H100 Mega, H200, reservations, persistent resources and network attachments are newer than '
        '1.34.0, the last for Python 3.7) needs '
        '`pip install -U google-cloud-aiplatform` on Python 3.8 or later.'
        % (_library_version(), ' '.join(str(e).split())))
  # protobuf's own writer: camelCase, enum names, no default-valued fields, on every protobuf.
  return message, json_format.MessageToJson(message_class.pb(message), indent=2)


def _library_version():
  try:
    from google.cloud.aiplatform import version  # pylint: disable=g-import-not-at-top
    return version.__version__
  except ImportError:
    return '(version unknown)'


def job_service_client(region, api_endpoint=None):
  """A JobServiceClient for `region`: REST when the library has it, else gRPC; `api_endpoint` an
  http:// URL (a local stand-in) is used without credentials, over REST only.

  Raises:
    PipelineError: the library is missing or too old for an http:// endpoint.
  """
  v1 = aiplatform_v1()
  endpoint = api_endpoint or '%s-aiplatform.googleapis.com' % region
  try:
    # pylint: disable-next=g-import-not-at-top,unused-import
    from google.cloud.aiplatform_v1.services.job_service.transports import rest  # noqa: F401
    transport = 'rest'
  except ImportError:
    transport = 'grpc'
  kwargs = {'client_options': {'api_endpoint': endpoint}}
  if endpoint.startswith('http://'):
    if transport != 'rest':
      raise PipelineError('--api_endpoint=%s needs the REST transport, which this '
                          'google-cloud-aiplatform lacks (Python 3.8+ releases have it).'
                          % endpoint)
    from google.auth.credentials import AnonymousCredentials  # pylint: disable=g-import-not-at-top
    kwargs['credentials'] = AnonymousCredentials()
  try:
    return v1.JobServiceClient(transport=transport, **kwargs)
  except _client_errors() as e:
    raise service_error(e, '-', region, 'connecting to Vertex AI')


def stage_package(package_path, package_uri, project):
  """Uploads the sdist to `package_uri` (gs://BUCKET/OBJECT) with google-cloud-storage.

  Raises:
    PipelineError: the bucket is missing or not writable, or no credentials.
  """
  from google.cloud import storage  # pylint: disable=g-import-not-at-top
  bucket_name, object_name = package_uri[len('gs://'):].split('/', 1)
  try:
    client = storage.Client(project=project)
    client.bucket(bucket_name).blob(object_name).upload_from_filename(package_path)
  except _client_errors() as e:
    raise service_error(e, project, '-', 'uploading the package to %s' % package_uri,
                        storage=True)
  logging.info('Staged %s', package_uri)


def job_id(name):
  """The id at the end of a resource name projects/P/locations/R/customJobs/ID."""
  return name.rsplit('/', 1)[-1]


def console_link(name, project, region):
  return _CONSOLE % (region, job_id(name), project)


def create(client, parent, message, hptuning=False):
  """Creates the job; returns the created job (name, state) as the service answered."""
  if hptuning:
    return client.create_hyperparameter_tuning_job(parent=parent,
                                                   hyperparameter_tuning_job=message)
  return client.create_custom_job(parent=parent, custom_job=message)


def gcloud_job_command(verb, name, project, region, hptuning=False):
  """`gcloud ai custom-jobs|hp-tuning-jobs VERB ID --project=P --region=R` for the job `name`
  (stream-logs: the job's logs from Cloud Logging; cancel)."""
  return 'gcloud ai %s %s %s --project=%s --region=%s' % (
      'hp-tuning-jobs' if hptuning else 'custom-jobs', verb, job_id(name), project, region)


def _queued_cause(job, hptuning, project, region):
  """Why the job is likely QUEUED, from its spec (a library without a field reads as unset)."""
  spec = job.trial_job_spec if hptuning else job.job_spec
  resource = getattr(spec, 'persistent_resource_id', '')
  strategy = getattr(getattr(spec.scheduling, 'strategy', None), 'name', None)
  key = 'PERSISTENT_RESOURCE' if resource else strategy if strategy in _QUEUED_CAUSES else None
  return _QUEUED_CAUSES[key] % {'region': region, 'quotas': _QUOTAS % project,
                                'resource': resource}


def _web_access_uris(job, hptuning):
  """{where: URL} of the job's interactive shells: a CustomJob's replicas, a study's trials'."""
  if not hptuning:
    return dict(getattr(job, 'web_access_uris', None) or {})
  return {'trial %s %s' % (trial.id, replica): uri for trial in job.trials
          for replica, uri in (getattr(trial, 'web_access_uris', None) or {}).items()}


def wait(client, name, project, region, hptuning=False, poll_interval=30.0, sleep=time.sleep,
         clock=time.monotonic):
  """Polls the job until a terminal state, logging each change of state with the console link,
  the likely causes once a job stays QUEUED for QUEUED_HINT_SECONDS, and the interactive shells'
  URLs once it runs with web access.

  Returns:
    0 if the job succeeded, 1 otherwise (its error message logged).
  """
  get = client.get_hyperparameter_tuning_job if hptuning else client.get_custom_job
  link = console_link(name, project, region)
  last = queued_since = None
  hinted = False
  shells = {}
  while True:
    job = get(name=name)
    state = job.state.name
    if state != last:
      logging.info('%s: %s  %s', job_id(name), state, link)
      last = state
      queued_since = clock() if state == 'JOB_STATE_QUEUED' else None
    if (state == 'JOB_STATE_QUEUED' and not hinted and
        clock() - queued_since >= QUEUED_HINT_SECONDS):
      hinted = True
      logging.warning('%s has been QUEUED for %d min: %s.', job_id(name),
                      (clock() - queued_since) // 60,
                      _queued_cause(job, hptuning, project, region))
    new = {k: v for k, v in _web_access_uris(job, hptuning).items() if shells.get(k) != v}
    if new:
      shells.update(new)
      logging.info('Interactive shells (--enable_web_access): %s',
                   ', '.join('%s %s' % kv for kv in sorted(new.items())))
    if state in TERMINAL_STATES:
      break
    sleep(poll_interval)
  if state == 'JOB_STATE_SUCCEEDED':
    return 0
  logging.error('job %s ended in %s: %s', job_id(name), state,
                job.error.message or '(no error message)')
  return 1


def interrupted(client, name, project, region, hptuning=False, cancel=False, ask=None):
  """What Ctrl-C under --wait does: cancels the job when `cancel`, or when `ask` (a function of a
  question, True for yes; None where no terminal can answer) says so; else leaves it running and
  says how to cancel it. Returns 130, the shell's status for SIGINT."""
  command = gcloud_job_command('cancel', name, project, region, hptuning)
  if not cancel and ask is not None:
    cancel = ask('Cancel job %s on Vertex AI? [y/N] ' % job_id(name))
  if cancel:
    try:
      (client.cancel_hyperparameter_tuning_job if hptuning else client.cancel_custom_job)(
          name=name)
    except _client_errors() as e:
      logging.error('Cancelling job %s failed (%s): it keeps running on Vertex AI (and costing). '
                    'To cancel it: %s', job_id(name), ' '.join(str(e).split()), command)
      return 130
    logging.warning('Cancelling job %s: Vertex AI stops its replicas (CANCELLING, then '
                    'CANCELLED): %s', job_id(name), console_link(name, project, region))
  else:
    logging.warning('Stopped waiting: job %s keeps running on Vertex AI (and costing). To cancel '
                    'it: %s', job_id(name), command)
  return 130


def send(body, hptuning, project, region, api_endpoint, wait_for_end, poll_interval,
         service_account=None, cancel_on_interrupt=False, ask=None):
  """Creates the job of `body` (a camelCase request dict) and, with `wait_for_end`, waits for it;
  Ctrl-C while waiting goes to `interrupted` (`cancel_on_interrupt`, `ask`).

  Returns:
    The exit status: 0 (created; or succeeded with wait), 1 (ended otherwise), 130 (Ctrl-C).

  Raises:
    PipelineError: the library is missing, the request is invalid or the service refused it.
  """
  v1 = aiplatform_v1()
  message_class = v1.HyperparameterTuningJob if hptuning else v1.CustomJob
  message, _ = message_json(message_class, body)
  client = job_service_client(region, api_endpoint)
  parent = 'projects/%s/locations/%s' % (project, region)
  try:
    created = create(client, parent, message, hptuning)
    try:  # from here on the job exists: Ctrl-C under --wait asks about it
      print(created.name, flush=True)
      logging.info('Created %s (%s): %s', created.name, created.state.name,
                   console_link(created.name, project, region))
      logging.info('Its logs: %s', gcloud_job_command('stream-logs', created.name, project,
                                                       region, hptuning))
      if not wait_for_end:
        return 0
      return wait(client, created.name, project, region, hptuning, poll_interval)
    except KeyboardInterrupt:
      if not wait_for_end:
        raise
      return interrupted(client, created.name, project, region, hptuning, cancel_on_interrupt,
                         ask)
  except _client_errors() as e:
    raise service_error(e, project, region, 'the Vertex AI request',
                        service_account=service_account)
