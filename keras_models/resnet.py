"""ResNet v1.5 in Keras 3: the network of `models.resnet` (He et al. 2016, Table 1; the stride on
the bottleneck's 3x3 convolution), layer for layer, with its layer names."""

import keras

from trainer.keras_models import layers as layers_lib
from trainer.models.specs import resnet as resnet_spec


def _conv(x, scope, filters, kernel_size, strides):
  """The 'fixed padding' convolution of models.resnet: a strided convolution pads explicitly
  and runs 'valid', so the result does not depend on the input size's parity."""
  name = scope.name('conv2d')
  if strides > 1:
    pad_beg = (kernel_size - 1) // 2
    pad_end = kernel_size - 1 - pad_beg
    x = keras.layers.ZeroPadding2D(((pad_beg, pad_end), (pad_beg, pad_end)),
                                   name=name + layers_lib.SCOPE_SEPARATOR + 'pad')(x)
  return keras.layers.Conv2D(
      filters, kernel_size, strides=strides, padding='same' if strides == 1 else 'valid',
      use_bias=False, name=name,
      kernel_initializer=keras.initializers.VarianceScaling(distribution='truncated_normal'))(x)


def _batch_norm(x, scope, relu=True, zero_init=False):
  x = keras.layers.BatchNormalization(
      momentum=resnet_spec.BATCH_NORM_DECAY,
      epsilon=layers_lib.fused_epsilon(resnet_spec.BATCH_NORM_EPSILON),
      gamma_initializer='zeros' if zero_init else 'ones', name=scope.name('batch_normalization'))(x)
  return keras.layers.ReLU()(x) if relu else x


def _block(x, scope, bottleneck, filters, strides, project):
  shortcut = x
  expansion = 4 if bottleneck else 1
  if project:
    shortcut = _batch_norm(_conv(x, scope, expansion * filters, 1, strides), scope, relu=False)
  if bottleneck:
    x = _batch_norm(_conv(x, scope, filters, 1, 1), scope)
    x = _batch_norm(_conv(x, scope, filters, 3, strides), scope)
    x = _batch_norm(_conv(x, scope, 4 * filters, 1, 1), scope, relu=False, zero_init=True)
  else:
    x = _batch_norm(_conv(x, scope, filters, 3, strides), scope)
    x = _batch_norm(_conv(x, scope, filters, 3, 1), scope, relu=False, zero_init=True)
  return keras.layers.ReLU()(keras.layers.Add()([x, shortcut]))


def resnet_v1_5(images, depth, num_classes):
  """ResNet v1.5 logits of normalized images.

  Args:
    images: Keras tensor, float32 [batch, height, width, 3] (channels_last), normalized.
    depth: one of models.resnet.DEPTHS.
    num_classes: width of the logits.

  Returns:
    Keras tensor: logits float32 [batch, num_classes].

  Raises:
    ValueError: an unsupported depth.
  """
  if depth not in resnet_spec.DEPTHS:
    raise ValueError('ResNet depth must be one of %s, got %r' % (resnet_spec.DEPTHS, depth))
  block_type, stage_blocks = resnet_spec.BLOCKS[depth]
  bottleneck = block_type == 'bottleneck'
  expansion = 4 if bottleneck else 1
  top = layers_lib.Scope()
  x = _batch_norm(_conv(images, top, 64, 7, 2), top)
  x = keras.layers.MaxPooling2D(3, strides=2, padding='same')(x)
  channels = 64
  for stage, num_blocks in enumerate(stage_blocks):
    filters = 64 * 2 ** stage
    for block in range(num_blocks):
      strides = 2 if (block == 0 and stage > 0) else 1
      project = block == 0 and (strides != 1 or channels != filters * expansion)
      scope = layers_lib.Scope('stage%d_block%d' % (stage + 1, block + 1))
      x = _block(x, scope, bottleneck, filters, strides, project)
      channels = filters * expansion
  x = keras.layers.GlobalAveragePooling2D()(x)
  return keras.layers.Dense(num_classes, name=resnet_spec.CLASSIFIER_SCOPE,
                            kernel_initializer=keras.initializers.RandomNormal(stddev=.01))(x)
