"""Random layers every model shares, drawn from the graph-level seed (--seed, which the Estimator's
RunConfig sets), so a seeded run on the CPU/GPU starts from the same weights and drops the same
units. On a TPU the initializers still run seeded on the host, but XLA ignores the seed of the
dropout's random op, so TPU dropout masks are not repeatable.

Why not the defaults: on TF 2.x, `tf.layers.dense`/`conv2d`, `tf.nn.rnn_cell.LSTMCell` and
`tf.layers.dropout` go through Keras, which seeds a weight initializer or dropout that has no
seed of its own from Python's `random` module, ignoring the graph's seed: two runs with the
same --seed then started from different weights (BENCHMARKS.md, reproducibility). TensorFlow's
own `tf.nn.dropout` and `tf.compat.v1` initializers derive their seeds from the graph's.
"""

import tensorflow.compat.v1 as tf


def glorot_uniform():
  """The Glorot/Xavier uniform initializer (Glorot & Bengio 2010; Keras' default for dense,
  convolution and LSTM kernels), seeded from the graph."""
  return tf.glorot_uniform_initializer()


def dropout(net, rate, is_training):
  """Dropout (Srivastava et al. 2014): zeroes each element of `net` with probability `rate` in
  training and scales the rest by 1 / (1 - rate); the identity otherwise. Same shape and dtype
  as `net`. The masks are a stateful random sequence from the graph seed: each training call
  (each train_and_eval chunk) starts that sequence again, while its input differs."""
  if not is_training or rate == 0:
    return net
  return tf.nn.dropout(net, rate=rate)
