"""Finding the Cloud TPU. Only called with --use_tpu: a CPU/GPU run never builds a resolver."""

import os
import socket
import threading
from urllib import parse

from absl import logging
import tensorflow.compat.v1 as tf
from tensorflow.python.tpu import tpu_system_metadata

from trainer.errors import PipelineError
from trainer.tpu import compatibility

_HELP = ('Check that the TPU exists and is READY (`gcloud compute tpus list --zone=ZONE`), that '
         '--tpu, --tpu_zone and --gcp_project name it, and that this VM is in the same network; '
         'or run without --use_tpu to train on the CPU/GPU.')


_GKE_VARIABLE = 'KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS'


def tpu_name(flag_value, environ=None):
  """The TPU to use and where that came from, in this order: --tpu, $TPU_NAME,
  grpc://$COLAB_TPU_ADDR, $KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS (GKE and AI Platform; TF's resolver
  reads that variable itself, including a pod slice's comma-separated endpoints).

  Returns:
    (name or grpc:// address(es), source description), or (None, what was tried).
  """
  environ = os.environ if environ is None else environ
  if flag_value:
    return flag_value, '--tpu'
  if environ.get('TPU_NAME'):
    return environ['TPU_NAME'], '$TPU_NAME'
  if environ.get('COLAB_TPU_ADDR'):
    return 'grpc://' + environ['COLAB_TPU_ADDR'], '$COLAB_TPU_ADDR'
  if environ.get(_GKE_VARIABLE):
    return environ[_GKE_VARIABLE], '$' + _GKE_VARIABLE
  return None, '--tpu, $TPU_NAME, $COLAB_TPU_ADDR and $' + _GKE_VARIABLE


def _check_reachable(master, timeout, what):
  """Fails fast if nothing answers at the grpc:// address (a session would otherwise hang)."""
  address = parse.urlparse(master)
  try:
    socket.create_connection((address.hostname, address.port or 8470), timeout=timeout).close()
  except OSError as e:
    raise PipelineError('%s at %s is unreachable (%s). %s' % (what, master, e, _HELP))


def _call_with_timeout(fn, timeout, what):
  """Runs fn() in a daemon thread; raises PipelineError if it takes longer than `timeout` s (the
  resolver's Cloud TPU API and metadata-server calls retry for minutes when the network is down)."""
  result = {}

  def target():
    try:
      result['value'] = fn()
    except Exception as e:  # pylint: disable=broad-except  # re-raised below with context
      result['error'] = e

  thread = threading.Thread(target=target, daemon=True)
  thread.start()
  thread.join(timeout)
  if thread.is_alive():
    raise PipelineError('%s did not finish within %.0f s. %s' % (what, timeout, _HELP))
  if 'error' in result:
    raise PipelineError('%s failed: %s: %s. %s' % (
        what, type(result['error']).__name__, result['error'], _HELP))
  return result['value']


def resolve_tpu(tpu, zone=None, project=None, timeout=10.0):
  """Builds a TPUClusterResolver and checks that its master answers.

  Args:
    tpu: --tpu value: a Cloud TPU name, grpc://host:port, or 'local' on a TPU VM (TF 2.x; its
      master is '' and nothing is probed), or None: see `tpu_name`.
    zone, project: GCE zone and project of a named TPU (None: from the metadata server).
    timeout: seconds allowed for resolving the name and for connecting to the TPU.

  Returns:
    tf.distribute.cluster_resolver.TPUClusterResolver.

  Raises:
    PipelineError: no TPU given, a TPU TPUEstimator cannot run on (`compatibility.check`), the
      name does not resolve, the TPU does not answer, or 'local' on TF 1.x (TPU VMs run TF 2.x).
  """
  name, source = tpu_name(tpu)
  if not name:
    raise PipelineError('--use_tpu needs a TPU, and none was given: tried %s. Pass --tpu=NAME '
                        '(or grpc://host:8470).' % source)
  # Before any resolving: what kind of TPU machine this is, and whether TPUEstimator can run.
  compatibility.check_this_host(name, tf.__version__)
  if name == compatibility.LOCAL_TPU:
    return _local_tpu(source, timeout)
  what = 'TPU %r (from %s, zone=%s, project=%s)' % (name, source, zone, project)
  resolver = _call_with_timeout(
      lambda: tf.distribute.cluster_resolver.TPUClusterResolver(
          tpu=None if source == '$' + _GKE_VARIABLE else name, zone=zone, project=project),
      timeout, 'resolving ' + what)
  master = _call_with_timeout(resolver.master, timeout, 'looking up the address of ' + what)
  if not master:
    raise PipelineError('%s resolved to no address. %s' % (what, _HELP))
  _check_reachable(master, timeout, what)
  logging.info('Using TPU %s at %s', name, master)
  return resolver


def _local_tpu(source, timeout):
  """The TPU attached to this TPU VM (TF 2.x only): its master is '' and there is no address to
  probe."""
  if not tf.__version__.startswith('2.'):
    raise PipelineError(
        '--tpu=local (from %s) names the TPU of a TPU VM, which runs TensorFlow 2.x; this is '
        'TensorFlow %s, which reaches a TPU node by name or grpc://host:8470. Pass --tpu=NAME, '
        'or run on a TPU VM with TF 2.x.' % (source, tf.__version__))
  resolver = _call_with_timeout(
      lambda: tf.distribute.cluster_resolver.TPUClusterResolver(tpu=compatibility.LOCAL_TPU),
      timeout,
      'finding the TPU of this TPU VM (--tpu=local)')
  logging.info('Using the TPU attached to this TPU VM (--tpu=local)')
  return resolver


def slice_shape(resolver, timeout=60.0):
  """(hosts, TPU cores) of the resolved TPU, read from the TPU as TPUEstimator reads it when a
  job starts (TensorFlow's private `tpu_system_metadata._query_tpu_system_metadata`; the dry run
  answers it with its simulated slice).

  Raises:
    PipelineError: the TPU does not answer within `timeout` seconds.
  """
  spec = resolver.cluster_spec()
  cluster_def = spec.as_cluster_def() if spec and spec.jobs else None
  metadata = _call_with_timeout(
      lambda: tpu_system_metadata._query_tpu_system_metadata(  # pylint: disable=protected-access
          resolver.master(), cluster_def=cluster_def),
      timeout, 'reading the cores of TPU at %r' % resolver.master())
  return metadata.num_hosts, metadata.num_cores
