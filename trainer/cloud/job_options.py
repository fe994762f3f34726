"""What a Vertex AI job carries beside its machines and image, for a user's project and
organization: a customer-managed encryption key (CMEK), a Compute Engine reservation, a VPC
network and its reserved IP ranges or a Private Service Connect interface, each pool's boot disk,
a persistent resource and interactive shells; trainer.submit's checks of them, run before
anything is built or uploaded.

Sources: googleapis google/cloud/aiplatform/v1 (as google-cloud-aiplatform 2.7.0 prints them):
  - encryption_spec.proto, EncryptionSpec.kms_key_name: "projects/my-project/locations/my-region/
    keyRings/my-kr/cryptoKeys/my-key. The key needs to be in the same region as where the compute
    resource is created." CustomJob.encryption_spec (field 12); HyperparameterTuningJob's (17)
    secures its trials too.
  - reservation_affinity.proto (MachineSpec field 5): NO_RESERVATION, ANY_RESERVATION ("falling
    back to on-demand"), SPECIFIC_RESERVATION ("the reservation must be identified via the key
    and values fields": key compute.googleapis.com/reservation-name, values "the full resource
    name of the reservation"). Vertex AI "Use reservations with prediction"
    (cloud.google.com/vertex-ai/docs/predictions/use-reservations; its limitations cover custom
    training too): "A reservation's VM properties must match exactly with your Vertex AI
    workload", no Local SSD disks attached by hand, a shared reservation consumed from its owner
    project or one it is shared with: what only the service can check. A reservation is zonal
    (Compute Engine), so one outside the job's region cannot serve it, and it holds one machine
    configuration, so the GPU-less parameter servers of an N1 GPU job cannot consume the GPU
    reservation of its chief and workers.
  - custom_job.proto, CustomJobSpec: network (field 5) `projects/{project}/global/networks/
    {network}` "where {project} is a project number", with VPC Network Peering for Vertex AI set
    up first; reserved_ip_ranges (13), "reserved ip ranges under the VPC network" (without
    --network they name none: trainer.submit refuses them rather than send them unused);
    psc_interface_config (21), PscInterfaceConfig.network_attachment (service_networking.proto):
    "the Compute Engine network attachment to attach to the resource within the region and user
    project", `projects/{project}/regions/{region}/networkAttachments/{networkAttachment}` or its
    name, a Compute Engine resource name (1-63 characters, [a-z]([-a-z0-9]*[a-z0-9])?). Vertex AI
    "Use private IP for custom training" (cloud.google.com/vertex-ai/docs/training/
    using-private-ip): "Vertex AI Training doesn't support VPC Peering with H100-mega, H200 and
    B200 accelerators. A network attachment with PSC-I can be used as an alternative"
    (vertex_machines.json, `no_vpc_peering`).
    persistent_resource_id (14), whose "network and CMEK configs on the job should be consistent
    with those on the PersistentResource, otherwise, the job will be rejected"; enable_web_access
    (10), interactive shells at CustomJob.web_access_uris.
  - persistent_resource_service.proto: an ID of at most 63 characters,
    /^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$/.
  - machine_resources.proto, DiskSpec (WorkerPoolSpec field 5): the types and sizes in
    vertex_machines.json (`disk_proto`).
"""

import collections
import re

from trainer.cloud import machine_rules
from trainer.errors import PipelineError

Options = collections.namedtuple(
    'Options', 'encryption_key reservation network reserved_ip_ranges network_attachment '
    'boot_disk_type boot_disk_size_gb persistent_resource_id enable_web_access',
    defaults=(None,) * 8 + (False,))

RESERVATION_KEY = 'compute.googleapis.com/reservation-name'
_KMS_KEY = re.compile(r'^projects/[^/]+/locations/(?P<location>[^/]+)/keyRings/[^/]+/'
                      r'cryptoKeys/[^/]+$')
_RESERVATION = re.compile(r'^projects/[^/]+/zones/(?P<zone>[a-z]+-[a-z]+\d+-[a-z])/'
                          r'reservations/[a-z]([-a-z0-9]*[a-z0-9])?$')
_NETWORK = re.compile(r'^projects/(?P<project>[^/]+)/global/networks/[^/]+$')
_NETWORK_ATTACHMENT = re.compile(r'^(?:projects/[^/]+/regions/(?P<region>[^/]+)/'
                                 r'networkAttachments/)?[a-z]([-a-z0-9]{0,61}[a-z0-9])?$')
_PERSISTENT_RESOURCE_ID = re.compile(r'^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$')
_RESERVATION_TYPES = {'any': 'ANY_RESERVATION', 'none': 'NO_RESERVATION'}


def ip_ranges(text):
  """'a,b' -> ('a', 'b'); None for None.

  Raises:
    PipelineError: a value that names no range (' , ').
  """
  if text is None:
    return None
  ranges = tuple(r.strip() for r in text.split(',') if r.strip())
  if not ranges:
    raise PipelineError('--reserved_ip_ranges=%r names no range: give NAME[,NAME...] or leave '
                        'it out.' % text)
  return ranges


def check(options, job, warnings):
  """The rules of the module docstring for `options` (an Options, or None) with the JobRequest
  `job`; appends what only the service can check to `warnings`.

  Raises:
    PipelineError: what is wrong, and what to pass instead.
  """
  if options is None:
    return
  key = options.encryption_key
  if key is not None:
    match = _KMS_KEY.match(key)
    if not match:
      raise PipelineError('--encryption_key=%s is not a Cloud KMS key name: projects/PROJECT/'
                          'locations/REGION/keyRings/RING/cryptoKeys/KEY.' % key)
    if match.group('location') != job.region:
      raise PipelineError('--encryption_key is in %s, the job in --region=%s: Vertex AI takes a '
                          'key in the job\'s own region (encryption_spec.proto); create one there.'
                          % (match.group('location'), job.region))
  _check_reservation(options.reservation, job, warnings)
  if options.network is not None:
    match = _NETWORK.match(options.network)
    if not match or not match.group('project').isdigit():
      raise PipelineError('--network=%s: give projects/PROJECT_NUMBER/global/networks/NETWORK, '
                          'with the project\'s number, not its ID (custom_job.proto; gcloud '
                          'projects describe PROJECT_ID prints it).' % options.network)
  if options.reserved_ip_ranges and not options.network:
    raise PipelineError('--reserved_ip_ranges are ranges under a VPC network: give --network too.')
  _check_private_networking(options, job)
  _check_boot_disk(options)
  resource = options.persistent_resource_id
  if resource is not None and not _PERSISTENT_RESOURCE_ID.match(resource):
    raise PipelineError('--persistent_resource_id=%s is not a persistent resource ID (1-63 '
                        'lowercase letters, digits and hyphens, starting with a letter).'
                        % resource)
  if resource is not None:
    warnings.append('--persistent_resource_id=%s: the job runs on that resource\'s machines; '
                    'its network (or network attachment) and encryption key must be the job\'s '
                    '(custom_job.proto), or Vertex AI rejects the job.' % resource)


def _check_private_networking(options, job):
  attachment = options.network_attachment
  if attachment is not None:
    match = _NETWORK_ATTACHMENT.match(attachment)
    if not match:
      raise PipelineError('--network_attachment=%s: give the network attachment\'s name (in the '
                          'job\'s project and region) or projects/PROJECT/regions/REGION/'
                          'networkAttachments/NAME (service_networking.proto).' % attachment)
    if match.group('region') not in (None, job.region):
      raise PipelineError('--network_attachment is in %s, the job in --region=%s: Vertex AI '
                          'attaches one in the job\'s own region (service_networking.proto); '
                          'create one there.' % (match.group('region'), job.region))
  unpeered = machine_rules.TABLE['no_vpc_peering']['accelerators']
  if options.network is not None and job.accelerator_type in unpeered:
    raise PipelineError('--network with %s: Vertex AI Training does not peer a VPC network with '
                        'H100 Mega, H200 or B200 GPUs ("Use private IP for custom training"); '
                        'reach your network through a Private Service Connect interface instead: '
                        '--network_attachment=NAME.' % job.accelerator_type)


def _check_reservation(reservation, job, warnings):
  if reservation is None:
    return
  if reservation in _RESERVATION_TYPES:
    return
  match = _RESERVATION.match(reservation)
  if not match:
    raise PipelineError('--reservation=%s: give any (a matching reservation if there is one, '
                        'else on-demand), none, or a reservation\'s full name, projects/PROJECT/'
                        'zones/ZONE/reservations/NAME.' % reservation)
  if not match.group('zone').startswith(job.region + '-'):
    raise PipelineError('--reservation=%s is in zone %s, outside --region=%s, where the job\'s '
                        'machines are created: use a reservation in one of the region\'s zones.'
                        % (reservation, match.group('zone'), job.region))
  pools = [machine_rules.pool_accelerator(job.machine_type, job.accelerator_type,
                                          job.accelerator_count, chief_or_worker=False)]
  if job.ps_count and pools[0] != machine_rules.pool_accelerator(
      job.machine_type, job.accelerator_type, job.accelerator_count):
    raise PipelineError('--reservation=%s with --ps_count: a reservation holds one machine '
                        'configuration, and the parameter servers of an N1 job go without its '
                        'GPUs, so they cannot consume it. Use --reservation=any, or drop '
                        '--ps_count.' % reservation)
  accelerators = (' with %d x %s' % (job.accelerator_count, job.accelerator_type)
                  if job.accelerator_type else '')
  warnings.append('--reservation=%s: its VMs must be %s%s exactly, without Local SSDs attached '
                  'by hand, and the reservation the job\'s project\'s or shared with it, or '
                  'Vertex AI cannot consume it (Vertex AI, "Use reservations").'
                  % (reservation, job.machine_type, accelerators))


def _check_boot_disk(options):
  kinds = machine_rules.TABLE['boot_disk_types']
  if options.boot_disk_type is not None and options.boot_disk_type not in kinds:
    raise PipelineError('--boot_disk_type=%s: Vertex AI takes %s.'
                        % (options.boot_disk_type, ', '.join(kinds)))
  low, high = machine_rules.TABLE['boot_disk_size_gb']
  size = options.boot_disk_size_gb
  if size is not None and not low <= size <= high:
    raise PipelineError('--boot_disk_size_gb=%d: a boot disk has %d to %d GB.' % (size, low, high))


def reservation_affinity(reservation):
  """The MachineSpec.reservationAffinity of --reservation (REST JSON), or None."""
  if reservation is None:
    return None
  if reservation in _RESERVATION_TYPES:
    return {'reservationAffinityType': _RESERVATION_TYPES[reservation]}
  return {'reservationAffinityType': 'SPECIFIC_RESERVATION', 'key': RESERVATION_KEY,
          'values': [reservation]}


def apply_to_spec(options, spec):
  """Adds the options of a CustomJobSpec (REST JSON dict `spec`, its worker pools built) to it."""
  if options is None:
    return spec
  affinity = reservation_affinity(options.reservation)
  disk = {k: v for k, v in (('bootDiskType', options.boot_disk_type),
                            ('bootDiskSizeGb', options.boot_disk_size_gb)) if v is not None}
  for pool in spec['workerPoolSpecs']:
    if affinity:
      pool['machineSpec']['reservationAffinity'] = dict(affinity)
    if disk:
      pool['diskSpec'] = dict(disk)
  for field, value in (('network', options.network),
                       ('reservedIpRanges', list(options.reserved_ip_ranges or ())),
                       ('pscInterfaceConfig', options.network_attachment and {
                           'networkAttachment': options.network_attachment}),
                       ('persistentResourceId', options.persistent_resource_id),
                       ('enableWebAccess', options.enable_web_access)):
    if value:
      spec[field] = value
  return spec


def apply_to_job(options, body):
  """Adds the job-level options (the encryption key) to a CustomJob or tuning job body."""
  if options is not None and options.encryption_key:
    body['encryptionSpec'] = {'kmsKeyName': options.encryption_key}
  return body
