"""Finding the Cloud TPU. Only called with --use_tpu: a CPU/GPU run never builds a resolver."""

import os
import socket
import threading
from urllib import parse

from absl import logging
import tensorflow.compat.v1 as tf

from trainer.errors import PipelineError

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
    tpu: --tpu value: a Cloud TPU name or grpc://host:port (None: see `tpu_name`).
    zone, project: GCE zone and project of a named TPU (None: from the metadata server).
    timeout: seconds allowed for resolving the name and for connecting to the TPU.

  Returns:
    tf.distribute.cluster_resolver.TPUClusterResolver.

  Raises:
    PipelineError: no TPU given, the name does not resolve, or the TPU does not answer.
  """
  name, source = tpu_name(tpu)
  if not name:
    raise PipelineError('--use_tpu needs a TPU, and none was given: tried %s. Pass --tpu=NAME '
                        '(or grpc://host:8470).' % source)
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
