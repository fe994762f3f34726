"""Can TPUEstimator run on the TPU of this run? Answered at start (--use_tpu, before any graph)
from what the machine says about itself: the TPU VM's metadata (accelerator type, worker
number), the TensorFlow version, and the environment variables that select TensorFlow's TPU
runtime.

What is known (sources in docs/platforms.md):
- TF 1.15 reaches a TPU only as a TPU Node (a VM next to the TPU, by name or grpc://); TPU VMs run
  TF 2.x, and TF 2.15 is the last TensorFlow with tf.estimator.
- On a TPU VM, TF 2.15 runs the PJRT runtime when NEXT_PLUGGABLE_DEVICE_USE_C_API=true and
  TF_PLUGGABLE_DEVICE_LIBRARY_PATH are set (the `-pjrt` software versions), else StreamExecutor.
  TPUEstimator needs StreamExecutor (tensorflow/tensorflow#90807); v5e, v5p and v6e have PJRT
  only (`topologies.GENERATIONS`).
- A single-host TPU VM's TPU is in-process: --tpu=local. On a slice of several hosts
  (`-pod-se` software), a tpu-runtime service on every host owns its TPUs and the program runs
  on worker 0 only, with --tpu=<the TPU's name> and TPU_LOAD_LIBRARY=0 (so it does not claim
  worker 0's TPUs itself).
"""

import dataclasses
from http import client as http_client
import os
import time
from typing import Optional

from absl import logging

from trainer.errors import PipelineError
from trainer.tpu import topologies

# --tpu on a TPU VM: the TPU attached to this host, whose master is '' (in-process).
LOCAL_TPU = 'local'
# The GCE metadata server by address, as google-auth reaches it (no DNS lookup off Google Cloud);
# google-auth and TensorFlow honour the same override variable.
_METADATA_HOST_ENV = 'GCE_METADATA_HOST'
_METADATA_HOST = '169.254.169.254'
_MAX_ATTRIBUTE_BYTES = 4096  # accelerator-type and agent-worker-number are a few bytes
_ATTRIBUTES = ('accelerator-type', 'agent-worker-number')
_PJRT_VARIABLES = ('NEXT_PLUGGABLE_DEVICE_USE_C_API', 'TF_PLUGGABLE_DEVICE_LIBRARY_PATH')


@dataclasses.dataclass(frozen=True)
class TpuHost:
  """What this machine is, as far as the TPU goes.

  Attributes:
    on_google_cloud: the metadata server answered.
    accelerator_type: the TPU VM's accelerator type ('v3-8'); None off a TPU VM (a TPU Node's
      VM, or off Google Cloud).
    worker: the TPU VM's worker number in its slice (0 on a single host); None off a TPU VM.
    tensorflow_version: tf.__version__.
    pjrt: the environment selects TensorFlow's PJRT TPU runtime.
  """
  on_google_cloud: bool
  accelerator_type: Optional[str]
  worker: Optional[int]
  tensorflow_version: str
  pjrt: bool

  def describe(self):
    runtime = 'PJRT' if self.pjrt else 'StreamExecutor'
    if self.accelerator_type:
      where = 'TPU VM %s, worker %s' % (self.accelerator_type, self.worker)
    else:
      where = 'not a TPU VM (a TPU Node is reached by name or address)'
    return '%s; TensorFlow %s, %s TPU runtime' % (where, self.tensorflow_version, runtime)


def read_metadata(environ=None, timeout=2.0):
  """The TPU VM attributes of the GCE metadata server ({name: value}, missing ones left out), or
  None when no metadata server answers (not on Google Cloud).

  `timeout` (seconds) bounds the whole read, every attribute together: a server that trickles
  its bytes cannot hold the start-up longer (a socket timeout alone restarts at every byte). Only
  answers marked `Metadata-Flavor: Google` count, as Google's client libraries require ("Metadata
  server", Compute Engine docs): anything else on that address is not the metadata server.
  """
  environ = os.environ if environ is None else environ
  host = environ.get(_METADATA_HOST_ENV) or _METADATA_HOST
  deadline = time.monotonic() + timeout
  attributes = {}
  for name in _ATTRIBUTES:
    try:
      status, body = _get_attribute(host, name, deadline)
    except _NotMetadataServer as e:
      logging.warning('No GCE metadata server at %s (%s): taking this machine for one off '
                      'Google Cloud.', host, e)
      return None
    if status == 200:
      attributes[name] = body
    # 404: the server answered: this machine lacks the attribute
  return attributes


class _NotMetadataServer(Exception):
  """No answer, a late answer, or an answer not marked as the metadata server's."""


def _get_attribute(host, name, deadline):
  """(HTTP status, body text) of one instance attribute, read before `deadline`
  (time.monotonic()); connects directly, never through a proxy."""
  def remaining():
    left = deadline - time.monotonic()
    if left <= 0:
      raise _NotMetadataServer('no complete answer within the time allowed')
    return left
  connection = http_client.HTTPConnection(host, timeout=remaining())
  try:
    connection.request('GET', '/computeMetadata/v1/instance/attributes/' + name,
                       headers={'Metadata-Flavor': 'Google'})
    sock = connection.sock  # the connection lets go of it once an HTTP/1.0 answer starts
    response = connection.getresponse()
    if response.getheader('Metadata-Flavor') != 'Google':
      raise _NotMetadataServer('an answer without the Metadata-Flavor: Google header')
    chunks, size = [], 0
    while True:
      sock.settimeout(remaining())
      chunk = response.read1(1024) if hasattr(response, 'read1') else response.read(1024)
      if not chunk:
        break
      size += len(chunk)
      if size > _MAX_ATTRIBUTE_BYTES:
        raise _NotMetadataServer('an attribute of over %d bytes' % _MAX_ATTRIBUTE_BYTES)
      chunks.append(chunk)
    if response.status not in (200, 404):
      raise _NotMetadataServer('HTTP %d' % response.status)
    return response.status, b''.join(chunks).decode('utf-8', 'replace').strip()
  except (OSError, http_client.HTTPException) as e:
    raise _NotMetadataServer(str(e) or type(e).__name__)
  finally:
    connection.close()


def host_of(metadata, environ, tensorflow_version):
  """The TpuHost described by `metadata` (`read_metadata`), `environ` and the TF version."""
  worker = (metadata or {}).get('agent-worker-number')
  return TpuHost(
      on_google_cloud=metadata is not None,
      accelerator_type=(metadata or {}).get('accelerator-type') or None,
      worker=int(worker) if worker and worker.isdigit() else None,
      tensorflow_version=tensorflow_version,
      pjrt=(environ.get(_PJRT_VARIABLES[0], '').lower() == 'true'
            and bool(environ.get(_PJRT_VARIABLES[1]))))


def check(host, tpu, environ):
  """Refuses a TPU that TPUEstimator cannot run on, with the reason and the way out.

  Args:
    host: `TpuHost`.
    tpu: the TPU the run names (--tpu or $TPU_NAME): a name, grpc:// address or 'local'.
    environ: the environment (TPU_LOAD_LIBRARY).

  Returns:
    list of str: warnings (already logged) about settings that may fail later.

  Raises:
    PipelineError: TF 1.x on a TPU VM, a PJRT-only generation, the PJRT runtime selected,
      --tpu=local off a TPU VM or on a slice of several hosts, or a worker other than 0 of a slice.
  """
  tf1 = host.tensorflow_version.startswith('1.')
  if not host.accelerator_type:
    if tpu == LOCAL_TPU and not tf1 and not host.on_google_cloud:
      raise PipelineError(
          '--tpu=local names the TPU of the TPU VM this runs on, but this machine is not on '
          'Google Cloud (no metadata server answered). Run on a TPU VM, or pass --tpu=NAME.')
    return []
  accelerator = host.accelerator_type
  generation, _ = topologies.parse(accelerator)
  if generation.refusal:
    raise PipelineError('this TPU VM is a %s: %s' % (accelerator, generation.refusal))
  if tf1:
    raise PipelineError(
        'this is a TPU VM (%s), which runs TensorFlow 2.x; TensorFlow %s reaches a TPU only as a '
        'TPU Node. Use this project\'s TF 2.15 runtime (software version %s), or a TPU Node with '
        'TF 1.15 (v2/v3).' % (accelerator, host.tensorflow_version, topologies.SE_SOFTWARE))
  hosts, _ = topologies.slice_shape(accelerator)
  software = topologies.SE_POD_SOFTWARE if hosts > 1 else topologies.SE_SOFTWARE
  if host.pjrt:
    raise PipelineError(
        'this TPU VM (%s) selects TensorFlow\'s PJRT TPU runtime (%s are set); TPUEstimator '
        'needs the StreamExecutor runtime (tensorflow/tensorflow#90807). Create the TPU with '
        'software version %s, where these variables are not set.'
        % (accelerator, ' and '.join(_PJRT_VARIABLES), software))
  if hosts == 1:
    if tpu != LOCAL_TPU:
      message = ('this single-host TPU VM (%s) runs its TPU in this process: pass --tpu=local '
                 '(--tpu=%s is looked up as a TPU Node).' % (accelerator, tpu))
      logging.warning(message)
      return [message]
    return []
  if host.worker != 0:
    raise PipelineError(
        'this is worker %s of the %d-host slice %s: a TPUEstimator job runs on worker 0 only '
        '(`gcloud compute tpus tpu-vm ssh NAME --worker=0`); the tpu-runtime service of every '
        'host serves its TPUs.' % (host.worker, hosts, accelerator))
  if tpu == LOCAL_TPU:
    raise PipelineError(
        '--tpu=local takes only this host\'s TPU, but %s is a slice of %d hosts: pass the TPU\'s '
        'name (--tpu=NAME), run on worker 0 with TPU_LOAD_LIBRARY=0, and create it with software '
        'version %s.' % (accelerator, hosts, software))
  if environ.get('TPU_LOAD_LIBRARY') != '0':
    message = ('TPU_LOAD_LIBRARY is not 0 on worker 0 of the slice %s: the tpu-runtime service '
               'owns this host\'s TPUs, so TensorFlow must not load libtpu here. If the TPU '
               'reports itself busy, `export TPU_LOAD_LIBRARY=0`.' % accelerator)
    logging.warning(message)
    return [message]
  return []


def check_this_host(tpu, tensorflow_version, environ=None, timeout=2.0):
  """`check` of this machine (metadata server, environment); logs what it found.

  Returns:
    `TpuHost`.

  Raises:
    PipelineError: see `check`.
  """
  environ = os.environ if environ is None else environ
  host = host_of(read_metadata(environ, timeout), environ, tensorflow_version)
  logging.info('TPU check: %s.', host.describe())
  check(host, tpu, environ)
  return host
