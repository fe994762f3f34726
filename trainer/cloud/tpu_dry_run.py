"""`--mode=dry_run`: builds the real `use_tpu=True` training, evaluation and prediction graphs
of a job for a Cloud TPU slice on a machine without one, and reports what TPUEstimator decided
on the host.

TPUEstimator learns a slice's shape from one function of TensorFlow's TPU support
(`tpu_system_metadata._query_tpu_system_metadata`, private). While the dry run builds its graphs
that function answers with the devices of the simulated slice (`TOPOLOGIES`), so TPUEstimator
calls the input_fn once per host with params['context'], builds the infeed enqueues, shards the
model_fn over the cores and builds the cross-replica sums and the host_call outfeed, exactly as
on the slice. With --use_tpu instead of --tpu_topology, the TPU that --tpu names answers it
itself (it must be reachable). Nothing runs on a TPU: a hook stops each job before its session
starts.

The report (<model_dir>/dry_run.json): the slice; each host's training input (the files it
reads, or that it deals out records); what crosses the infeed per step; the ops inside the TPU
computation that XLA cannot compile; the evaluation: refused where TF 1.x cannot evaluate on
the slice, else its graph and each host's eval examples, counted by running that host's recorded
eval input_fn call again over the real data; and the prediction graph, refused on a slice of
several hosts.
For the ops, the XLA CPU JIT's kernel registrations of the installed wheel stand in for the TPU
compiler's (which registers a few ops more or fewer): a proxy, not a TPU compile.
"""

import collections
import contextlib
import dataclasses
import functools
import shutil
import tempfile
from typing import Optional

from absl import logging
import tensorflow.compat.v1 as tf
from tensorflow.python.client import session as session_lib
from tensorflow.python.framework import kernels
from tensorflow.python.tpu import tpu_system_metadata

from trainer import estimator as estimator_lib
from trainer.cloud import tpu_resolver
from trainer.data import input_fn as input_fn_lib
from trainer.data import predict_input
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


def topology_shape(topology):
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


@functools.lru_cache(maxsize=None)
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


@dataclasses.dataclass(frozen=True)
class _Slice:
  """The slice the graphs are built for: simulated (`topology` in TOPOLOGIES) or the resolved
  TPU of config.tpu (`topology` None: TPUEstimator asks the TPU itself)."""
  name: str
  num_hosts: int
  num_cores: int
  topology: Optional[str] = None

  def active(self):
    if self.topology:
      return simulated_slice(self.num_hosts, self.num_cores)
    return contextlib.nullcontext()

  @property
  def tpu_master(self):
    return SIMULATED_MASTER if self.topology else None  # None: build_estimator resolves config.tpu


def _capture(config, tpu_slice, mode):
  """(graph, recorded input_fn calls) of `mode` ('train', 'eval' or 'predict') of `config` on
  `tpu_slice`, stopped before its session starts."""
  calls = []
  with tpu_slice.active():
    estimator = estimator_lib.build_estimator(config, tpu_master=tpu_slice.tpu_master)
    train_input_fn, eval_input_fn = estimator_lib.input_fns(config, estimator)
    if mode == 'train':
      input_fn = _recording(train_input_fn, calls)
      run = lambda hooks: estimator.train(input_fn, max_steps=1, hooks=hooks)
    elif mode == 'eval':
      input_fn = _recording(eval_input_fn, calls)
      run = lambda hooks: estimator.evaluate(input_fn, steps=config.eval_steps, hooks=hooks)
    else:
      # --mode=predict's input over the eval split's records (fake data: the eval input).
      predict_input_fn = eval_input_fn if config.data.fake_data else (
          estimator_lib.predict_input_fn(config, estimator, predict_input.resolve(
              config.data.file_pattern(False), config.data.modality)))
      input_fn = _recording(predict_input_fn, calls)
      run = lambda hooks: next(estimator.predict(input_fn, hooks=hooks))
    return capture_graph(run), calls


def _train_report(config, tpu_slice):
  """The training graph: one input_fn call per host, what each reads, the infeed and the ops."""
  graph, calls = _capture(config, tpu_slice, 'train')
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


def _graph_report(graph):
  tpu_nodes = tpu_computation_nodes(graph)
  return {'tpu_ops': len(tpu_nodes), 'unsupported_ops': unsupported_ops(tpu_nodes),
          'infeed': infeed_report(_nodes(graph))}


def _evaluation_report(config, tpu_slice):
  """Whether the job can evaluate on this slice (`estimator.check_tpu_evaluation` for
  --mode=train_and_eval) and, if it can, its evaluation graph and what each host's eval input
  reads: every eval example exactly once across the hosts, the same number of batches each."""
  report = {'on_tpu': config.eval_on_tpu, 'eval_steps': config.eval_steps}
  try:
    estimator_lib.check_tpu_evaluation(dataclasses.replace(config, mode='train_and_eval'),
                                       tpu_slice.num_hosts)
  except PipelineError as e:
    report['refused'] = str(e)
    return report
  graph, calls = _capture(config, tpu_slice, 'eval')
  report.update(_graph_report(graph))
  if config.data.fake_data:
    return report
  per_host, batches = [], set()
  for call in sorted(calls, key=_host):
    real, padded, host_batches = _replay_eval_input(config, call)
    per_host.append({'host_id': _host(call)[0], 'eval_examples': real, 'eval_padding': padded,
                     'eval_batches': host_batches})
    batches.add(host_batches)
  # Each step dequeues one per-core batch for every core of the host (on the CPU: one batch).
  replicas_per_host = tpu_slice.num_cores // tpu_slice.num_hosts if config.eval_on_tpu else 1
  report.update(per_host=per_host, eval_examples_read=sum(h['eval_examples'] for h in per_host),
                num_eval_examples=config.data.num_eval_examples,
                batches_match_eval_steps=batches == {config.eval_steps * replicas_per_host})
  return report


def _prediction_report(config, tpu_slice):
  """The prediction graph (`TPUEstimator.predict` on the TPU, fed the eval split's records by
  --mode=predict's input_fn), or
  why the slice cannot predict (`estimator.check_tpu_prediction`). The SavedModel export is built
  for the CPU (export_to_tpu=False) and is not part of it."""
  report = {'on_tpu': True}
  try:
    estimator_lib.check_tpu_prediction(tpu_slice.num_hosts)
  except PipelineError as e:
    report['refused'] = str(e)
    return report
  graph, calls = _capture(config, tpu_slice, 'predict')
  report.update(_graph_report(graph), input_fn_calls=len(calls),
                outfeed_dequeues=sum(1 for n in _nodes(graph) if n.op == 'OutfeedDequeueTuple'))
  return report


def _resolve_slice(config, topology):
  """The _Slice of `topology` (simulated), or of the TPU that config.tpu names (resolved and
  asked for its hosts and cores, as the real job does)."""
  if topology:
    return _Slice(topology, *topology_shape(topology), topology=topology)
  resolver = tpu_resolver.resolve_tpu(config.tpu, config.tpu_zone, config.gcp_project,
                                      timeout=config.tpu_connect_timeout)
  num_hosts, num_cores = tpu_resolver.slice_shape(
      resolver, timeout=max(60.0, config.tpu_connect_timeout))
  return _Slice(resolver.master() or tpu_resolver.LOCAL_TPU, num_hosts, num_cores)


def dry_run(config, topology=None):
  """Builds the training, evaluation and prediction graphs of `config` for a TPU slice and
  checks what each host's input reads. The Estimators work in a scratch directory: the job's
  model_dir gets only the report.

  Args:
    config: `trainer.run_config.Config` with use_tpu (and, for a simulated slice, its num_cores).
    topology: a key of TOPOLOGIES to simulate; None takes the slice of the TPU that config.tpu
      names, which must be reachable (nothing runs on it).

  Returns:
    the report dict (the driver writes it to <model_dir>/dry_run.json).

  Raises:
    PipelineError: an unknown topology, a TPU that cannot be resolved or does not fit the job
      (`estimator.check_tpu_slice`), or a graph that cannot be built.
  """
  tpu_slice = _resolve_slice(config, topology)
  estimator_lib.check_tpu_slice(config, tpu_slice.num_hosts, tpu_slice.num_cores)
  scratch = tempfile.mkdtemp(prefix='dry-run-')
  try:
    scratch_config = dataclasses.replace(
        config, model_dir=scratch, model=dataclasses.replace(config.model, model_dir=scratch))
    report = {
        'topology': tpu_slice.name, 'simulated': bool(topology),
        'num_hosts': tpu_slice.num_hosts, 'num_cores': tpu_slice.num_cores,
        'tensorflow_version': tf.__version__, 'model': config.model.model,
        'precision': config.model.precision,
        'per_core_batch_size': config.train_batch_size // tpu_slice.num_cores,
    }
    report.update(_train_report(scratch_config, tpu_slice))
    report['evaluation'] = _evaluation_report(scratch_config, tpu_slice)
    report['prediction'] = _prediction_report(scratch_config, tpu_slice)
  finally:
    shutil.rmtree(scratch, ignore_errors=True)
  logging.info('dry run on %s: %d hosts, %d cores, infeed %s, %d unsupported ops',
               tpu_slice.name, tpu_slice.num_hosts, tpu_slice.num_cores, report['infeed'],
               len(report['unsupported_ops']))
  return report
