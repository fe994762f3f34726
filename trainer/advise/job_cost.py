"""What one training step of a job costs, read from the job's real training graph: each op's
floating-point operations and bytes, the bytes of weights, optimizer state and activations, and
the infeed.

The graph is the model_fn's train op on synthetic input of the job's shapes (the graph
`trainer.benchmark model --path=session` runs), built and never run. FLOPs are TensorFlow's
profiler count per op (`tf.profiler`, 'float_ops', scope view: each op with a registered count,
forward and backward convolutions and matmuls included; a multiply-add counts 2), the count
`trainer.benchmark profile` reports. An op's bytes are its float inputs and outputs at their
static shapes: what it reads and writes when nothing is fused (TensorFlow's executor on a CPU or
GPU); step_model.py decides what fusion saves on a TPU.
"""

import collections

import numpy as np
import tensorflow.compat.v1 as tf

from trainer.advise import shape_probe
from trainer.benchmark import model_bench
from trainer.errors import PipelineError

OpCost = collections.namedtuple('OpCost', 'type flops bytes signature', defaults=(None,))
JobCost = collections.namedtuple(
    'JobCost', 'name batch_size ops flops_source weight_bytes state_bytes activation_bytes '
    'heavy_output_bytes infeed_bytes_per_step')
JobCost.__doc__ = """One training step of a job, at its global batch size.

  name: str, what the job is (network and sizes).
  batch_size: int, examples per step (all devices together).
  ops: tuple of OpCost (type str, flops float, bytes int, signature str or None): every op a
    step runs (the train op's inputs, forward, backward and the optimizer's update), none of the
    input pipeline's. A convolution's or matmul's signature names its shapes and attributes
    (shape_probe.signature: what this host's timing of it is cached by); None for other ops.
  flops_source: str, where the FLOP counts come from.
  weight_bytes: int, the trainable variables.
  state_bytes: int, the other float variables: optimizer slots, batch norm's moving statistics.
  activation_bytes: int, the float outputs of the forward ops at this batch size, an upper bound
    of what the backward pass keeps when nothing is fused.
  heavy_output_bytes: int, the float outputs of the forward convolutions and matmuls alone, what
    a fused (XLA) program keeps besides one normalized copy of each.
  infeed_bytes_per_step: int, the step's input tensors as the model_fn receives them.
"""
# Convolutions and matmuls: the MXU / tensor-core / oneDNN kernels whose efficiency the target
# table gives; every other op is elementwise or a reduction (step_model.py).
HEAVY_OPS = ('Conv2D', 'Conv2DBackpropInput', 'Conv2DBackpropFilter', 'DepthwiseConv2dNative',
             'DepthwiseConv2dNativeBackpropInput', 'DepthwiseConv2dNativeBackpropFilter',
             'MatMul', 'BatchMatMul', 'BatchMatMulV2', 'BatchMatMulV3', 'Conv3D', 'Einsum')
FLOPS_SOURCE = 'TensorFlow profiler (tf.profiler float_ops) of the job\'s train graph'
_GRADIENT_SCOPE = 'gradients'
# Ops that run no kernel worth counting in a step (graph plumbing, variable handles, constants).
_FREE = ('Const', 'VarHandleOp', 'VariableV2', 'NoOp', 'Placeholder', 'IteratorGetNext',
         'IteratorV2', 'OneShotIterator', 'MakeIterator', 'AnonymousIteratorV2')
# Ops that hand a tensor on without touching its bytes (views, control-flow plumbing): they cost
# a dispatch, no memory traffic.
_VIEWS = ('Identity', 'Reshape', 'StopGradient', 'Snapshot', 'ReadVariableOp', 'Enter', 'Exit',
          'Merge', 'Switch', 'NextIteration', 'LoopCond', 'RefEnter', 'RefExit', 'RefMerge',
          'RefSwitch', 'RefNextIteration', 'ExpandDims', 'Squeeze')
# TF 1.15's reference variables are float inputs and outputs, counted as such; TF 2.x's resource
# variables are handles, their bytes counted by _variable_passes.


def _variable_passes(op_type):
  """How often an op that takes a resource variable passes over all of it: an optimizer's
  dense update (ResourceApply*, its slots too, each an input) and AssignAdd/Sub read and write
  it; a plain assignment writes it; a read is a view (the tensor is shared, not copied); a
  gather, a scatter or a sparse update touches only the rows its float inputs count."""
  if op_type == 'ReadVariableOp' or op_type.startswith(('ResourceGather', 'ResourceScatter',
                                                         'ResourceSparse')):
    return 0
  return 1 if op_type == 'AssignVariableOp' else 2
_NOT_ACTIVATIONS = _FREE + ('ReadVariableOp', 'Identity', 'Assign', 'AssignVariableOp', 'Shape',
                            'Reshape')


def flops_per_step(cost):
  return sum(op.flops for op in cost.ops)


def _bytes(tensor):
  count = tensor.shape.num_elements()
  return 0 if count is None else count * tensor.dtype.size


def _is_float(tensor):
  return tensor.dtype.base_dtype in (tf.float16, tf.bfloat16, tf.float32, tf.float64)


def _variable_bytes(handle):
  """The bytes of the resource variable `handle` points to (TF 2.x's variables: an op reads or
  updates it through the handle, whose own dtype is `resource`), 0 where unknown."""
  op = handle.op
  while op.type in ('Identity', 'Enter') and op.inputs:
    op = op.inputs[0].op
  if op.type != 'VarHandleOp':
    return 0
  shape = tf.TensorShape(op.get_attr('shape'))
  if not shape.is_fully_defined():
    return 0
  return shape.num_elements() * tf.as_dtype(op.get_attr('dtype')).size


def _constant(tensor):
  """`tensor`'s value where the graph fixes it (numpy), else None: a constant, or the static
  shape a Shape or ShapeN op reads (the gradients' input_sizes and filter_sizes)."""
  value = tf.get_static_value(tensor)
  if value is None and tensor.op.type == 'ShapeN':
    source = tensor.op.inputs[tensor.value_index]
    if source.shape.is_fully_defined():
      value = np.array(source.shape.as_list(), dtype=tensor.dtype.as_numpy_dtype)
  return value


def _reachable(outputs):
  """The ops `outputs` depend on, through data and control inputs."""
  seen, stack = set(), [t.op if hasattr(t, 'op') else t for t in outputs]
  while stack:
    op = stack.pop()
    if op in seen:
      continue
    seen.add(op)
    stack.extend(t.op for t in op.inputs)
    stack.extend(op.control_inputs)
  return seen


def _op_flops(graph):
  """op name -> its FLOPs, from the profiler's scope view (each op once)."""
  options = tf.profiler.ProfileOptionBuilder.float_operation()
  options['output'] = 'none'
  try:
    root = tf.profiler.profile(graph, cmd='scope', options=options)
  except (AttributeError, ValueError, tf.errors.OpError) as e:
    raise PipelineError('TensorFlow\'s profiler cannot count this graph\'s FLOPs: %s' % e)
  flops, stack = {}, [root]
  while stack:
    node = stack.pop()
    if node.float_ops:
      flops[node.name] = float(node.float_ops)
    stack.extend(node.children)
  return flops


def from_config(config, name):
  """The JobCost of `config`'s training step (a `trainer.run.run_config.Config` with
  fake_data=True and the job's train_batch_size). A recurrent network's loop runs once per token
  (`max_seq_length` times, forward and backward).

  Raises:
    PipelineError: the profiler counts no FLOPs in the graph.
  """
  return from_graph(lambda: model_bench.build_train_op(config), config.train_batch_size, name,
                    loop_trips=config.data.max_seq_length or 1)


def _in_loop(op):
  # TensorFlow's own record of the while loop an op belongs to (graph-mode control flow v1).
  return op._get_control_flow_context() is not None  # pylint: disable=protected-access


def from_graph(build, batch_size, name, loop_trips=1):
  """The JobCost of the train op `build()` makes in a new default graph, `batch_size` examples
  per step; each op inside a while loop counted `loop_trips` times.

  The graph is built with TensorFlow's version-1 control flow, whose loop bodies are ops of the
  graph itself (version 2 hides them in functions the profiler does not read); it is only
  counted, never run.

  Raises:
    PipelineError: the profiler counts no FLOPs in the graph.
  """
  was_v2 = tf.control_flow_v2_enabled()
  tf.disable_control_flow_v2()  # a process-wide switch: restored below
  try:
    return _from_graph(build, batch_size, name, loop_trips)
  finally:
    if was_v2:
      tf.enable_control_flow_v2()


def _from_graph(build, batch_size, name, loop_trips):
  with tf.Graph().as_default() as graph:
    train_op = build()
    flops = _op_flops(graph)
    if not flops:
      raise PipelineError('TensorFlow\'s profiler counted no FLOPs in the training graph of %s.'
                          % name)
    step_ops = _reachable([train_op])
    ops = []
    for op in step_ops:
      if op.type in _FREE:
        continue
      moved = 0 if op.type in _VIEWS else sum(
          _bytes(t) for t in list(op.inputs) + list(op.outputs) if _is_float(t)) + sum(
              _variable_bytes(t) * _variable_passes(op.type) for t in op.inputs
              if t.dtype == tf.resource)
      cost = OpCost(op.type, flops.get(op.name, 0.0), moved,
                    shape_probe.signature(op, _constant) if op.type in HEAVY_OPS else None)
      ops.extend([cost] * (loop_trips if _in_loop(op) else 1))
    ops = tuple(sorted(ops, key=lambda o: -o.flops))
    losses = tf.get_collection(tf.GraphKeys.LOSSES)
    forward = _reachable(losses) if losses else set()
    forward = [op for op in forward if op.type not in _NOT_ACTIVATIONS and
               not op.name.startswith(_GRADIENT_SCOPE)]
    activations = sum(_bytes(t) for op in forward for t in op.outputs if _is_float(t))
    heavy_outputs = sum(_bytes(t) for op in forward if op.type in HEAVY_OPS
                        for t in op.outputs if _is_float(t))
    trainable = tf.trainable_variables()
    # By identity: TF 2.x's Variable.__eq__ consults the eager context on every call, and the
    # list's `in` made InceptionV3's count about 2 s longer (210,000 comparisons).
    trainable_ids = {id(v) for v in trainable}
    infeed = sum(_bytes(t) for op in step_ops if op.type == 'IteratorGetNext'
                 for t in op.outputs)
    return JobCost(
        name=name, batch_size=batch_size, ops=ops, flops_source=FLOPS_SOURCE,
        weight_bytes=sum(_bytes(v) for v in trainable),
        state_bytes=sum(_bytes(v) for v in tf.global_variables()
                        if id(v) not in trainable_ids and _is_float(v)),
        activation_bytes=activations, heavy_output_bytes=heavy_outputs,
        infeed_bytes_per_step=infeed)
