"""A Keras 3 model of one of the pipeline's networks, from the run's `ModelConfig`."""

import keras

from trainer.errors import PipelineError
from trainer.keras_models import bilstm
from trainer.keras_models import cnn
from trainer.keras_models import inception_v3
from trainer.keras_models import layers as layers_lib
from trainer.keras_models import resnet
from trainer.models.specs import features as feature_names

# Output names of InceptionV3's two heads (every other network has the logits only).
LOGITS = 'logits'
AUX_LOGITS = 'aux_logits'


def build_model(config):
  """The Keras model of `config`'s network, with its input preprocessing.

  Args:
    config: `models.model_config.ModelConfig` (model, num_classes, image_size, mean_rgb,
      stddev_rgb, resnet_depth; for the BiLSTM vocab_size, max_seq_length, embedding_dim,
      lstm_hidden_units, lstm_layers, lstm_pooling, dropout_rate).

  Returns:
    keras.Model. Image networks take `image`: uint8 (or float) [batch, image_size, image_size, 3]
    on the 0-255 scale, normalized inside the model as the model_fn does; the BiLSTM takes
    `token_ids`: int32 [batch, max_seq_length] (trainer.data.tokenizer.texts_to_ids). Output:
    logits float32 [batch, num_classes]; InceptionV3 gives {'logits', 'aux_logits'}.

  Raises:
    ValueError: an unknown model or sizes the network cannot take.
  """
  if config.model == 'bilstm':
    token_ids = keras.Input((config.max_seq_length,), dtype='int32',
                            name=feature_names.TOKEN_IDS)
    logits = bilstm.bilstm(token_ids, config.vocab_size, config.num_classes,
                           config.embedding_dim, config.lstm_hidden_units, config.lstm_layers,
                           config.lstm_pooling, config.dropout_rate)
    return keras.Model(token_ids, logits, name='bilstm')
  image = keras.Input((config.image_size, config.image_size, 3), name=feature_names.IMAGE)
  x = layers_lib.pixel_normalization(config.mean_rgb, config.stddev_rgb)(image)
  if config.model == 'resnet':
    outputs = resnet.resnet_v1_5(x, config.resnet_depth, config.num_classes)
    name = 'resnet%d_v1_5' % config.resnet_depth
  elif config.model == 'inception_v3':
    logits, aux_logits = inception_v3.inception_v3(x, config.num_classes)
    outputs, name = {LOGITS: logits, AUX_LOGITS: aux_logits}, 'inception_v3'
  elif config.model == 'cnn':
    outputs, name = cnn.cnn(x, config.num_classes), 'cnn'
  else:
    raise ValueError('unknown model %r' % (config.model,))
  return keras.Model(image, outputs, name=name)


def logits_of(outputs):
  """The logits among a model's outputs (InceptionV3's dict, or the tensor itself)."""
  return outputs[LOGITS] if isinstance(outputs, dict) else outputs


def check_data_fits(data_dir, info, input_shape):
  """Refuses data (dataset.json `info` of `data_dir`) that a model with `input_shape` (without
  the batch: (size, size, 3) or (max_seq_length,)) cannot take.

  Raises:
    PipelineError: images for a text model or the reverse, or another max_seq_length.
  """
  modality = info.get('modality', 'image')
  if (modality == 'text') != (len(input_shape) == 1):
    raise PipelineError('%s holds %s data; the model takes %s.' % (
        data_dir, modality, 'token ids' if len(input_shape) == 1 else 'images'))
  if modality == 'text' and input_shape[0] != info['max_seq_length']:
    raise PipelineError('the model takes %d tokens, %s has max_seq_length %d.'
                        % (input_shape[0], data_dir, info['max_seq_length']))
