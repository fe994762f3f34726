"""`--mode=dry_run`: builds the real `use_tpu=True` training graph of a job for a Cloud TPU slice on
a machine without one, and reports what TPUEstimator decided on the host.

TPUEstimator learns a slice's shape from one function of TensorFlow's TPU support
(`tpu_system_metadata._query_tpu_system_metadata`, private). While the dry run builds its graphs
that function answers with the devices of the simulated slice (`TOPOLOGIES`), so TPUEstimator
calls the input_fn once per host with params['context'], builds the infeed enqueues, shards the
model_fn over the cores and builds the cross-replica sums and the host_call outfeed, exactly as
on the slice. Nothing runs on a TPU: a hook stops each job before its session starts.

The report (<model_dir>/dry_run.json): the slice, each host's input (the training files it reads,
the eval examples it evaluates, counted by running its eval input_fn over the real data), what
crosses the infeed per step, and the ops inside the TPU computation that XLA cannot compile.
For the last, the XLA CPU JIT's kernel registrations of the installed wheel stand in for the TPU
compiler's (which registers a few ops more or fewer): a proxy, not a TPU compile.
"""

import collections
import contextlib
import dataclasses

from absl import logging
import tensorflow.compat.v1 as tf
from tensorflow.python.client import session as session_lib
from tensorflow.python.framework import kernels
from tensorflow.python.tpu import tpu_system_metadata

from trainer import estimator as estimator_lib
from trainer.data import input_fn as input_fn_lib
from trainer.data import records
from trainer.errors import PipelineError

# Slice name -> (hosts, TPU devices TPUEstimator sees). A v4 chip's two TensorCores form one
# device (megacore), so v4-8 is 4 devices on one host.
TOPOLOGIES = {
    'v2-8': (1, 8), 'v2-32': (4, 32), 'v3-8': (1, 8), 'v3-32': (4, 32), 'v3-128': (16, 128),
    'v4-8': (1, 4), 'v4-32': (4, 16),
}
REPORT_FILE = 'dry_run.json'
# The simulated slice's master: never contacted (no session is created).
SIMULATED_MASTER = 'grpc://127.0.0.1:8470'
# dtypes a TPU computation cannot hold.
_UNSUPPORTED_DTYPES = (tf.string, tf.float64, tf.complex64, tf.complex128, tf.resource.base_dtype)
# Graph plumbing XLA handles without kernels (v1 control flow, placeholders of the rewrite).
_STRUCTURAL_OPS = {'Enter', 'Exit', 'Merge', 'Switch', 'NextIteration', 'LoopCond', 'NoOp',
                   'Identity', 'IdentityN', 'Placeholder', 'Const', 'ReadVariableOp',
                   'VarHandleOp', 'AssignVariableOp', 'While', 'StatelessWhile', 'If',
                   'StatelessIf', 'PartitionedCall', 'StatefulPartitionedCall'}


class _GraphBuilt(Exception):
  """Raised by _StopBeforeSession with the finished graph."""


class _StopBeforeSession(tf.train.SessionRunHook):
  """Ends a train/evaluate call once its graph is complete, before any session starts."""

  def begin(self):
    raise _GraphBuilt(tf.get_default_graph())


def slice_shape(topology):
  """(num_hosts, num_cores) of a slice name in TOPOLOGIES.

  Raises:
    PipelineError: an unknown name.
  """
  if topology not in TOPOLOGIES:
    raise PipelineError('--tpu_topology=%s is not a slice the dry run knows; use one of %s.'
                        % (topology, ', '.join(sorted(TOPOLOGIES))))
  return TOPOLOGIES[topology]


@contextlib.contextmanager
def simulated_slice(num_hosts, num_cores):
  """While active, TPUEstimator sees a slice of `num_hosts` hosts with `num_cores` TPU cores."""
  def metadata(master_address, cluster_def=None, query_topology=False):
    del master_address, cluster_def, query_topology
    devices = []
    for host in range(num_hosts):
      prefix = '/job:tpu_worker/replica:0/task:%d/device:' % host
      devices.append(session_lib._DeviceAttributes(prefix + 'CPU:0', 'CPU', 0, 0))  # pylint: disable=protected-access
      for core in range(num_cores // num_hosts):
        devices.append(session_lib._DeviceAttributes(prefix + 'TPU:%d' % core, 'TPU', 0, 0))  # pylint: disable=protected-access
    # TPUSystemMetadata since TF 2.x; _TPUSystemMetadata in TF 1.15.
    metadata_type = (getattr(tpu_system_metadata, 'TPUSystemMetadata', None) or
                     tpu_system_metadata._TPUSystemMetadata)  # pylint: disable=protected-access
    return metadata_type(num_cores=num_cores, num_hosts=num_hosts,
                         num_of_cores_per_host=num_cores // num_hosts, topology=None,
                         devices=tuple(devices))

  original = tpu_system_metadata._query_tpu_system_metadata  # pylint: disable=protected-access
  tpu_system_metadata._query_tpu_system_metadata = metadata  # pylint: disable=protected-access
  try:
    yield
  finally:
    tpu_system_metadata._query_tpu_system_metadata = original  # pylint: disable=protected-access


def _nodes(graph):
  """Every node of `graph`, including those inside its functions (TF 2.x builds the TPU loops as
  functional While ops whose bodies live in the function library)."""
  graph_def = graph.as_graph_def()
  return list(graph_def.node) + [n for f in graph_def.library.function for n in f.node_def]


def _xla_compilable_ops():
  """Op types with an XLA CPU JIT kernel in this wheel (registered once XLA has compiled
  something in this process)."""
  with tf.Graph().as_default():
    with tf.Session() as sess:
      sess.run(tf.xla.experimental.compile(lambda x: x + 1.0, [tf.constant(1.0)]))

  def compilable(op_type):
    found = kernels.get_registered_kernels_for_op(op_type).kernel
    return any(k.device_type == 'XLA_CPU_JIT' for k in found) or not any(
        k.device_type == 'CPU' for k in found)  # TPU-only ops have no CPU kernel either
  return compilable


def unsupported_ops(nodes):
  """Sorted descriptions of the ops inside the TPU computation (attribute `_tpu_replicate`) that
  the XLA CPU JIT cannot compile, or whose outputs have a dtype a TPU cannot hold."""
  compilable = _xla_compilable_ops()
  found = set()
  for node in nodes:
    if '_tpu_replicate' not in node.attr or node.op in _STRUCTURAL_OPS:
      continue
    if not compilable(node.op):
      found.add('%s (no XLA kernel)' % node.op)
    for key in ('T', 'dtype', 'out_type', 'Tout', 'SrcT', 'DstT'):
      if key in node.attr and node.attr[key].type and (
          tf.as_dtype(node.attr[key].type) in _UNSUPPORTED_DTYPES):
        found.add('%s (%s)' % (node.op, tf.as_dtype(node.attr[key].type).name))
  return sorted(found)


def infeed_report(nodes):
  """What crosses the infeed: feature dtypes and the bytes of one step summed over all cores."""
  enqueues = [n for n in nodes if n.op == 'InfeedEnqueueTuple']
  dtypes = collections.Counter()
  total = 0
  for node in enqueues:
    for dtype, shape in zip(node.attr['dtypes'].list.type, node.attr['shapes'].list.shape):
      dtype = tf.as_dtype(dtype)
      dtypes[dtype.name] += 1
      elements = 1
      for dim in shape.dim:
        elements *= dim.size
      total += elements * dtype.size
  return {'enqueue_ops': len(enqueues), 'dtypes': sorted(dtypes), 'bytes_per_step': total}


def _build_train_graph(config, calls):
  """The graph of estimator.train on the simulated slice; records each input_fn call."""
  estimator = estimator_lib.build_estimator(config, tpu_master=SIMULATED_MASTER)
  train_input_fn = estimator_lib.input_fns(config, estimator)[0]

  def recording_input_fn(params):
    host_id, num_hosts = input_fn_lib.host_of(params)
    calls.append({'host_id': host_id, 'num_hosts': num_hosts,
                  'per_core_batch_size': params['batch_size']})
    return train_input_fn(params)

  try:
    estimator.train(recording_input_fn, max_steps=1, hooks=[_StopBeforeSession()])
  except _GraphBuilt as built:
    return built.args[0]
  raise PipelineError('the dry run did not capture the training graph.')


def _build_eval_graph(config):
  """The graph of estimator.evaluate on the simulated slice."""
  estimator = estimator_lib.build_estimator(config, tpu_master=SIMULATED_MASTER)
  try:
    estimator.evaluate(estimator_lib.input_fns(config, estimator)[1], steps=config.eval_steps,
                       hooks=[_StopBeforeSession()])
  except _GraphBuilt as built:
    return built.args[0]
  raise PipelineError('the dry run did not capture the evaluation graph.')


def _evaluation_report(config, num_hosts, num_cores):
  """Whether the job can evaluate on this slice (`estimator.check_tpu_evaluation` for
  --mode=train_and_eval) and, if so, what its evaluation graph holds."""
  report = {'on_tpu': config.eval_on_tpu, 'eval_steps': config.eval_steps}
  try:
    estimator_lib.check_tpu_evaluation(dataclasses.replace(config, mode='train_and_eval'),
                                       num_hosts)
  except PipelineError as e:
    report['refused'] = str(e)
    return report
  with simulated_slice(num_hosts, num_cores):
    nodes = _nodes(_build_eval_graph(config))
  report['tpu_ops'] = sum(1 for n in nodes if '_tpu_replicate' in n.attr)
  report['infeed'] = infeed_report(nodes)
  return report


def _eval_examples_per_host(config, host_id, num_hosts, per_core_batch):
  """Runs host `host_id`'s eval input_fn over the whole eval split; returns (real examples,
  padded examples, batches)."""
  context = _HostContext(host_id, num_hosts)
  input_fn = input_fn_lib.input_fn_builder(config.data, is_training=False,
                                           global_batch_size=config.eval_batch_size)
  replicas_per_host = config.num_cores // num_hosts
  real = padded = batches = 0
  with tf.Graph().as_default():
    dataset = input_fn({'batch_size': per_core_batch, 'context': context})
    features, _ = tf.data.make_one_shot_iterator(dataset).get_next()
    with tf.Session() as sess:
      while True:
        try:
          mask = sess.run(features['mask'])
        except tf.errors.OutOfRangeError:
          break
        real += int(mask.sum())
        padded += int((mask == 0).sum())
        batches += 1
  return real, padded, batches // replicas_per_host


class _HostContext(object):
  """Stands in for TPUEstimator's params['context'] of host `host_id` (PER_HOST_V2)."""

  def __init__(self, host_id, num_hosts):
    self._deployment = ('/job:tpu_worker/task:%d/device:CPU:0' % host_id, host_id, num_hosts, 0)

  def current_input_fn_deployment(self):
    return self._deployment


def dry_run(config, topology):
  """Builds the training graph of `config` for the slice `topology` and checks its input.

  Args:
    config: `trainer.run_config.Config` with use_tpu and num_cores of the slice.
    topology: a key of TOPOLOGIES.

  Returns:
    the report dict, also written to <model_dir>/dry_run.json.

  Raises:
    PipelineError: an unknown topology, or a graph that cannot be built.
  """
  num_hosts, num_cores = slice_shape(topology)
  calls = []
  with simulated_slice(num_hosts, num_cores):
    graph = _build_train_graph(config, calls)
  nodes = _nodes(graph)
  per_core_batch = config.train_batch_size // num_cores
  eval_per_core = config.eval_batch_size // num_cores
  per_host = []
  for call in sorted(calls, key=lambda c: c['host_id']):
    host = dict(call)
    if not config.data.fake_data:
      host['train_files'] = records.host_files(config.data.file_pattern(True), call['host_id'],
                                               num_hosts)
      host['eval_examples'], host['eval_padding'], host['eval_steps'] = (
          _eval_examples_per_host(config, call['host_id'], num_hosts, eval_per_core))
    per_host.append(host)
  report = {
      'topology': topology, 'num_hosts': num_hosts, 'num_cores': num_cores,
      'tensorflow_version': tf.__version__, 'model': config.model.model,
      'precision': config.model.precision, 'per_core_batch_size': per_core_batch,
      'per_host': per_host,
      'input_fn_calls': len(calls),
      'infeed': infeed_report(nodes),
      'cross_replica_sums': sum(1 for n in nodes if n.op == 'CrossReplicaSum'),
      'tpu_ops': sum(1 for n in nodes if '_tpu_replicate' in n.attr),
      'unsupported_ops': unsupported_ops(nodes),
      'evaluation': _evaluation_report(config, num_hosts, num_cores),
  }
  if not config.data.fake_data:
    report['eval_examples_read'] = sum(h['eval_examples'] for h in per_host)
    report['num_eval_examples'] = config.data.num_eval_examples
  logging.info('dry run on %s: %d hosts, %d cores, infeed %s, %d unsupported ops', topology,
               num_hosts, num_cores, report['infeed'], len(report['unsupported_ops']))
  return report

