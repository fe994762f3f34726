"""A training step's time on a target, from the job's per-op costs (job_cost.py), the target's
peaks (targets.json) and the host's input rate: a roofline per op, summed.

Each op takes max(FLOPs / (peak x efficiency), bytes / bandwidth): compute-bound or memory-bound
(Williams, Waterman and Patterson, "Roofline", CACM 2009). TensorFlow's executor runs the ops of
a CPU or GPU step one kernel at a time, each with a fixed dispatch cost; XLA (a TPU, or JAX on a
GPU: `fused`) fuses the elementwise ops into the convolutions and matmuls around them, so there
they move no bytes of their own, and a fused GPU program still launches two kernels per
convolution or matmul (the op and its fused epilogue; a TPU's `op_overhead` is 0). Around the
device's time: the host's input pipeline, overlapped with it (tf.data prefetches), and the fixed
cost of each step and of each host round trip (`iterations_per_loop` steps per round trip on a
TPU). A TPU fed over gRPC by a client on another VM (`client_feed_rate` bytes/s per stream,
`client_streams` streams; `client_feed_widening` 4 where the client sends as float32 the images
this pipeline feeds as uint8; `steps_per_round_trip` where its client's loop, not
`iterations_per_loop`, sets the round trips) also waits for the step's input bytes: before the
step where nothing overlaps them (a 2018 Colab notebook's Keras model: its numpy batch rode in
each step's own session.run, tf.contrib.tpu keras_support's TPUFunction.__call__), or beside it
(`client_feed_overlaps`: PyTorch/XLA over XRT, whose loader threads send the next batches while
the device computes). A convolution never takes less than the target's `heavy_op_floor` (this
host's is measured: a small convolution's time; matmuls have no floor). On this host each
convolution and matmul takes its own shape's measured time where shape_probe.py timed it
(`op_seconds`).

  predicted = max(device, input[, feed]) [+ feed] + per-step overhead
              + round trip / iterations_per_loop
  lower     = the same with every heavy op at the target's full peak
  upper     = device + input + feed + overheads, nothing overlapped
(On a CPU the input pipeline shares the cores that compute, so device and input add up there.)

The input's share of the step (time the device waits for input, a client's feed included / step)
is classed as TensorFlow's profiler classes it (op_stats_to_input_pipeline_analysis.cc: under 5%
not input-bound, under 20% moderately, else highly).
"""

import collections

from trainer.advise import job_cost

HEAVY_OPS = job_cost.HEAVY_OPS
MODERATELY_INPUT_BOUND = 0.05
HIGHLY_INPUT_BOUND = 0.20

Prediction = collections.namedtuple(
    'Prediction', 'seconds lower upper device_seconds compute_seconds memory_seconds '
    'input_seconds feed_seconds overhead_seconds binds input_share input_bound')
Prediction.__doc__ = """A step's predicted time on one target, in seconds.

  seconds, lower, upper: the prediction and its bounds.
  device_seconds: the device's part: compute_seconds + memory_seconds + each op's dispatch.
  compute_seconds, memory_seconds: the device time of compute-bound and of memory-bound ops.
  input_seconds: the host's input pipeline for one step (None when not measured).
  feed_seconds: a remote client's feed of the step's input (0 unless the target is so fed).
  overhead_seconds: the fixed costs: op dispatch, per step, per host round trip.
  binds: 'compute', 'memory', 'input', 'feed' or 'overhead': the largest part of the step.
  input_share: the fraction of the step the device waits for input (a client's feed included).
  input_bound: 'no', 'moderately' or 'highly' (the profiler's 5% / 20% rule).
"""


def _device_seconds(cost, target, at_peak=False):
  """(compute-bound seconds, memory-bound seconds, dispatch seconds) of `cost`'s ops on `target`:
  its convolutions and matmuls at their measured rates (this host's `heavy_rates`) or at
  `heavy_efficiency` of the peak, or with `at_peak` at the full peak."""
  peak = target['peak_flops'][target['precision']]
  bandwidth = target['memory_bandwidth']
  fused = target['fused']
  floor = target.get('heavy_op_floor', 0.0)
  measured = None if at_peak else target.get('heavy_rates')
  timed = target.get('op_seconds') or {}
  heavy_rate = peak if at_peak else peak * target['heavy_efficiency']
  compute = memory = 0.0
  for op in cost.ops:
    heavy = op.type in HEAVY_OPS
    if heavy and measured:
      rate = measured['matmul' if 'MatMul' in op.type or op.type == 'Einsum' else 'conv']
    else:
      rate = heavy_rate if heavy else peak
    flops_time = op.flops / rate
    if heavy and 'MatMul' not in op.type and op.type != 'Einsum':
      # A convolution kernel's least time, however small its work (the floor is a measured
      # small convolution's time, which says nothing of a matmul's).
      flops_time = max(flops_time, floor)
    bytes_time = 0.0 if fused and not heavy else op.bytes / bandwidth
    if heavy and op.signature in timed:  # this host's time for this very shape
      # The lower bound takes the faster of it and the untimed price at the peak: a shape may
      # beat the probe's rate (the CNN's 5x5 convolutions do).
      own = timed[op.signature]
      compute += min(own, max(flops_time, bytes_time)) if at_peak else own
      continue
    if flops_time >= bytes_time:
      compute += flops_time
    else:
      memory += bytes_time
  if fused:  # one compiled program: a kernel per convolution or matmul, one per fused epilogue
    kernels = 2 * sum(1 for op in cost.ops if op.type in HEAVY_OPS)
  else:
    kernels = len(cost.ops)
  return compute, memory, kernels * target['op_overhead']


def predict(cost, target, input_rate=None, iterations_per_loop=1):
  """The Prediction of one step of `cost` (a job_cost.JobCost) on `target` (a targets.json
  entry, targets.py), with the host's input pipeline at `input_rate` examples/s on the target's
  host (None: not measured, left out)."""
  compute, memory, dispatch = _device_seconds(cost, target)
  device = compute + memory + dispatch
  device_at_peak = sum(_device_seconds(cost, target, at_peak=True))
  inputs = cost.batch_size / input_rate if input_rate else 0.0
  # A target whose client runs its own loop (steps_per_round_trip) ignores the job's setting.
  loop = target.get('steps_per_round_trip') or iterations_per_loop
  per_step = target['step_overhead'] + target['loop_overhead'] / max(1, loop)
  feed = (cost.infeed_bytes_per_step * target.get('client_feed_widening', 1)
          / (target['client_feed_rate'] * target['client_streams'])
          if target.get('client_feed_rate') else 0.0)
  feed_beside = target.get('client_feed_overlaps', False)
  # On a CPU the input pipeline runs on the cores that compute: the two add up. Elsewhere the
  # device waits only for what takes longer than its own part: the input, or a feed beside it.
  overlap = target['kind'] != 'cpu'
  waits = max(inputs, feed if feed_beside else 0.0)
  before = 0.0 if feed_beside else feed  # a feed nothing overlaps: the device waits for all of it
  serial = per_step + before
  seconds = (max(device, waits) if overlap else device + inputs) + serial
  share = ((max(0.0, waits - device) if overlap else inputs) + before) / seconds
  parts = {'compute': compute, 'memory': memory, 'overhead': dispatch + per_step}
  if before > max(device, waits):
    binds = 'feed'
  elif overlap and waits > device:  # what runs beside the whole device time binds when longer
    binds = 'feed' if feed_beside and feed >= inputs else 'input'
  elif overlap:
    binds = max(parts, key=parts.get)
  else:
    parts['input'] = inputs
    binds = max(parts, key=parts.get)
  return Prediction(
      seconds=seconds,
      lower=(max(device_at_peak, waits) if overlap else device_at_peak + inputs) + serial,
      upper=device + inputs + feed + per_step, device_seconds=device, compute_seconds=compute,
      memory_seconds=memory, input_seconds=inputs if input_rate else None, feed_seconds=feed,
      overhead_seconds=dispatch + per_step, binds=binds, input_share=share,
      input_bound=('highly' if share >= HIGHLY_INPUT_BOUND else
                   'moderately' if share >= MODERATELY_INPUT_BOUND else 'no'))


MAY_NOT_FIT = 'maybe'  # memory_fits' answer between its bounds


def memory_fits(cost, target):
  """(fits, bytes needed per device): weights, their gradients, the optimizer state and the
  activations of the device's share of the batch, against the target's memory per device.

  fits: True when even the most the step can keep fits; False only when even the least does
  not; MAY_NOT_FIT between the two; None for this host, whose RAM this model does not check.
  Unfused (TensorFlow's executor), a step keeps at most every forward output, and at least each
  convolution's and matmul's output (its batch norm's or activation's gradient reads it): which
  of the rest the executor frees early is its allocator's business, so the answer in between is
  "may not fit". Fused (XLA), each convolution's or matmul's output and one normalized copy of
  it, in bfloat16 on a TPU. bytes needed: the most (the upper bound)."""
  fixed = 2 * cost.weight_bytes + cost.state_bytes
  devices = float(target['devices'])
  if target['fused']:
    most = least = 2 * cost.heavy_output_bytes * (0.5 if target['precision'] == 'bf16' else 1.0)
  else:
    most, least = cost.activation_bytes, cost.heavy_output_bytes
  needed = fixed + most / devices
  memory = target['memory_per_device']
  if memory is None:
    return None, needed
  if needed <= memory:
    return True, needed
  return (False if fixed + least / devices > memory else MAY_NOT_FIT), needed
