"""Bidirectional-LSTM text classifier, TPU-compatible.

token ids -> embedding -> `num_layers` bidirectional LSTM layers (Graves & Schmidhuber 2005;
LSTM with forget gate, Gers et al. 2000) -> pooled or final states -> dropout -> linear classifier.
This is the model family of the 2018 Cloud TPU vs P100/V100 BiLSTM text-classification benchmark
(1024 hidden units per direction).

Shapes are static: every batch is padded to one max_seq_length, and `length` masks the padding.
Padding never changes the result: each direction's recurrence stops at `length` (the backward
direction reads each sequence reversed within its own length, so it starts at the last real token),
the pooling ignores padded positions, and padded embeddings are never read.
"""

import tensorflow.compat.v1 as tf

from trainer.models import seeded
from trainer.models.specs.bilstm import CLASSIFIER_SCOPE  # pylint: disable=unused-import
from trainer.models.specs.bilstm import LSTM_FORGET_BIAS
from trainer.models.specs.bilstm import MASKED_VALUE
from trainer.models.specs.bilstm import POOLINGS


def _masked_pool(outputs, length, pooling):
  """Pools outputs [batch, time, units] over the first `length` positions; 0 for empty texts."""
  valid = tf.sequence_mask(length, tf.shape(outputs)[1], dtype=outputs.dtype)[:, :, tf.newaxis]
  if pooling == 'mean':
    total = tf.reduce_sum(outputs * valid, axis=1)
    return total / tf.cast(tf.maximum(length, 1), outputs.dtype)[:, tf.newaxis]
  pooled = tf.reduce_max(outputs * valid + (1. - valid) * MASKED_VALUE, axis=1)
  return tf.where(tf.broadcast_to(length[:, tf.newaxis] > 0, tf.shape(pooled)), pooled,
                  tf.zeros_like(pooled))


def bilstm(token_ids, length, vocab_size, num_classes, is_training, embedding_dim=256,
           hidden_units=1024, num_layers=1, pooling='max', dropout_rate=0.5,
           compute_dtype=tf.float32):
  """Builds the classifier.

  Args:
    token_ids: int32 [batch, max_seq_length], ids in [0, vocab_size), padding after `length`.
    length: int32 [batch], real tokens per example (0 for an empty text).
    vocab_size: rows of the embedding table.
    num_classes: width of the logits.
    is_training: Python bool; dropout when True.
    embedding_dim: embedding width.
    hidden_units: LSTM units per direction.
    num_layers: stacked bidirectional layers (each reads both directions of the one below).
    pooling: 'max' or 'mean' over the real positions of the top layer's outputs, or 'final':
      the last forward state and the first backward state.
    dropout_rate: dropout on the embeddings and on the pooled features in training.
    compute_dtype: tf.float32, or tf.bfloat16 on TPU (variables stay float32). The LSTM layers
      run in float32 either way: the cell state is summed over every step, and bfloat16's 8-bit
      mantissa would round it at each one; the embedding lookup and the classifier use
      compute_dtype.

  Returns:
    logits: [batch, num_classes] in compute_dtype.

  Raises:
    ValueError: unknown pooling or non-positive sizes.
  """
  if pooling not in POOLINGS:
    raise ValueError('pooling must be one of %s, got %r' % (POOLINGS, pooling))
  if min(vocab_size, embedding_dim, hidden_units, num_layers) <= 0:
    raise ValueError('vocab_size, embedding_dim, hidden_units and num_layers must be positive')
  embedding = tf.get_variable(
      'embedding', [vocab_size, embedding_dim], tf.float32,
      initializer=tf.random_uniform_initializer(-0.05, 0.05))
  net = tf.cast(tf.nn.embedding_lookup(embedding, token_ids), compute_dtype)
  net = seeded.dropout(net, rate=dropout_rate, is_training=is_training)
  final_states = None
  net = tf.cast(net, tf.float32)
  for layer in range(num_layers):
    with tf.variable_scope('bilstm_%d' % layer):
      cells = [tf.nn.rnn_cell.LSTMCell(hidden_units, name=direction, dtype=tf.float32,
                                       forget_bias=LSTM_FORGET_BIAS,
                                       initializer=seeded.glorot_uniform())
               for direction in ('forward', 'backward')]
      (forward, backward), (forward_state, backward_state) = tf.nn.bidirectional_dynamic_rnn(
          cells[0], cells[1], net, sequence_length=length, dtype=tf.float32)
      net = tf.concat([forward, backward], axis=2)
      final_states = tf.concat([forward_state.h, backward_state.h], axis=1)
  if pooling == 'final':
    pooled = final_states
  else:
    pooled = _masked_pool(net, length, pooling)
  pooled = seeded.dropout(tf.cast(pooled, compute_dtype), rate=dropout_rate,
                          is_training=is_training)
  return tf.layers.dense(pooled, num_classes, name=CLASSIFIER_SCOPE,
                         kernel_initializer=seeded.glorot_uniform())
