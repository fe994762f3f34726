"""ResNet v1.5 (He et al. 2016, "Deep Residual Learning for Image Recognition", Table 1).

v1.5 differs from the paper's v1 only in the bottleneck block: the stride-2 downsampling sits on
the 3x3 convolution instead of the first 1x1 convolution (as in the reference Cloud TPU and NVIDIA
implementations), which costs a little compute and gains ~0.5% top-1 on ImageNet.

Built from `tf.compat.v1.layers` so the same code runs on TF 1.15 and TF 2.15, on TPU and CPU/GPU,
with static shapes only.
"""

import tensorflow.compat.v1 as tf

# The constants are in models/specs/resnet.py (no TensorFlow there: the Keras twin reads them).
from trainer.models.specs.resnet import BATCH_NORM_DECAY  # pylint: disable=unused-import
from trainer.models.specs.resnet import BATCH_NORM_EPSILON
from trainer.models.specs.resnet import BLOCKS
from trainer.models.specs.resnet import CLASSIFIER_SCOPE
from trainer.models.specs.resnet import DEPTHS


def _batch_norm(inputs, is_training, data_format, relu=True, zero_init=False):
  """Batch norm (+ ReLU). zero_init sets gamma to 0 so each residual block starts as identity
  (Goyal et al. 2017, Sec. 5.1), which makes large-batch training stable."""
  inputs = tf.layers.batch_normalization(
      inputs, axis=1 if data_format == 'channels_first' else 3, momentum=BATCH_NORM_DECAY,
      epsilon=BATCH_NORM_EPSILON, center=True, scale=True, training=is_training, fused=True,
      gamma_initializer=tf.zeros_initializer() if zero_init else tf.ones_initializer())
  return tf.nn.relu(inputs) if relu else inputs


def _fixed_padding(inputs, kernel_size, data_format):
  """Pads spatially so a strided 'VALID' conv does not depend on the input size's parity."""
  pad_total = kernel_size - 1
  pad_beg = pad_total // 2
  pad_end = pad_total - pad_beg
  if data_format == 'channels_first':
    return tf.pad(inputs, [[0, 0], [0, 0], [pad_beg, pad_end], [pad_beg, pad_end]])
  return tf.pad(inputs, [[0, 0], [pad_beg, pad_end], [pad_beg, pad_end], [0, 0]])


def _spatial_shape(inputs, data_format):
  """Static (height, width) of an NHWC or NCHW tensor."""
  shape = inputs.shape.as_list()
  return tuple(shape[2:4] if data_format == 'channels_first' else shape[1:3])


def _conv(inputs, filters, kernel_size, strides, data_format):
  """A bias-free convolution ('SAME' at stride 1, fixed padding and 'VALID' when strided).

  On a 1x1 feature map a stride-1 'SAME' convolution sees its zero padding through every tap but
  the centre one, so it is computed as the 1x1 convolution of that tap: the same output and the
  same gradient (zero for the other taps, as the full convolution's), at 1/k^2 of the cost. A
  32x32 image reaches the last stage of the ImageNet stem's network at 1x1, where oneDNN's
  weight gradient of the 3x3 convolutions alone took 63% of make train's step with the ISA held to
  AVX2 (BENCHMARKS.md, "Fast on every x86 CPU"). The variable stays [k, k, in, out] under its
  usual name, so checkpoints, warm starts and the Keras conversion see the same network.
  """
  if strides > 1:
    inputs = _fixed_padding(inputs, kernel_size, data_format)
  layer = tf.layers.Conv2D(
      filters=filters, kernel_size=kernel_size, strides=strides,
      padding='SAME' if strides == 1 else 'VALID', use_bias=False,
      kernel_initializer=tf.variance_scaling_initializer(), data_format=data_format)
  outputs = layer.apply(inputs)
  if strides == 1 and kernel_size > 1 and _spatial_shape(inputs, data_format) == (1, 1):
    centre = kernel_size // 2
    # The full convolution above is left unused, so no session runs it.
    outputs = tf.nn.conv2d(
        inputs, tf.cast(layer.kernel[centre:centre + 1, centre:centre + 1], inputs.dtype),
        strides=1, padding='VALID', data_format='NCHW' if data_format == 'channels_first'
        else 'NHWC')
  return outputs


def _basic_block(inputs, filters, strides, is_training, data_format, project):
  shortcut = inputs
  if project:
    shortcut = _conv(inputs, filters, 1, strides, data_format)
    shortcut = _batch_norm(shortcut, is_training, data_format, relu=False)
  x = _conv(inputs, filters, 3, strides, data_format)
  x = _batch_norm(x, is_training, data_format)
  x = _conv(x, filters, 3, 1, data_format)
  x = _batch_norm(x, is_training, data_format, relu=False, zero_init=True)
  return tf.nn.relu(x + shortcut)


def _bottleneck_block(inputs, filters, strides, is_training, data_format, project):
  shortcut = inputs
  if project:
    shortcut = _conv(inputs, 4 * filters, 1, strides, data_format)
    shortcut = _batch_norm(shortcut, is_training, data_format, relu=False)
  x = _conv(inputs, filters, 1, 1, data_format)
  x = _batch_norm(x, is_training, data_format)
  x = _conv(x, filters, 3, strides, data_format)  # v1.5: the stride is here, not on the 1x1.
  x = _batch_norm(x, is_training, data_format)
  x = _conv(x, 4 * filters, 1, 1, data_format)
  x = _batch_norm(x, is_training, data_format, relu=False, zero_init=True)
  return tf.nn.relu(x + shortcut)


def resnet_v1_5(images, depth, num_classes, is_training, data_format='channels_last'):
  """Builds ResNet v1.5 logits.

  The stem is the ImageNet one (7x7/2 conv, 3x3/2 max-pool) at every input size, so a 32x32 input
  reaches the last stage at 1x1; that keeps small-image runs cheap and the graph identical to the
  one used on ImageNet.

  Args:
    images: float tensor [batch, height, width, 3] (channels_last) or [batch, 3, height, width]
      (channels_first), float32 or bfloat16, normalized.
    depth: one of 18, 34, 50, 101, 152, 200.
    num_classes: width of the logits.
    is_training: Python bool; selects batch statistics vs. moving averages in batch norm.
    data_format: 'channels_last' (TPU and CPU) or 'channels_first' (GPU).

  Returns:
    Logits [batch, num_classes] in the dtype of `images`.

  Raises:
    ValueError: for an unsupported depth.
  """
  if depth not in BLOCKS:
    raise ValueError('ResNet depth must be one of %s, got %r' % (DEPTHS, depth))
  block_type, stage_blocks = BLOCKS[depth]
  block_fn = _basic_block if block_type == 'basic' else _bottleneck_block
  expansion = 1 if block_type == 'basic' else 4

  x = _conv(images, 64, 7, 2, data_format)
  x = _batch_norm(x, is_training, data_format)
  x = tf.layers.max_pooling2d(x, pool_size=3, strides=2, padding='SAME', data_format=data_format)

  channels = 64
  for stage, num_blocks in enumerate(stage_blocks):
    filters = 64 * 2 ** stage
    for block in range(num_blocks):
      strides = 2 if (block == 0 and stage > 0) else 1
      project = block == 0 and (strides != 1 or channels != filters * expansion)
      with tf.variable_scope('stage%d_block%d' % (stage + 1, block + 1)):
        x = block_fn(x, filters, strides, is_training, data_format, project)
      channels = filters * expansion

  x = tf.reduce_mean(x, axis=[2, 3] if data_format == 'channels_first' else [1, 2])
  return tf.layers.dense(x, num_classes, name=CLASSIFIER_SCOPE,
                         kernel_initializer=tf.random_normal_initializer(stddev=.01))
