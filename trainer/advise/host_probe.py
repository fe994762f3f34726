"""This host as a target, measured in a few seconds with TensorFlow itself: what a convolution
and a matmul reach (FLOP/s), what an elementwise op streams (bytes/s), and the fixed costs of an
op's dispatch and of a session.run call. The CPU row of `trainer.advise` is these figures, not a
datasheet's: on a CPU the achieved rate differs from the peak by kernel, ISA and thread count.
"""

import time

import tensorflow.compat.v1 as tf

from trainer.advise import probe_cache
from trainer.host import cpu

# A 3x3 convolution of ResNet's middle stages (64 -> 64 channels, 32x32 maps, batch 32).
_CONV = dict(images=(32, 32, 32, 64), filters=(3, 3, 64, 64))
_MATMUL = 1024
_STREAM_FLOATS = 16 * 1024 * 1024  # 64 MB, beyond any cache
_CHAIN = 200
_CONV_CHAIN = 50
_FIGURES = {'conv_flops', 'matmul_flops', 'stream_bytes_per_sec', 'op_overhead', 'heavy_op_floor',
            'step_overhead'}


def _best_seconds(sess, fetch, repeats):
  sess.run(fetch)  # warm-up: allocation, kernel choice
  best = float('inf')
  for _ in range(repeats):
    began = time.perf_counter()
    sess.run(fetch)
    best = min(best, time.perf_counter() - began)
  return best


def measure(session_config=None, repeats=5):
  """The probe's figures: {'conv_flops', 'matmul_flops', 'stream_bytes_per_sec',
  'op_overhead', 'heavy_op_floor', 'step_overhead'} (FLOP/s, bytes/s, seconds), each the best
  of `repeats` runs."""
  with tf.Graph().as_default():
    images = tf.Variable(tf.random.normal(_CONV['images']))
    filters = tf.Variable(tf.random.normal(_CONV['filters']))
    conv = tf.reduce_sum(tf.nn.conv2d(images, filters, strides=1, padding='SAME')[0, 0, 0])
    a = tf.Variable(tf.random.normal([_MATMUL, _MATMUL]))
    matmul = tf.matmul(a, a)[0, 0]
    stream_in = tf.Variable(tf.zeros([_STREAM_FLOATS]))
    stream = tf.reduce_max((stream_in * 1.0001)[:1])
    # A chain of tiny matmuls: kernels the executor schedules as it schedules a step's (a scalar
    # op runs inline, cheaper than any op of a training step).
    tiny = tf.Variable(tf.ones([1, 1]))
    chain = tiny.read_value()
    for _ in range(_CHAIN):
      chain = tf.matmul(chain, tiny)
    empty = tf.constant(0.0) + tiny[0, 0]
    # The least time a convolution or matmul kernel takes (oneDNN or Eigen set-up, threads): a
    # 3x3 convolution of an 8x8x16 map, all but free in arithmetic.
    # A chain of them, as the op chain above: one call's fixed cost would drown in session.run's.
    small = tf.Variable(tf.ones([1, 8, 8, 16]))
    small_filters = tf.Variable(tf.fill([3, 3, 16, 16], 1.0 / 144))
    small_conv = small.read_value()
    for _ in range(_CONV_CHAIN):
      small_conv = tf.nn.conv2d(small_conv, small_filters, strides=1, padding='SAME')
    small_conv = small_conv[0, 0, 0, 0]
    with tf.Session(config=session_config) as sess:
      sess.run(tf.global_variables_initializer())
      conv_s = _best_seconds(sess, conv, repeats)
      matmul_s = _best_seconds(sess, matmul, repeats)
      stream_s = _best_seconds(sess, stream, repeats)
    # Grappler would fold the chain of multiplications into one: time it without the rewrites.
    unfolded = tf.ConfigProto()
    if session_config is not None:
      unfolded.CopyFrom(session_config)
    unfolded.graph_options.rewrite_options.disable_meta_optimizer = True
    with tf.Session(config=unfolded) as sess:
      sess.run(tf.global_variables_initializer())
      chain_s = _best_seconds(sess, chain, repeats * 4)
      empty_s = _best_seconds(sess, empty, repeats * 4)
      small_conv_s = _best_seconds(sess, small_conv, repeats * 4)
  n, h, w, c_in = _CONV['images']
  k, _, _, c_out = _CONV['filters']
  return {
      'conv_flops': 2.0 * n * h * w * c_out * k * k * c_in / conv_s,
      'matmul_flops': 2.0 * _MATMUL ** 3 / matmul_s,
      'stream_bytes_per_sec': 2.0 * 4 * _STREAM_FLOATS / stream_s,  # read + write
      'op_overhead': max(0.0, chain_s - empty_s) / _CHAIN,
      'heavy_op_floor': max(0.0, small_conv_s - empty_s) / _CONV_CHAIN,
      'step_overhead': empty_s,
  }


def measure_cached(session_config=None):
  """`measure(session_config)`'s figures, taken once per host and then read from the probe cache
  (probe_cache.py), with 'cached': whether they were read."""
  key = probe_cache.host_key(session_config)
  figures = probe_cache.read(key, 'figures')
  if set(figures) >= _FIGURES:
    return dict(figures, cached=True)
  figures = measure(session_config)
  probe_cache.update(key, 'figures', figures)
  return dict(figures, cached=False)


def target(figures, op_seconds=None):
  """This host as a targets.json entry (see targets.py) from `measure()`'s figures, with
  shape_probe.measure's seconds per convolution and matmul shape (`op_seconds`) where given."""
  here = cpu.read_cpu()
  fast = max(figures['conv_flops'], figures['matmul_flops'])
  return {
      'name': 'this CPU', 'kind': 'cpu', 'road': 'estimator', 'devices': 1,
      'machine': '%s, %d vCPUs' % (here.model or 'this host', here.logical_cpus),
      'peak_flops': {'fp32': fast}, 'precision': 'fp32',
      # Convolutions at the convolution's measured rate, matmuls at the matmul's; the lower bound
      # puts both at the faster one.
      'heavy_efficiency': 1.0,
      'heavy_rates': {'conv': figures['conv_flops'], 'matmul': figures['matmul_flops']},
      'op_seconds': op_seconds or {},
      'memory_bandwidth': figures['stream_bytes_per_sec'], 'memory_per_device': None,
      'fused': False, 'op_overhead': figures['op_overhead'],
      'heavy_op_floor': figures['heavy_op_floor'],
      'step_overhead': figures['step_overhead'], 'loop_overhead': 0.0,
      'host_vcpus': here.logical_cpus, 'price': None,
      'source_text': 'measured here by trainer/advise/host_probe.py',
  }
