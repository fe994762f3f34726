"""The iris question's job as a legacy TPUEstimator job is written: a model_fn and an input_fn,
TensorFlow only, run by the pipeline as it is (docs/your-model.md):

  python -m trainer.main --model_fn=examples.iris:model_fn --input_fn=examples.iris:input_fn \\
      --model_dir=/tmp/iris --train_steps=300 --train_batch_size=16 --eval_batch_size=10 \\
      --num_eval_examples=30

A 4-32-3 multilayer perceptron (ReLU) on Fisher's iris measurements (150 flowers, 4 lengths in
cm, 3 species), trained with plain SGD. The data is the iris.csv that scikit-learn ships (no
download), or <data_dir>/iris.csv with the same columns (--data_dir); every fifth flower is held
out for evaluation (30), the rest train (120).
"""

import importlib.util
import os

import numpy as np
import tensorflow.compat.v1 as tf

LEARNING_RATE = 0.05


def _rows(data_dir):
  """(features float32 [150, 4], labels int32 [150]) of iris.csv."""
  if data_dir:
    path = os.path.join(data_dir, 'iris.csv')
  else:
    spec = importlib.util.find_spec('sklearn')  # found, not imported (it would need SciPy)
    if spec is None:
      raise ValueError('no --data_dir and no scikit-learn, whose iris.csv this example reads: '
                       'pip install --no-deps scikit-learn')
    path = os.path.join(spec.submodule_search_locations[0], 'datasets', 'data', 'iris.csv')
  with tf.io.gfile.GFile(path) as f:
    rows = np.loadtxt(f, delimiter=',', skiprows=1)
  return rows[:, :4].astype(np.float32), rows[:, 4].astype(np.int32)


def input_fn(params, mode):
  """Batches of params['batch_size'] (features [batch, 4] float32, labels [batch] int32);
  training repeats and shuffles the 120 training flowers, evaluation reads the 30 held out once
  (static batches: the last one wraps around, so eval_batch_size should divide 30)."""
  x, y = _rows(params.get('data_dir'))
  held_out = np.arange(len(y)) % 5 == 0
  training = mode == tf.estimator.ModeKeys.TRAIN
  x, y = (x[~held_out], y[~held_out]) if training else (x[held_out], y[held_out])
  dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat()
  if training:
    dataset = dataset.shuffle(len(y), seed=1)
  return dataset.batch(params['batch_size'], drop_remainder=True)


def model_fn(features, labels, mode, params):
  """The 4-32-3 network; TPUEstimatorSpec for train and eval (accuracy, loss). On a TPU
  (params['use_tpu'], set by TPUEstimator) the gradients are summed over the cores."""
  hidden = tf.layers.dense(features, 32, activation=tf.nn.relu, name='hidden')
  logits = tf.layers.dense(hidden, 3, name='logits')
  loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
  if mode == tf.estimator.ModeKeys.EVAL:
    def metric_fn(labels, logits):
      return {'accuracy': tf.metrics.accuracy(labels, tf.argmax(logits, axis=1))}
    return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss,
                                             eval_metrics=(metric_fn, [labels, logits]))
  optimizer = tf.train.GradientDescentOptimizer(LEARNING_RATE)
  if params.get('use_tpu'):
    optimizer = tf.tpu.CrossShardOptimizer(optimizer)
  train_op = optimizer.minimize(loss, global_step=tf.train.get_or_create_global_step())
  return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op)
