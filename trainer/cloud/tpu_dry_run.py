"""`--mode=dry_run`: builds the real `use_tpu=True` training graph of a job for a Cloud TPU slice on
a machine without one, and reports what TPUEstimator decided on the host.

TPUEstimator learns a slice's shape from one function of TensorFlow's TPU support
(`tpu_system_metadata._query_tpu_system_metadata`, private). While the dry run builds its graphs
that function answers with the devices of the simulated slice (`TOPOLOGIES`), so TPUEstimator
calls the input_fn once per host with params['context'], builds the infeed enqueues, shards the
model_fn over the cores and builds the cross-replica sums and the host_call outfeed, exactly as
on the slice. Nothing runs on a TPU: a hook stops each job before its session starts.

The report (<model_dir>/dry_run.json): the slice; each host's training input (the files it
reads, or that it deals out records); what crosses the infeed per step; the ops inside the TPU
computation that XLA cannot compile; and the evaluation: refused where TF 1.x cannot evaluate on
the slice, else its graph and each host's eval examples, counted by running that host's recorded
eval input_fn call again over the real data.
For the last, the XLA CPU JIT's kernel registrations of the installed wheel stand in for the TPU
compiler's (which registers a few ops more or fewer): a proxy, not a TPU compile.
"""

import collections
import contextlib
import dataclasses
import shutil
import tempfile

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
    device = session_lib._DeviceAttributes  # pylint: disable=protected-access
    devices = []
    for host in range(num_hosts):
      prefix = '/job:tpu_worker/replica:0/task:%d/device:' % host
      devices.append(device(prefix + 'CPU:0', 'CPU', 0, 0))
      for core in range(num_cores // num_hosts):
        devices.append(device(prefix + 'TPU:%d' % core, 'TPU', 0, 0))
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


def tpu_computation_nodes(graph):
  """The nodes of the TPU computation in `graph`: those marked `_tpu_replicate` and, on TF 2.x,
  every node of the functions they call (the training loop is a functional While whose body
  holds the model; nodes inside functions carry no marks)."""
  graph_def = graph.as_graph_def()
  functions = {f.signature.name: f for f in graph_def.library.function}
  found = [n for n in graph_def.node if '_tpu_replicate' in n.attr]
  pending, seen = list(found), set()
  while pending:
    node = pending.pop()
    for value in node.attr.values():
      names = [value.func.name] if value.HasField('func') else [f.name for f in value.list.func]
      for name in names:
        if name in functions and name not in seen:
          seen.add(name)
          found.extend(functions[name].node_def)
          pending.extend(functions[name].node_def)
  return found


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
  """Sorted descriptions of the ops among `nodes` (`tpu_computation_nodes`) that the XLA CPU JIT
  cannot compile, or whose outputs have a dtype a TPU cannot hold."""
  compilable = _xla_compilable_ops()
  found = set()
  for node in nodes:
    if node.op in _STRUCTURAL_OPS:
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


def capture_graph(run, hooks_arg='hooks'):
  """The graph that `run(hooks=[...])` (an Estimator's train or evaluate) builds, stopped before
  its session starts.

  Raises:
    PipelineError: `run` returned without building a session.
  """
  try:
    run(**{hooks_arg: [_StopBeforeSession()]})
  except _GraphBuilt as built:
    return built.args[0]
  raise PipelineError('the dry run did not capture the graph.')


def _recording(input_fn, calls):
  """`input_fn` that records each call's per-core batch and params['context'] deployment."""
  def recording_input_fn(params):
    context = params.get('context')
    calls.append({'batch_size': params['batch_size'],
                  'deployment': context and tuple(context.current_input_fn_deployment())})
    return input_fn(params)
  return recording_input_fn


class _ReplayedContext(object):
  """params['context'] of a recorded input_fn call, for running that host's input again."""

  def __init__(self, deployment):
    self._deployment = deployment

  def current_input_fn_deployment(self):
    return self._deployment


def _replay_eval_input(config, call):
  """Runs one recorded eval input_fn call over the whole eval split; returns (real examples,
  padded examples, per-core batches)."""
  input_fn = input_fn_lib.input_fn_builder(config.data, is_training=False,
                                           global_batch_size=config.eval_batch_size)
  params = {'batch_size': call['batch_size']}
  if call['deployment']:
    params['context'] = _ReplayedContext(call['deployment'])
  real = padded = batches = 0
  with tf.Graph().as_default():
    features, _ = tf.data.make_one_shot_iterator(input_fn(params)).get_next()
    with tf.Session() as sess:
      while True:
        try:
          mask = sess.run(features['mask'])
        except tf.errors.OutOfRangeError:
          break
        real += int(mask.sum())
        padded += int((mask == 0).sum())
        batches += 1
  return real, padded, batches


def _host(call):
  """(host_id, num_hosts) of a recorded call (0, 1 without params['context'])."""
  return tuple(call['deployment'][1:3]) if call['deployment'] else (0, 1)


def _train_report(config, num_hosts, num_cores):
  """The training graph: one input_fn call per host, what each reads, the infeed and the ops."""
  calls = []
  with simulated_slice(num_hosts, num_cores):
    estimator = estimator_lib.build_estimator(config, tpu_master=SIMULATED_MASTER)
    train_input_fn = _recording(estimator_lib.input_fns(config, estimator)[0], calls)
    graph = capture_graph(lambda hooks: estimator.train(train_input_fn, max_steps=1, hooks=hooks))
  nodes, tpu_nodes = _nodes(graph), tpu_computation_nodes(graph)
  per_host = []
  for call in sorted(calls, key=_host):
    host_id, hosts = _host(call)
    host = {'host_id': host_id, 'num_hosts': hosts, 'per_core_batch_size': call['batch_size']}
    if not config.data.fake_data:
      host['train_files'], host['train_split'] = records.host_files(
          config.data.file_pattern(True), host_id, hosts)
    per_host.append(host)
  return {
      'per_host': per_host, 'input_fn_calls': len(calls), 'infeed': infeed_report(nodes),
      'cross_replica_sums': sum(1 for n in nodes if n.op == 'CrossReplicaSum'),
      'tpu_ops': len(tpu_nodes), 'unsupported_ops': unsupported_ops(tpu_nodes),
  }


def _evaluation_report(config, num_hosts, num_cores):
  """Whether the job can evaluate on this slice (`estimator.check_tpu_evaluation` for
  --mode=train_and_eval) and, if it can, its evaluation graph and what each host's eval input
  reads: every eval example exactly once across the hosts, the same number of batches each."""
  report = {'on_tpu': config.eval_on_tpu, 'eval_steps': config.eval_steps}
  try:
    estimator_lib.check_tpu_evaluation(dataclasses.replace(config, mode='train_and_eval'),
                                       num_hosts)
  except PipelineError as e:
    report['refused'] = str(e)
    return report
  calls = []
  with simulated_slice(num_hosts, num_cores):
    estimator = estimator_lib.build_estimator(config, tpu_master=SIMULATED_MASTER)
    eval_input_fn = _recording(estimator_lib.input_fns(config, estimator)[1], calls)
    graph = capture_graph(lambda hooks: estimator.evaluate(
        eval_input_fn, steps=config.eval_steps, hooks=hooks))
  tpu_nodes = tpu_computation_nodes(graph)
  report.update(tpu_ops=len(tpu_nodes), unsupported_ops=unsupported_ops(tpu_nodes),
                infeed=infeed_report(_nodes(graph)))
  if config.data.fake_data:
    return report
  per_host, batches = [], set()
  for call in sorted(calls, key=_host):
    real, padded, host_batches = _replay_eval_input(config, call)
    per_host.append({'host_id': _host(call)[0], 'eval_examples': real, 'eval_padding': padded,
                     'eval_batches': host_batches})
    batches.add(host_batches)
  # Each step dequeues one per-core batch for every core of the host (on the CPU: one batch).
  replicas_per_host = num_cores // num_hosts if config.eval_on_tpu else 1
  report.update(per_host=per_host, eval_examples_read=sum(h['eval_examples'] for h in per_host),
                num_eval_examples=config.data.num_eval_examples,
                batches_match_eval_steps=batches == {config.eval_steps * replicas_per_host})
  return report


def dry_run(config, topology):
  """Builds the training and evaluation graphs of `config` for the slice `topology` and checks
  what each host's input reads. The Estimators work in a scratch directory: the job's model_dir
  gets only the report.

  Args:
    config: `trainer.run_config.Config` with use_tpu and num_cores of the slice.
    topology: a key of TOPOLOGIES.

  Returns:
    the report dict (the driver writes it to <model_dir>/dry_run.json).

  Raises:
    PipelineError: an unknown topology, or a graph that cannot be built.
  """
  num_hosts, num_cores = slice_shape(topology)
  scratch = tempfile.mkdtemp(prefix='dry-run-')
  try:
    scratch_config = dataclasses.replace(
        config, model_dir=scratch, model=dataclasses.replace(config.model, model_dir=scratch))
    report = {
        'topology': topology, 'num_hosts': num_hosts, 'num_cores': num_cores,
        'tensorflow_version': tf.__version__, 'model': config.model.model,
        'precision': config.model.precision,
        'per_core_batch_size': config.train_batch_size // num_cores,
    }
    report.update(_train_report(scratch_config, num_hosts, num_cores))
    report['evaluation'] = _evaluation_report(scratch_config, num_hosts, num_cores)
  finally:
    shutil.rmtree(scratch, ignore_errors=True)
  logging.info('dry run on %s: %d hosts, %d cores, infeed %s, %d unsupported ops', topology,
               num_hosts, num_cores, report['infeed'], len(report['unsupported_ops']))
  return report
