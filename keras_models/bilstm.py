"""The BiLSTM text classifier in Keras 3: the network of `models.bilstm`, with its layer names.

Padding is masked as there: token id 0 is padding (`models.specs.features.PAD_ID`) and no real
token has id 0, so the mask `token_ids != 0` is the `length` of the TF1 network; each direction
keeps its state over masked steps, and the pooling ignores them.
"""

import keras
from keras import ops

from trainer.keras_models import layers as layers_lib
from trainer.models.specs import bilstm as bilstm_spec
from trainer.models.specs import features as feature_names

EMBEDDING = 'embedding'


def layer_name(layer):
  """The Keras name of the bidirectional layer `layer` (its TF1 scope)."""
  return 'bilstm_%d' % layer


def bilstm(token_ids, vocab_size, num_classes, embedding_dim, hidden_units, num_layers, pooling,
           dropout_rate):
  """The classifier's logits.

  Args:
    token_ids: Keras tensor, int32 [batch, max_seq_length], padding (0) after the real tokens.
    vocab_size, num_classes, embedding_dim, hidden_units, num_layers, pooling, dropout_rate: as
      in models.bilstm.bilstm.

  Returns:
    Keras tensor: logits float32 [batch, num_classes].

  Raises:
    ValueError: unknown pooling.
  """
  if pooling not in bilstm_spec.POOLINGS:
    raise ValueError('pooling must be one of %s, got %r' % (bilstm_spec.POOLINGS, pooling))
  mask = ops.not_equal(token_ids, feature_names.PAD_ID)
  x = keras.layers.Embedding(
      vocab_size, embedding_dim, name=EMBEDDING,
      embeddings_initializer=keras.initializers.RandomUniform(-0.05, 0.05))(token_ids)
  x = keras.layers.Dropout(dropout_rate)(x)
  states = None
  for layer in range(num_layers):
    outputs = keras.layers.Bidirectional(
        keras.layers.LSTM(hidden_units, return_sequences=True, return_state=True),
        name=layer_name(layer))(x, mask=mask)
    x, states = outputs[0], (outputs[1], outputs[3])  # [sequences, fw h, fw c, bw h, bw c]
  if pooling == 'final':
    pooled = keras.layers.Concatenate(axis=1)(list(states))
  else:
    pooled = layers_lib.MaskedPooling(pooling)(x, mask)
  pooled = keras.layers.Dropout(dropout_rate)(pooled)
  return keras.layers.Dense(num_classes, name=bilstm_spec.CLASSIFIER_SCOPE)(pooled)
