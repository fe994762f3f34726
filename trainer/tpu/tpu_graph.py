"""What a TPUEstimator graph holds: the nodes of its TPU computation, the ops among them XLA
cannot compile, what crosses the infeed, and capturing an Estimator's graph before its session
starts (`trainer.run.dry_run` and the tests read graphs this way).

For the ops, the XLA CPU JIT's kernel registrations of the installed wheel stand in for the TPU
compiler's (which registers a few ops more or fewer): a proxy, not a TPU compile.
"""

import collections
import functools

import tensorflow.compat.v1 as tf
from tensorflow.python.framework import kernels

from trainer.errors import PipelineError

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


def graph_nodes(graph):
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
