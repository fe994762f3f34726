"""`python -m trainer.benchmark overhead`: a 4-32-3 dense network on the 150 iris examples of
scikit-learn: wall time of --epochs epochs with one session.run per step (iterations_per_loop 1),
with 100 steps per session.run in a tf.while_loop (iterations_per_loop 100, the TPU training
loop), and through the Estimator with one train() per epoch vs one train() over a repeated
tf.data input: per-call overhead, quantified."""

import importlib.util
import os
import shutil
import tempfile
import time

import numpy as np
import tensorflow.compat.v1 as tf

from trainer.benchmark import report
from trainer.benchmark import timing
from trainer.errors import PipelineError


def iris():
  """The 150 iris examples (4 float features, labels 0-2) from scikit-learn's bundled CSV, read
  by path (importing sklearn would need SciPy)."""
  spec = importlib.util.find_spec('sklearn')
  if spec is None:
    raise PipelineError('overhead reads the iris data shipped with scikit-learn: '
                        '`pip install --no-deps scikit-learn` (make test installs it).')
  path = os.path.join(spec.submodule_search_locations[0], 'datasets', 'data', 'iris.csv')
  rows = np.loadtxt(path, delimiter=',', skiprows=1)
  return rows[:, :4].astype(np.float32), rows[:, 4].astype(np.int32)


def _dense_logits(features):
  hidden = tf.layers.dense(features, 32, activation=tf.nn.relu, name='hidden')
  return tf.layers.dense(hidden, 3, name='logits')


def _iris_dataset(x, y, batch_size, repeat):
  dataset = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(150, seed=1)
  if repeat:
    dataset = dataset.repeat()
  return dataset.batch(batch_size, drop_remainder=True)


def _session_loop_seconds(x, y, batch_size, steps, iterations_per_loop):
  """Wall time of `steps` SGD steps run `iterations_per_loop` per session.run (a tf.while_loop
  around the step, as TPUEstimator's training loop does on a TPU)."""
  with tf.Graph().as_default():
    iterator = tf.data.make_one_shot_iterator(_iris_dataset(x, y, batch_size, repeat=True))
    with tf.variable_scope('net'):
      _dense_logits(tf.zeros([1, 4]))  # creates the variables outside the loop
    weights = tf.trainable_variables()

    def step(_):
      features, labels = iterator.get_next()
      with tf.variable_scope('net', reuse=True):
        logits = _dense_logits(features)
      loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
      grads = tf.gradients(loss, weights)
      with tf.control_dependencies([w.assign_sub(0.1 * g) for w, g in zip(weights, grads)]):
        return tf.identity(loss)

    loop = tf.while_loop(lambda i, _: i < iterations_per_loop,
                         lambda i, _: (i + 1, step(None)), (0, 0.0))
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(loop)  # warm-up call, not timed
      start = time.perf_counter()
      for _ in range(-(-steps // iterations_per_loop)):
        sess.run(loop)
      return time.perf_counter() - start


def _iris_model_fn(features, labels, mode, params):
  del params
  logits = _dense_logits(features)
  loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
  train_op = tf.train.GradientDescentOptimizer(0.1).minimize(
      loss, global_step=tf.train.get_or_create_global_step())
  return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op)


def _estimator_seconds(x, y, batch_size, epochs, per_epoch_calls):
  """Wall time of `epochs` epochs through TPUEstimator (use_tpu=False): one train() per epoch on
  a fresh one-epoch input, or one train() over a repeated input."""
  model_dir = tempfile.mkdtemp(prefix='benchmark-overhead-')
  try:
    estimator = tf.estimator.tpu.TPUEstimator(
        model_fn=_iris_model_fn, use_tpu=False, train_batch_size=batch_size,
        config=tf.estimator.tpu.RunConfig(model_dir=model_dir, log_step_count_steps=None,
                                          save_summary_steps=None))
    steps_per_epoch = len(y) // batch_size
    start = time.perf_counter()
    if per_epoch_calls:
      for _ in range(epochs):
        estimator.train(lambda params: _iris_dataset(x, y, params['batch_size'], repeat=False))
    else:
      estimator.train(lambda params: _iris_dataset(x, y, params['batch_size'], repeat=True),
                      max_steps=epochs * steps_per_epoch)
    return time.perf_counter() - start
  finally:
    shutil.rmtree(model_dir, ignore_errors=True)


def bench_overhead(batch_size, epochs, repeats, output=None):
  """Times each way of running `epochs` epochs `repeats` times and writes the record; returns it."""
  x, y = iris()
  steps = epochs * (len(y) // batch_size)
  cases = [
      ('session.run per step (iterations_per_loop=1)',
       lambda: _session_loop_seconds(x, y, batch_size, steps, 1)),
      ('100 steps per session.run (iterations_per_loop=100)',
       lambda: _session_loop_seconds(x, y, batch_size, steps, 100)),
      ('Estimator, one train() over a repeated tf.data input',
       lambda: _estimator_seconds(x, y, batch_size, epochs, per_epoch_calls=False)),
      ('Estimator, one train() per epoch',
       lambda: _estimator_seconds(x, y, batch_size, epochs, per_epoch_calls=True)),
  ]
  measurements, rows = {}, []
  for label, run in cases:
    seconds = [run() for _ in range(repeats)]
    summary = timing.summarize(seconds)
    measurements[label] = dict(summary, microseconds_per_step=1e6 * summary['median'] / steps)
    rows.append([label, report.fmt(summary, digits=2),
                 '%.0f' % (1e6 * summary['median'] / steps)])
  details = {'network': 'dense 4-32-3, ReLU, SGD 0.1', 'examples': len(y),
             'batch_size': batch_size, 'epochs': epochs, 'steps': steps, 'repeats': repeats}
  return report.write_record('overhead', details, measurements, rows,
                             ['how', 'wall seconds median (min-max)', 'us/step'], output)
