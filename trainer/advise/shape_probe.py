"""This host's time for each convolution and matmul of a job, shape by shape: every distinct
heavy op of the job's training graph (forward, input gradient, filter gradient: job_cost.py's
`signature`) rebuilt alone with its own attributes and input shapes, and timed here. The median
of several timings, cached per host, so two predictions of one command agree.

A single probe convolution's rate (host_probe.py) prices ResNet-18's small late-stage maps and
InceptionV3's mixed shapes at the rate of one mid-sized 3x3 convolution: 1.7-2.6x too fast on a
2-vCPU Zen 5 (BENCHMARKS.md, "Will a TPU help?"). oneDNN's and Eigen's speed depends on the
shape, which only timing the shape tells.

How one shape is timed: the op alone on variables of its input shapes, one session.run at a
time, less an empty session.run: the median of `_REPEATS` after a warm-up (an op estimated
under 20 microseconds: a chain of copies per run). A chain of copies on the same inputs for every op,
tried first, ran InceptionV3's shapes 22% faster than this (the inputs stay in the caches), and
predicted its step 33-36% fast (BENCHMARKS.md, "Will a TPU help?").
Grappler's rewrites are off; TensorFlow's oneDNN rewrite, a graph pass of its own, still runs.
An op whose arithmetic would take over `_MAX_PROBE_SECONDS` is timed at a smaller batch and
scaled by the batch (the largest ResNet-50 convolutions at batch 1024 take seconds each on two
cores); an Einsum, which has no batch this knows, is timed whole.

Each shape is timed once per host: its seconds are kept in the probe cache (probe_cache.py).
"""

import json
import math
import statistics
import time

from absl import logging
from google.protobuf import text_format
import tensorflow.compat.v1 as tf

from trainer.advise import probe_cache

_REPEATS = 7
_MAX_PROBE_SECONDS = 0.05  # estimated per op: larger ones are timed at a smaller batch
# The inputs of each convolution that carry the batch (a tensor's first dimension, or the first
# value of input_sizes): the images, the output gradient; never the filter or filter_sizes.
_BATCH_INPUTS = {'Conv2D': (0,), 'Conv2DBackpropInput': (0, 2), 'Conv2DBackpropFilter': (0, 2),
                 'DepthwiseConv2dNative': (0,), 'DepthwiseConv2dNativeBackpropInput': (0, 2),
                 'DepthwiseConv2dNativeBackpropFilter': (0, 2), 'Conv3D': (0,)}
_BATCHED_MATMULS = ('BatchMatMul', 'BatchMatMulV2', 'BatchMatMulV3')
# An op under this (estimated) is timed as a chain of copies, up to _MAX_COPIES, long enough to
# rise above session.run's jitter; a chain on the same inputs runs faster than the op alone (its
# inputs stay in the caches), which matters little at this size.
_CHAIN_BELOW_SECONDS = 2e-5
_MAX_COPIES = 20
# measure()'s answer where no shape is timed (trainer.advise --notime_shapes).
NOT_TIMED = {'seconds': {}, 'timed': 0, 'cached': 0, 'failed': 0, 'probe_seconds': 0.0}


def signature(op, constant_value):
  """The JSON text that names `op` (a tf.Operation, a convolution or matmul) by what decides its
  time: its type, its inputs' dtypes and static shapes (and the values of its integer inputs,
  e.g. Conv2DBackpropInput's input_sizes) and its attributes. None when a shape is not static.

  `constant_value(tensor)`: the tensor's constant value (numpy) or None."""
  inputs = []
  for tensor in op.inputs:
    shape = tensor.shape.as_list() if tensor.shape.dims is not None else None
    if shape is None or None in shape:
      return None
    value = None
    if tensor.dtype.base_dtype.is_integer:
      value = constant_value(tensor)
      if value is None:
        return None
      value = value.tolist()
    inputs.append([tensor.dtype.base_dtype.name, shape, value])
  attrs = {name: text_format.MessageToString(value, as_one_line=True)
           for name, value in op.node_def.attr.items() if not name.startswith('_')}
  return json.dumps({'op': op.type, 'inputs': inputs, 'attrs': attrs}, sort_keys=True)


def scaled_spec(spec, factor):
  """`spec` (a parsed signature: {'op', 'inputs': [[dtype, shape, value or None], ...], 'attrs'})
  with its batch divided by `factor` (an int >= 1): a convolution's batch (the first dimension in
  NHWC and NCHW alike, and input_sizes' first value), a batched matmul's leading batch, a
  MatMul's larger output dimension; another op (Einsum) as it is. Returns (spec, the factor
  actually applied, a float >= 1: the op's time at the new spec times it is the original's).""" 
  inputs = [list(i) for i in spec['inputs']]
  if spec['op'] in _BATCH_INPUTS:
    carriers = _BATCH_INPUTS[spec['op']]
    first = inputs[carriers[0]]
    batch = (first[2] if first[2] is not None else first[1])[0]
    smaller = max(1, batch // factor)
    for index in carriers:  # a tensor's shape, or the value of an input_sizes
      slot = 2 if inputs[index][2] is not None else 1
      inputs[index][slot] = [smaller] + inputs[index][slot][1:]
    return dict(spec, inputs=inputs), batch / float(smaller)
  if spec['op'] in _BATCHED_MATMULS:  # a shared leading batch dimension, where both have it
    shapes = [i[1] for i in inputs]
    if all(len(shape) >= 3 for shape in shapes) and shapes[0][0] == shapes[1][0]:
      batch = shapes[0][0]
      smaller = max(1, batch // factor)
      for i in inputs:
        i[1] = [smaller] + i[1][1:]
      return dict(spec, inputs=inputs), batch / float(smaller)
    return spec, 1.0
  if spec['op'] == 'MatMul':
    # a is [M, K] (or [K, M] transposed), b [K, N] (or [N, K]): M or N, whichever is larger.
    a, b = inputs[0][1], inputs[1][1]
    transposed = [spec['attrs'].get(name) == 'b: true' for name in ('transpose_a', 'transpose_b')]
    m_index, n_index = (1 if transposed[0] else 0), (0 if transposed[1] else 1)
    which, index = (0, m_index) if a[m_index] >= b[n_index] else (1, n_index)
    size = inputs[which][1][index]
    smaller = max(1, size // factor)
    inputs[which][1] = [smaller if d == index else s for d, s in enumerate(inputs[which][1])]
    return dict(spec, inputs=inputs), size / float(smaller)
  return spec, 1.0


def _build(spec, copies):
  """`copies` copies of the op `spec` describes, chained by control dependencies, on variables
  of its input shapes (integer inputs as constants), in the default graph; returns the last (a
  tf.Operation)."""
  inputs = []
  for dtype, shape, value in spec['inputs']:
    if value is not None:
      inputs.append(tf.constant(value, dtype=dtype))
    else:
      inputs.append(tf.convert_to_tensor(tf.Variable(
          tf.random.uniform(shape, -1.0, 1.0, dtype=dtype), name='probe_input')))
  attrs = {name: text_format.Parse(text, tf.AttrValue()) for name, text in spec['attrs'].items()}
  graph, last = tf.get_default_graph(), None
  for _ in range(copies):
    with graph.control_dependencies([last] if last is not None else []):
      last = graph.create_op(spec['op'], inputs, attrs=attrs)
  return last


def _time(spec, session_config, copies):
  """Median seconds of one copy of `spec`'s op: `_REPEATS` session.runs of a chain of `copies`,
  each less the median of as many empty session.runs, divided by `copies`."""
  config = tf.ConfigProto()
  if session_config is not None:
    config.CopyFrom(session_config)
  # Grappler would fold a chain's copies into one; the oneDNN rewrite is a graph pass of its own.
  config.graph_options.rewrite_options.disable_meta_optimizer = True
  with tf.Graph().as_default():
    op = _build(spec, copies)
    empty = tf.no_op()
    with tf.Session(config=config) as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(op)  # warm-up: allocation, kernel choice
      ran, nothing = [], []
      for _ in range(_REPEATS):
        began = time.perf_counter()
        sess.run(op)
        ran.append(time.perf_counter() - began)
        began = time.perf_counter()
        sess.run(empty)
        nothing.append(time.perf_counter() - began)
  return (statistics.median(ran) - statistics.median(nothing)) / copies


def measure(cost, flops_per_second, session_config=None):
  """This host's seconds per op for every distinct heavy-op signature in `cost`.

  Args:
    cost: a job_cost.JobCost; its ops' `signature`s name the shapes.
    flops_per_second: this host's rough rate (host_probe's convolution, FLOP/s): which ops are
      timed at a smaller batch, which as a chain.
    session_config: the tf.ConfigProto whose threads the job runs with (None: TensorFlow's).

  Returns:
    {'seconds': {signature: seconds per op}, 'timed': how many were timed now, 'cached': how many
     came from the probe cache (probe_cache.py), 'failed': how many could not be timed here
     (logged; the step model prices them at the probe's rates), 'probe_seconds': the time this
     took}. A shape that times at or below zero (under the timer's resolution) is left out of
     'seconds' (priced at the probe's rates too) and cached as such (null), so that a second run
     reads the same answer. Never raises for a shape: a user's network may hold an op this CPU
     cannot run alone.
  """
  began = time.perf_counter()
  key = probe_cache.host_key(session_config)
  known = probe_cache.read(key, 'shapes')
  flops = {op.signature: op.flops for op in cost.ops if op.signature}
  seconds, timed, unresolved, failed = {}, {}, {}, 0
  for sig, op_flops in sorted(flops.items()):
    if sig in known and known[sig] is None:
      continue  # below this host's timer resolution when timed before: the probe's rates
    if isinstance(known.get(sig), float):
      seconds[sig] = known[sig]
      continue
    estimate = op_flops / flops_per_second
    spec, factor = json.loads(sig), 1.0
    if estimate > _MAX_PROBE_SECONDS:
      spec, factor = scaled_spec(spec, int(math.ceil(estimate / _MAX_PROBE_SECONDS)))
    copies = (int(min(_MAX_COPIES, math.ceil(_CHAIN_BELOW_SECONDS / max(estimate, 1e-9))))
              if estimate < _CHAIN_BELOW_SECONDS else 1)
    try:
      value = _time(spec, session_config, copies) * factor
    except (tf.errors.OpError, ValueError, KeyError, TypeError) as e:
      logging.warning('Could not time %s alone on this host (%s: %s): priced at the probe\'s '
                      'rate.', spec['op'], type(e).__name__, str(e).splitlines()[0][:200])
      failed += 1
      continue
    if value > 0:
      seconds[sig] = timed[sig] = value
    else:
      # Below the timer's resolution: left to the probe's rate, never cached as free, but cached
      # as unresolved, or a second run could time it above zero and advise otherwise.
      unresolved[sig] = None
  if timed or unresolved:
    probe_cache.update(key, 'shapes', dict(timed, **unresolved))
  return {'seconds': seconds, 'timed': len(timed), 'cached': len(seconds) - len(timed),
          'failed': failed, 'probe_seconds': time.perf_counter() - began}
