"""What the Vertex AI API (v1 JobService) refuses, for the loopback stand-in
(tests/vertex_standin.py): each rule turns a request body (the REST JSON the real client sends)
into the 400 INVALID_ARGUMENT message the service answers, or None.

Written independently of trainer.submit's own checks and importing no trainer code, so that
one catches the other. Shared are only facts: the enums of google.cloud.aiplatform_v1, and the
sourced table of what the service offers, trainer/cloud/vertex_machines.json (read as data; its
`sources` name each page). What the trainer's image cannot use (Blackwell, Arm hosts, TPUs
without the stream executor) the service takes: only trainer.submit refuses it. Sources, per
rule:
  REQUIRED fields: googleapis google/cloud/aiplatform/v1 custom_job.proto,
    hyperparameter_tuning_job.proto, study.proto ((google.api.field_behavior) = REQUIRED), and
    machine_resources.proto (MachineSpec.machine_type "as part of WorkerPoolSpec this field is
    required").
  Prebuilt executor images: custom_job.proto, PythonPackageSpec.executor_image_uri ("You must use
    an image from this list"); Vertex AI "Prebuilt containers for custom training" for the
    TensorFlow 2.15 images' end of availability (2025-11-14; TPU 2025-10-23).
  Machines, GPUs, TPUs, boot disks, display names, EnvVar names, Spot and Flex-start: the table's
    sources (configure_compute, distributed, tpu_training, tpu_regions, disk_proto,
    custom_job_proto, env_var_proto, spot, flex_start).
  Encryption keys: encryption_spec.proto (kms_key_name "projects/my-project/locations/my-region/
    keyRings/my-kr/cryptoKeys/my-key. The key needs to be in the same region as where the compute
    resource is created").
  Reservations: reservation_affinity.proto (reservation_affinity_type REQUIRED; SPECIFIC_RESERVATION
    "must be identified via the key and values fields", key compute.googleapis.com/reservation-name,
    values full reservation names); Vertex AI "Use reservations with prediction" / "... with
    training" ("A reservation's VM properties must match exactly with your Vertex AI workload"),
    checked against the reservations the stand-in is given, as Compute Engine holds them.
  Network: custom_job.proto CustomJobSpec.network ("projects/{project}/global/networks/{network}.
    Where {project} is a project number").
  Private Service Connect interface: service_networking.proto PscInterfaceConfig.network_attachment
    ("to attach to the resource within the region and user project", projects/{project}/regions/
    {region}/networkAttachments/{networkAttachment}; a Compute Engine name, RFC 1035, 1-63
    characters). VPC peering with H100 Mega, H200 and B200: the table's `no_vpc_peering` (Vertex AI
    "Use private IP for custom training").
  Persistent resources: persistent_resource_service.proto (an ID of at most 63 characters,
    /^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$/), the resources the stand-in is given.
"""

import datetime
import json
import os
import re

with open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'trainer',
                       'cloud', 'vertex_machines.json')) as _f:
  TABLE = json.load(_f)

# (message path, REQUIRED fields as the REST JSON names them).
_REQUIRED_CUSTOM_JOB = ('displayName', 'jobSpec')
_REQUIRED_TUNING_JOB = ('displayName', 'studySpec', 'maxTrialCount', 'parallelTrialCount',
                        'trialJobSpec')
_REQUIRED_STUDY = ('metrics', 'parameters')
_REQUIRED_METRIC = ('metricId', 'goal')
_REQUIRED_PARAMETER = ('parameterId',)
_REQUIRED_CONTAINER = ('imageUri',)
_REQUIRED_PACKAGE = ('executorImageUri', 'packageUris', 'pythonModule')

_PREBUILT = re.compile(r'^(?:us|europe|asia)-docker\.pkg\.dev/vertex-ai/training/([^:@/]+)')
_END_OF_AVAILABILITY = {
    'tf-cpu.2-15.py310': datetime.date(2025, 11, 14),
    'tf-gpu.2-15.py310': datetime.date(2025, 11, 14),
    'tf-tpu.2-15.cp310': datetime.date(2025, 10, 23),
}
# N1 machine type -> {GPU: counts}, from the table's rows.
_N1 = {machine: {gpu: set(counts) for gpu, counts in row.items() if gpu != 'machine_types'}
       for row in TABLE['n1_gpu_counts']['rows'] for machine in row['machine_types']}
_N1_GPUS = {gpu for counts in _N1.values() for gpu in counts}
_FIXED = {m: tuple(v) for m, v in TABLE['fixed_gpu_machines']['machines'].items()}
_TPU = TABLE['tpu_vms']
_V5E = TABLE['tpu_v5e']
_NEWER_TPU_MACHINES = TABLE['tpu_machines_without_accelerator_type']
_NEWER_TPU_MACHINE = re.compile(r'^(ct6e|tpu7x)-')
_C_IDENTIFIER = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*$')
_TOPOLOGY = re.compile(r'^\d+(x\d+)*$')
_WHOLE_NUMBER = re.compile(r'^\d+$')
_DURATION = re.compile(r'^(\d+)(?:\.\d+)?s$')
_KMS_KEY = re.compile(r'^projects/[^/]+/locations/([^/]+)/keyRings/[^/]+/cryptoKeys/[^/]+$')
_NETWORK = re.compile(r'^projects/(\d+)/global/networks/[^/]+$')
_PERSISTENT_RESOURCE_ID = re.compile(r'^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$')
_ATTACHMENT_NAME = re.compile(r'^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$')
_ATTACHMENT_PATH = re.compile(r'^projects/[^/]+/regions/([^/]+)/networkAttachments/([^/]+)$')
_UNPEERED_GPUS = set(TABLE['no_vpc_peering']['accelerators'])
_RESERVATION_NAME_KEY = 'compute.googleapis.com/reservation-name'


def _enum_name(enum, value):
  """The enum name: the REST client sends enums as numbers."""
  if isinstance(value, int):
    from google.cloud import aiplatform_v1  # pylint: disable=g-import-not-at-top
    return {'AcceleratorType': aiplatform_v1.AcceleratorType,
            'Strategy': aiplatform_v1.Scheduling.Strategy,
            'ReservationAffinityType': aiplatform_v1.ReservationAffinity.Type}[enum](value).name
  return value


def _missing(message, path, fields):
  for field in fields:
    value = (message or {}).get(field)
    if value in (None, '', [], {}, 0, '0'):
      return ('List of found errors:\t1.Field: %s%s; Message: Required field is not set.\t'
              % (path, field))
  return None


def _accelerator(spec):
  accelerator = _enum_name('AcceleratorType', spec.get('acceleratorType')) or None
  return None if accelerator == 'ACCELERATOR_TYPE_UNSPECIFIED' else accelerator


def _tpu_chips(machine, spec):
  """The chips of a v5e slice: the product of its tpuTopology, else the machine's own."""
  topology = spec.get('tpuTopology')
  if topology and _TOPOLOGY.match(topology):
    chips = 1
    for side in topology.split('x'):
      chips *= int(side)
    return chips
  return _V5E['machine_chips'][machine]


def _machine(spec, where, region):
  """The MachineSpec rules of one worker pool."""
  machine = spec.get('machineType')
  if not machine:
    return 'List of found errors:\t1.Field: %s.machine_spec.machine_type; Message: Required ' \
           'field is not set.\t' % where
  accelerator = _accelerator(spec)
  count = int(spec.get('acceleratorCount') or 0)  # the client sends an int32
  topology = spec.get('tpuTopology')
  if topology and not _TOPOLOGY.match(topology):
    return 'Invalid %s.machine_spec.tpu_topology "%s".' % (where, topology)
  if _NEWER_TPU_MACHINE.match(machine):
    known = [m for names in _NEWER_TPU_MACHINES.values() if isinstance(names, list)
             for m in names]
    if machine not in known:
      return 'Machine type "%s" is not supported.' % machine
    if accelerator:
      return ('Machine type "%s" takes no accelerator type; got %s.' % (machine, accelerator))
    return None
  if machine in _FIXED:
    if (accelerator, count) != _FIXED[machine]:
      return ('Machine type "%s" requires accelerator type %s with count %s; got %s x %s.'
              % (machine, _FIXED[machine][0], _FIXED[machine][1], count, accelerator))
    return None
  if accelerator is None:
    if machine == _TPU['machine_type'] or machine in _V5E['machine_chips']:
      return 'Machine type "%s" requires a TPU accelerator type.' % machine
    return None
  if accelerator in _N1_GPUS:
    counts = _N1.get(machine, {}).get(accelerator)
    if not counts:
      return 'Accelerator "%s" is not supported for machine type "%s".' % (accelerator, machine)
    if count not in counts:
      return ('Accelerator count %d is not supported for %s on machine type "%s"; supported '
              'counts: %s.' % (count, accelerator, machine, sorted(counts)))
    return None
  if accelerator in _TPU['accelerators']:
    if machine != _TPU['machine_type']:
      return 'Accelerator "%s" is not supported for machine type "%s".' % (accelerator, machine)
    if count <= 0 or (count != _TPU['single_host_cores'] and
                      count % _TPU['pod_cores_multiple']):
      return ('%s supports acceleratorCount 8 (a TPU VM) or a multiple of 32 (a TPU Pod); got '
              '%d.' % (accelerator, count))
    if region not in _TPU['regions'][accelerator]:
      return 'Accelerator "%s" is not supported in location %s for training.' % (accelerator,
                                                                                 region)
    return None
  if accelerator == _V5E['accelerator']:
    if machine not in _V5E['machine_chips']:
      return 'Accelerator "%s" is not supported for machine type "%s".' % (accelerator, machine)
    if region not in _V5E['regions']:
      return 'Accelerator "%s" is not supported in location %s for training.' % (accelerator,
                                                                                 region)
    return None
  return 'Accelerator "%s" is not supported for machine type "%s".' % (accelerator, machine)


def _is_tpu_pod(spec):
  machine, accelerator = spec.get('machineType'), _accelerator(spec)
  if accelerator in _TPU['accelerators']:
    return int(spec.get('acceleratorCount') or 0) > _TPU['single_host_cores']
  return machine in _V5E['machine_chips'] and _tpu_chips(machine, spec) > 8


def _disk(pool, where):
  disk = pool.get('diskSpec') or {}
  kind, size = disk.get('bootDiskType'), disk.get('bootDiskSizeGb')
  if kind and kind not in TABLE['boot_disk_types']:
    return ('Invalid %s.disk_spec.boot_disk_type "%s": valid values are %s.'
            % (where, kind, ', '.join(TABLE['boot_disk_types'])))
  low, high = TABLE['boot_disk_size_gb']
  if size and (not _WHOLE_NUMBER.match(str(size)) or not low <= int(size) <= high):
    return ('Invalid %s.disk_spec.boot_disk_size_gb %s: it must be between %d and %d.'
            % (where, size, low, high))
  return None


def _env(task, where):
  for variable in task.get('env') or []:
    name = variable.get('name') or ''
    if not _C_IDENTIFIER.match(name):
      return ('Invalid %s env name "%s": the name of an environment variable must be a valid C '
              'identifier.' % (where, name))
  return None


def _task(pool, where, today):
  container, package = pool.get('containerSpec'), pool.get('pythonPackageSpec')
  if not container and not package:
    return ('List of found errors:\t1.Field: %s.task; Message: One of container_spec or '
            'python_package_spec must be set.\t' % where)
  if container:
    return (_missing(container, where + '.container_spec.', _REQUIRED_CONTAINER) or
            _env(container, where + '.container_spec'))
  error = (_missing(package, where + '.python_package_spec.', _REQUIRED_PACKAGE) or
           _env(package, where + '.python_package_spec'))
  if error:
    return error
  image = package['executorImageUri']
  match = _PREBUILT.match(image)
  if not match:
    return ('Invalid executor image "%s": python_package_spec.executor_image_uri must be one of '
            'the Vertex AI prebuilt training containers.' % image)
  end = _END_OF_AVAILABILITY.get(match.group(1))
  if end and today >= end:
    return 'Executor image "%s" is no longer available (end of availability %s).' % (image, end)
  return None


def _seconds(duration):
  match = _DURATION.match(duration or '')
  return int(match.group(1)) if match else None


def _scheduling(spec, pools, path):
  """Spot's and Flex-start's limits (the table's spot and flex_start sources)."""
  scheduling = spec.get('scheduling') or {}
  strategy = _enum_name('Strategy', scheduling.get('strategy'))
  machines = [p.get('machineSpec') or {} for p in pools if p]
  if strategy == 'SPOT' and any(_is_tpu_pod(m) for m in machines):
    return 'Spot VMs cannot be used with TPU Pods (%sscheduling.strategy SPOT).' % path
  if strategy != 'FLEX_START':
    return None
  flex = TABLE['flex_start']
  for machine in machines:
    if _accelerator(machine) not in flex['accelerators']:
      return ('Scheduling strategy FLEX_START requires one of %s; got machine type "%s" with %s.'
              % (', '.join(flex['accelerators']), machine.get('machineType'),
                 _accelerator(machine) or 'no accelerator'))
  if any(m != machines[0] for m in machines):
    return ('Scheduling strategy FLEX_START requires the same machine configuration in every '
            'worker pool.')
  timeout = _seconds(scheduling.get('timeout'))
  if timeout and timeout > flex['max_timeout_seconds']:
    return ('Scheduling strategy FLEX_START allows a timeout of at most 7 days; got %s.'
            % scheduling['timeout'])
  return None


def _reservation(machine, where, region, reservations):
  """The refusal of a MachineSpec's reservationAffinity, or None. `reservations`: full name ->
  the reserved VMs' {machineType, acceleratorType, acceleratorCount}."""
  affinity = machine.get('reservationAffinity')
  if not affinity:
    return None
  kind = _enum_name('ReservationAffinityType', affinity.get('reservationAffinityType'))
  if kind in (None, 'TYPE_UNSPECIFIED'):
    return ('List of found errors:\t1.Field: %s.machine_spec.reservation_affinity.'
            'reservation_affinity_type; Message: Required field is not set.\t' % where)
  values = affinity.get('values') or []
  if kind != 'SPECIFIC_RESERVATION':
    return None
  if affinity.get('key') != _RESERVATION_NAME_KEY or not values:
    return ('Invalid %s.machine_spec.reservation_affinity: SPECIFIC_RESERVATION needs key %s and '
            'values, the reservations\' full names.' % (where, _RESERVATION_NAME_KEY))
  asked = {'machineType': machine.get('machineType'), 'acceleratorType': _accelerator(machine),
           'acceleratorCount': int(machine.get('acceleratorCount') or 0)}
  for value in values:
    reserved = reservations.get(value)
    zone = value.split('/zones/', 1)[-1].split('/', 1)[0]
    if reserved is None or not zone.startswith(region + '-'):
      return 'Reservation %s not found in %s.' % (value, region)
    if asked != reserved:
      return ('Reservation %s holds %s, the job asks for %s: a reservation\'s VM properties must '
              'match the workload exactly.' % (value, reserved, asked))
  return None


def _placement(spec, path, region, reservations, persistent_resources):
  """The network, PSC interface and persistent resource rules of a CustomJobSpec."""
  network = spec.get('network')
  if network and not _NETWORK.match(network):
    return ('Invalid %snetwork "%s": the format is projects/{project_number}/global/networks/'
            '{network}.' % (path, network))
  gpus = {_enum_name('AcceleratorType', (p.get('machineSpec') or {}).get('acceleratorType'))
          for p in spec.get('workerPoolSpecs') or [] if p}
  if network and gpus & _UNPEERED_GPUS:
    return ('VPC peering (%snetwork) is not supported with %s; use a Private Service Connect '
            'interface (psc_interface_config).' % (path, ', '.join(sorted(gpus & _UNPEERED_GPUS))))
  attachment = (spec.get('pscInterfaceConfig') or {}).get('networkAttachment')
  if attachment:
    full = _ATTACHMENT_PATH.match(attachment)
    if not (_ATTACHMENT_NAME.match(full.group(2) if full else attachment)):
      return ('Invalid %spsc_interface_config.network_attachment "%s".' % (path, attachment))
    if full and full.group(1) != region:
      return ('Network attachment %s is not in the region of the job (%s).'
              % (attachment, region))
  resource = spec.get('persistentResourceId')
  if resource:
    if not _PERSISTENT_RESOURCE_ID.match(resource):
      return 'Invalid %spersistent_resource_id "%s".' % (path, resource)
    if resource not in persistent_resources:
      return 'PersistentResource %s not found.' % resource
    if (persistent_resources[resource].get('network') or None) != (network or None):
      return ('The network of the job (%s) is not the network of PersistentResource %s (%s).'
              % (network, resource, persistent_resources[resource].get('network')))
  return None


def _encryption(body, region):
  key = (body.get('encryptionSpec') or {}).get('kmsKeyName')
  if body.get('encryptionSpec') is not None and not key:
    return ('List of found errors:\t1.Field: encryption_spec.kms_key_name; Message: Required '
            'field is not set.\t')
  match = _KMS_KEY.match(key or '') if key else None
  if key and not match:
    return 'Invalid encryption_spec.kms_key_name "%s".' % key
  if match and match.group(1) != region:
    return ('The Cloud KMS key %s is in location %s; the resource is created in %s: the key '
            'needs to be in the same region.' % (key, match.group(1), region))
  return None


def custom_job_spec(spec, path, region, today, reservations=None, persistent_resources=None):
  """The refusal of a CustomJobSpec (a job's jobSpec or a study's trialJobSpec), or None."""
  reservations = reservations or {}
  pools = spec.get('workerPoolSpecs') or []
  if not pools or not pools[0]:
    return ('List of found errors:\t1.Field: %sworker_pool_specs; Message: Required field is not '
            'set.\t' % path)
  replicas = str(pools[0].get('replicaCount') or 0)
  if not _WHOLE_NUMBER.match(replicas) or int(replicas) != 1:
    return ('%sworker_pool_specs[0].replica_count must be 1: the first worker pool is the '
            'primary replica; got %s.' % (path, pools[0].get('replicaCount') or 0))
  for i, pool in enumerate(pools):
    if not pool:
      continue  # every pool but the first may be skipped by an empty one
    where = '%sworker_pool_specs[%d]' % (path, i)
    machine = pool.get('machineSpec') or {}
    error = (_machine(machine, where, region) or _task(pool, where, today) or
             _disk(pool, where) or _reservation(machine, where, region, reservations))
    if error:
      return error
    tpu = machine.get('machineType') == _TPU['machine_type'] or (
        machine.get('machineType') in _V5E['machine_chips'])
    if tpu and len([p for p in pools if p]) > 1:
      return ('%s: a TPU VM job has a single worker pool of one replica.' % where)
  return (_placement(spec, path, region, reservations, persistent_resources or {}) or
          _scheduling(spec, pools, path))


def _labels(body):
  """CustomJob.labels (field 11), HyperparameterTuningJob.labels (16), custom_job.proto v1: "Label
  keys and values can be no longer than 64 characters (Unicode codepoints), can only contain
  lowercase letters, numeric characters, underscores and dashes. International characters are
  allowed." """
  labels = body.get('labels') or {}
  if len(labels) > 64:  # Resource Manager's labels-overview: at most 64 labels a resource
    return 'Invalid labels: at most 64 labels; got %d.' % len(labels)
  for key, value in sorted(labels.items()):
    if not key or not (key[0].isalpha() and not key[0].isupper()):  # the same page: keys
      return 'Invalid labels: a key must start with a lowercase letter; got %r.' % key
    for text in (key, value):
      if (not isinstance(text, str) or len(text) > 64 or
          not all(c in '_-' or c.isdigit() or (c.isalpha() and not c.isupper()) for c in text)):
        return ('Invalid labels: keys and values can be no longer than 64 characters and can only '
                'contain lowercase letters, numeric characters, underscores and dashes; got %r.'
                % text)
  return None


def refusal(collection, body, region, today=None, reservations=None, persistent_resources=None):
  """The INVALID_ARGUMENT message of a create request to `collection` (customJobs or
  hyperparameterTuningJobs), or None when the service would take it. `reservations`: the
  project's reservations (full name -> their VMs' machineType, acceleratorType,
  acceleratorCount); `persistent_resources`: ID -> {'network': ...}."""
  today = today or datetime.date.today()
  body = body or {}
  places = dict(reservations=reservations, persistent_resources=persistent_resources)
  if _encryption(body, region):
    return _encryption(body, region)
  if len(body.get('displayName') or '') > TABLE['display_name_max']:
    return ('Invalid display_name: it can be up to %d characters long; got %d.'
            % (TABLE['display_name_max'], len(body['displayName'])))
  if _labels(body):
    return _labels(body)
  if collection == 'customJobs':
    return (_missing(body, '', _REQUIRED_CUSTOM_JOB) or
            custom_job_spec(body['jobSpec'], 'job_spec.', region, today, **places))
  error = _missing(body, '', _REQUIRED_TUNING_JOB)
  if error:
    return error
  study = body['studySpec']
  error = _missing(study, 'study_spec.', _REQUIRED_STUDY)
  for metric in ([] if error else study['metrics']):
    error = error or _missing(metric, 'study_spec.metrics.', _REQUIRED_METRIC)
  for parameter in ([] if error else study['parameters']):
    error = error or _missing(parameter, 'study_spec.parameters.', _REQUIRED_PARAMETER)
  return error or custom_job_spec(body['trialJobSpec'], 'trial_job_spec.', region, today,
                                  **places)
