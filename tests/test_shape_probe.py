"""trainer/advise/shape_probe.py: each convolution and matmul of a job's graph named by its
shapes and attributes, rebuilt alone and timed on this host, cached per host so that a second
prediction reads the first's timings; the step model prices those ops at their own times."""

import json

import pytest

from trainer.advise import host_probe
from trainer.advise import job_cost
from trainer.advise import probe_cache
from trainer.advise import shape_probe
from trainer.advise import step_model


def _small_train_op():
  """A 3x3 convolution, a strided one and a dense layer, trained by SGD: every heavy op type of
  a CNN's step (Conv2D, its two gradients, MatMul and its two gradients)."""
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  images = tf.random.uniform([8, 16, 16, 3])
  labels = tf.zeros([8], tf.int32)
  net = tf.layers.conv2d(images, 8, 3, padding='same', activation=tf.nn.relu)
  net = tf.layers.conv2d(net, 16, 3, strides=2, padding='valid')
  logits = tf.layers.dense(tf.layers.flatten(net), 10)
  loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
  return tf.train.GradientDescentOptimizer(0.1).minimize(
      loss, global_step=tf.train.get_or_create_global_step())


def test_every_shape_is_timed_once_then_read_from_the_hosts_cache(tmp_path, monkeypatch):
  cost = job_cost.from_graph(_small_train_op, 8, 'small')
  heavy = [op for op in cost.ops if op.type in job_cost.HEAVY_OPS]
  assert {op.type for op in heavy} >= {'Conv2D', 'Conv2DBackpropFilter', 'MatMul'}
  assert all(op.signature for op in heavy) and not any(
      op.signature for op in cost.ops if op.type not in job_cost.HEAVY_OPS)
  spec = json.loads(next(op.signature for op in heavy if op.type == 'Conv2DBackpropInput'))
  # The input gradient's input_sizes is a constant of the graph: kept by value.
  assert [8, 16, 16, 8] in [i[2] for i in spec['inputs']] and "s: \"VALID\"" in spec['attrs'][
      'padding']
  cache = str(tmp_path / 'advise-probes.json')
  monkeypatch.setenv(probe_cache.ENVIRONMENT_VARIABLE, cache)
  first = shape_probe.measure(cost, 1e11)
  signatures = {op.signature for op in heavy}
  assert first['timed'] == len(first['seconds']) and first['cached'] == 0
  # An op below the timer's resolution is left to the probe's rate: none is priced as free.
  assert first['failed'] == 0 and set(first['seconds']) <= signatures
  assert len(first['seconds']) >= len(signatures) - 2 and all(
      s > 0 for s in first['seconds'].values())
  # Every shape is in the cache, one under the timer's resolution as null (not retimed later).
  key = probe_cache.host_key()
  assert probe_cache.read(key, 'shapes') == {s: first['seconds'].get(s) for s in signatures}
  again = shape_probe.measure(cost, 1e11)
  assert again['seconds'] == first['seconds'] and again['cached'] == len(first['seconds'])
  assert again['timed'] == 0
  unresolved = sorted(first['seconds'])[0]
  probe_cache.update(key, 'shapes', {unresolved: None})
  third = shape_probe.measure(cost, 1e11)
  assert third['timed'] == 0 and third['seconds'] == {
      s: v for s, v in first['seconds'].items() if s != unresolved}
  # Another host (here: other thread counts) times its own.
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  other = shape_probe.measure(cost, 1e11, tf.ConfigProto(intra_op_parallelism_threads=1))
  assert other['timed'] >= len(signatures) - 2
  assert len(json.loads(open(cache).read())) == 2
  # The host's own figures likewise: measured once, then read.
  figures = host_probe.measure_cached()
  assert not figures['cached'] and host_probe.measure_cached() == dict(figures, cached=True)
  # No cache at all: timed every time.
  monkeypatch.setenv(probe_cache.ENVIRONMENT_VARIABLE, '')
  assert shape_probe.measure(cost, 1e11)['timed'] >= len(signatures) - 2


def test_a_large_op_is_timed_at_a_smaller_batch_and_scaled():
  conv = {'op': 'Conv2DBackpropInput', 'attrs': {}, 'inputs': [
      ['int32', [4], [1024, 56, 56, 64]], ['float32', [3, 3, 64, 64], None],
      ['float32', [1024, 56, 56, 64], None]]}
  scaled, factor = shape_probe.scaled_spec(conv, 8)
  assert factor == 8 and scaled['inputs'] == [
      ['int32', [4], [128, 56, 56, 64]], ['float32', [3, 3, 64, 64], None],
      ['float32', [128, 56, 56, 64], None]]
  # dW = x^T dy of a dense layer: x [1024, 2048] transposed, dy [1024, 1000]; M is 2048.
  matmul = {'op': 'MatMul', 'attrs': {'transpose_a': 'b: true', 'transpose_b': 'b: false'},
            'inputs': [['float32', [1024, 2048], None], ['float32', [1024, 1000], None]]}
  scaled, factor = shape_probe.scaled_spec(matmul, 3)
  assert scaled['inputs'][0][1] == [1024, 682] and factor == pytest.approx(2048 / 682.0)


def test_a_timed_shape_is_priced_at_its_own_time_and_the_rest_by_the_probe():
  cost = job_cost.JobCost(
      name='x', batch_size=8, flops_source='test', weight_bytes=0, state_bytes=0,
      activation_bytes=0, heavy_output_bytes=0, infeed_bytes_per_step=0,
      ops=(job_cost.OpCost('Conv2D', 1e9, 0, 'a'), job_cost.OpCost('Conv2D', 1e9, 0, 'b'),
           job_cost.OpCost('Relu', 0.0, 0)))
  figures = {'conv_flops': 1e11, 'matmul_flops': 1e11, 'stream_bytes_per_sec': 1e10,
             'op_overhead': 0.0, 'heavy_op_floor': 0.0, 'step_overhead': 0.0}
  plain = step_model.predict(cost, host_probe.target(figures))
  timed = step_model.predict(cost, host_probe.target(figures, {'a': 0.05}))
  assert plain.compute_seconds == pytest.approx(0.02)
  assert timed.compute_seconds == pytest.approx(0.05 + 0.01)
  # At the peak (the lower bound) a timed op takes the faster of its time and the peak rate.
  assert timed.lower == pytest.approx(plain.lower) and timed.lower <= timed.seconds
  # A shape that beats the probe's rate (the CNN's 5x5 convolutions do) lowers the bound too.
  fast = step_model.predict(cost, host_probe.target(figures, {'a': 0.001}))
  assert fast.lower == pytest.approx(0.001 + 0.01) == fast.seconds


def test_an_op_this_cpu_cannot_run_alone_is_left_to_the_probes_rate(tmp_path, monkeypatch):
  """A user's network may hold a heavy op that cannot be rebuilt and run alone here (here a
  matmul of strings, which no kernel takes): logged, left to the probe's rate, no crash."""
  monkeypatch.setenv(probe_cache.ENVIRONMENT_VARIABLE, str(tmp_path / 'cache.json'))
  bad = json.dumps({'op': 'MatMul', 'attrs': {'T': 'type: DT_STRING'},
                    'inputs': [['string', [2, 2], None], ['string', [2, 2], None]]})
  cost = job_cost.JobCost(name='x', batch_size=2, flops_source='test', weight_bytes=0,
                          state_bytes=0, activation_bytes=0, heavy_output_bytes=0,
                          infeed_bytes_per_step=0, ops=(job_cost.OpCost('MatMul', 16.0, 0, bad),))
  result = shape_probe.measure(cost, 1e11)
  assert result['failed'] == 1 and result['seconds'] == {} and result['timed'] == 0


def _momentum_on_a_resource_variable():
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  weights = tf.get_variable('w', [1000, 100], use_resource=True)
  loss = tf.reduce_sum(tf.matmul(tf.ones([8, 1000]), weights))
  return tf.train.MomentumOptimizer(0.1, 0.9).minimize(loss)


def test_an_update_of_a_resource_variable_moves_the_variable_and_its_slot():
  """ResourceApplyMomentum reads and writes the weights and their accumulator (the handles'
  bytes), and reads the gradient: 5 x 400 kB, and the rate and momentum (two float32 scalars)."""
  cost = job_cost.from_graph(_momentum_on_a_resource_variable, 8, 'momentum')
  update = [op for op in cost.ops if op.type == 'ResourceApplyMomentum']
  assert len(update) == 1 and update[0].bytes == 5 * 1000 * 100 * 4 + 2 * 4
