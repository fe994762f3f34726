"""InceptionV3 in Keras 3: the network of `models.inception_v3` (Szegedy et al. 2016) with its
auxiliary classifier, layer for layer, with its layer names."""

import keras

from trainer.keras_models import layers as layers_lib
from trainer.models.specs import inception_v3 as inception_spec

_SEP = layers_lib.SCOPE_SEPARATOR


def _conv(x, filters, kernel_size, name, strides=1, padding='same'):
  """Conv (no bias) + batch norm (beta only) + ReLU in the scope `name`."""
  x = keras.layers.Conv2D(
      filters, kernel_size, strides=strides, padding=padding, use_bias=False,
      name=name + _SEP + 'conv2d',
      kernel_initializer=keras.initializers.VarianceScaling(distribution='truncated_normal'))(x)
  x = keras.layers.BatchNormalization(
      momentum=inception_spec.BATCH_NORM_DECAY,
      epsilon=layers_lib.fused_epsilon(inception_spec.BATCH_NORM_EPSILON), scale=False,
      name=name + _SEP + 'batch_normalization')(x)
  return keras.layers.ReLU()(x)


def _avg_pool_3x3(x):
  return keras.layers.AveragePooling2D(3, strides=1, padding='same')(x)


def _max_pool_3x3_s2(x):
  return keras.layers.MaxPooling2D(3, strides=2, padding='valid')(x)


def _concat(branches):
  return keras.layers.Concatenate(axis=3)(branches)


def _mixed_5(x, pool_filters, name):
  n = name + _SEP
  b0 = _conv(x, 64, 1, n + 'Branch_0_1x1')
  b1 = _conv(_conv(x, 48, 1, n + 'Branch_1_1x1'), 64, 5, n + 'Branch_1_5x5')
  b2 = _conv(x, 64, 1, n + 'Branch_2_1x1')
  b2 = _conv(_conv(b2, 96, 3, n + 'Branch_2_3x3a'), 96, 3, n + 'Branch_2_3x3b')
  b3 = _conv(_avg_pool_3x3(x), pool_filters, 1, n + 'Branch_3_1x1')
  return _concat([b0, b1, b2, b3])


def _mixed_6a(x):
  n = 'Mixed_6a' + _SEP
  b0 = _conv(x, 384, 3, n + 'Branch_0_3x3', strides=2, padding='valid')
  b1 = _conv(_conv(x, 64, 1, n + 'Branch_1_1x1'), 96, 3, n + 'Branch_1_3x3a')
  b1 = _conv(b1, 96, 3, n + 'Branch_1_3x3b', strides=2, padding='valid')
  return _concat([b0, b1, _max_pool_3x3_s2(x)])


def _mixed_6(x, channels, name):
  n = name + _SEP
  b0 = _conv(x, 192, 1, n + 'Branch_0_1x1')
  b1 = _conv(x, channels, 1, n + 'Branch_1_1x1')
  b1 = _conv(_conv(b1, channels, (1, 7), n + 'Branch_1_1x7'), 192, (7, 1), n + 'Branch_1_7x1')
  b2 = _conv(x, channels, 1, n + 'Branch_2_1x1')
  b2 = _conv(b2, channels, (7, 1), n + 'Branch_2_7x1a')
  b2 = _conv(b2, channels, (1, 7), n + 'Branch_2_1x7a')
  b2 = _conv(b2, channels, (7, 1), n + 'Branch_2_7x1b')
  b2 = _conv(b2, 192, (1, 7), n + 'Branch_2_1x7b')
  b3 = _conv(_avg_pool_3x3(x), 192, 1, n + 'Branch_3_1x1')
  return _concat([b0, b1, b2, b3])


def _mixed_7a(x):
  n = 'Mixed_7a' + _SEP
  b0 = _conv(x, 192, 1, n + 'Branch_0_1x1')
  b0 = _conv(b0, 320, 3, n + 'Branch_0_3x3', strides=2, padding='valid')
  b1 = _conv(x, 192, 1, n + 'Branch_1_1x1')
  b1 = _conv(b1, 192, (1, 7), n + 'Branch_1_1x7')
  b1 = _conv(b1, 192, (7, 1), n + 'Branch_1_7x1')
  b1 = _conv(b1, 192, 3, n + 'Branch_1_3x3', strides=2, padding='valid')
  return _concat([b0, b1, _max_pool_3x3_s2(x)])


def _mixed_7(x, name):
  n = name + _SEP
  b0 = _conv(x, 320, 1, n + 'Branch_0_1x1')
  b1 = _conv(x, 384, 1, n + 'Branch_1_1x1')
  b1 = _concat([_conv(b1, 384, (1, 3), n + 'Branch_1_1x3'),
                _conv(b1, 384, (3, 1), n + 'Branch_1_3x1')])
  b2 = _conv(_conv(x, 448, 1, n + 'Branch_2_1x1'), 384, 3, n + 'Branch_2_3x3')
  b2 = _concat([_conv(b2, 384, (1, 3), n + 'Branch_2_1x3'),
                _conv(b2, 384, (3, 1), n + 'Branch_2_3x1')])
  b3 = _conv(_avg_pool_3x3(x), 192, 1, n + 'Branch_3_1x1')
  return _concat([b0, b1, b2, b3])


def _aux_logits(x, num_classes):
  n = inception_spec.AUX_SCOPE + _SEP
  size = x.shape[1]
  aux = keras.layers.AveragePooling2D(min(5, size), strides=3, padding='valid')(x)
  aux = _conv(aux, 128, 1, n + 'Conv2d_1x1')
  aux = _conv(aux, 768, aux.shape[1], n + 'Conv2d_cover', padding='valid')
  aux = keras.layers.Conv2D(
      num_classes, 1, name=n + 'logits',
      kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.001))(aux)
  return keras.layers.Flatten(name='aux_logits')(aux)


def inception_v3(images, num_classes):
  """InceptionV3 logits and auxiliary logits of normalized images.

  Args:
    images: Keras tensor, float32 [batch, height, width, 3], height and width >= 75, normalized.
    num_classes: width of the logits.

  Returns:
    (logits, aux_logits): Keras tensors float32 [batch, num_classes] each; the auxiliary head
    only shapes a training loss (weight models.model_config.ModelConfig.aux_loss_weight).

  Raises:
    ValueError: images smaller than 75x75.
  """
  height, width = images.shape[1:3]
  if min(height, width) < inception_spec.MIN_IMAGE_SIZE:
    raise ValueError('InceptionV3 needs inputs of at least %dx%d, got %dx%d'
                     % (inception_spec.MIN_IMAGE_SIZE, inception_spec.MIN_IMAGE_SIZE, height, width))
  x = _conv(images, 32, 3, 'Conv2d_1a_3x3', strides=2, padding='valid')
  x = _conv(x, 32, 3, 'Conv2d_2a_3x3', padding='valid')
  x = _conv(x, 64, 3, 'Conv2d_2b_3x3')
  x = _max_pool_3x3_s2(x)
  x = _conv(x, 80, 1, 'Conv2d_3b_1x1', padding='valid')
  x = _conv(x, 192, 3, 'Conv2d_4a_3x3', padding='valid')
  x = _max_pool_3x3_s2(x)
  x = _mixed_5(x, 32, 'Mixed_5b')
  x = _mixed_5(x, 64, 'Mixed_5c')
  x = _mixed_5(x, 64, 'Mixed_5d')
  x = _mixed_6a(x)
  for name, channels in (('Mixed_6b', 128), ('Mixed_6c', 160), ('Mixed_6d', 160),
                         ('Mixed_6e', 192)):
    x = _mixed_6(x, channels, name)
  aux_logits = _aux_logits(x, num_classes)
  x = _mixed_7a(x)
  x = _mixed_7(x, 'Mixed_7b')
  x = _mixed_7(x, 'Mixed_7c')
  x = keras.layers.GlobalAveragePooling2D()(x)
  x = keras.layers.Dropout(inception_spec.DROPOUT_RATE)(x)
  logits = keras.layers.Dense(num_classes, name=inception_spec.CLASSIFIER_SCOPE)(x)
  return logits, aux_logits
