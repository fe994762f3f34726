"""InceptionV3 (Szegedy et al. 2016, "Rethinking the Inception Architecture for Computer Vision").

The network of the paper's Table 1 / Figures 5-7 with the block widths of the public reference
implementations (TF-slim, Keras applications): factorized 5x5 (Mixed_5*), 7x7 (Mixed_6*) and
expanded 3x3 (Mixed_7*) Inception modules, grid reductions of Sec. 5 (Mixed_6a, Mixed_7a), batch
norm after every convolution, and the auxiliary classifier on the 17x17 grid (Sec. 4).

Inputs of any size >= 75x75 work: at 299x299 the grids are 35/17/8, at 75x75 they are 7/3/1. The
average pools of the heads shrink their kernels to the grid they get, as TF-slim does for small
inputs. Built from `tf.compat.v1.layers`, so the same code runs on TF 1.15 and TF 2.15 and, with
static shapes only, on TPU.
"""

import tensorflow.compat.v1 as tf

from trainer.models import seeded
from trainer.models.specs.inception_v3 import AUX_SCOPE  # pylint: disable=unused-import
from trainer.models.specs.inception_v3 import BATCH_NORM_DECAY
from trainer.models.specs.inception_v3 import BATCH_NORM_EPSILON
from trainer.models.specs.inception_v3 import CLASSIFIER_SCOPE
from trainer.models.specs.inception_v3 import DROPOUT_RATE
from trainer.models.specs.inception_v3 import MIN_IMAGE_SIZE


def _conv(inputs, filters, kernel_size, is_training, strides=1, padding='SAME', name=None):
  """Conv (no bias) + batch norm (beta only: a ReLU follows, so a scale would be redundant)
  + ReLU."""
  with tf.variable_scope(name):
    net = tf.layers.conv2d(inputs, filters, kernel_size, strides=strides, padding=padding,
                           use_bias=False, kernel_initializer=tf.variance_scaling_initializer())
    net = tf.layers.batch_normalization(net, momentum=BATCH_NORM_DECAY, epsilon=BATCH_NORM_EPSILON,
                                        center=True, scale=False, training=is_training, fused=True)
    return tf.nn.relu(net)


def _avg_pool_3x3(inputs):
  return tf.layers.average_pooling2d(inputs, 3, strides=1, padding='SAME')


def _max_pool_3x3_s2(inputs):
  return tf.layers.max_pooling2d(inputs, 3, strides=2, padding='VALID')


def _mixed_5(net, pool_filters, is_training, name):
  """35x35 module with the 5x5 branch and a double 3x3 branch (Figure 5)."""
  with tf.variable_scope(name):
    b0 = _conv(net, 64, 1, is_training, name='Branch_0_1x1')
    b1 = _conv(net, 48, 1, is_training, name='Branch_1_1x1')
    b1 = _conv(b1, 64, 5, is_training, name='Branch_1_5x5')
    b2 = _conv(net, 64, 1, is_training, name='Branch_2_1x1')
    b2 = _conv(b2, 96, 3, is_training, name='Branch_2_3x3a')
    b2 = _conv(b2, 96, 3, is_training, name='Branch_2_3x3b')
    b3 = _conv(_avg_pool_3x3(net), pool_filters, 1, is_training, name='Branch_3_1x1')
    return tf.concat([b0, b1, b2, b3], axis=3)


def _mixed_6a(net, is_training):
  """35x35 -> 17x17 grid reduction (Sec. 5, Figure 10)."""
  with tf.variable_scope('Mixed_6a'):
    b0 = _conv(net, 384, 3, is_training, strides=2, padding='VALID', name='Branch_0_3x3')
    b1 = _conv(net, 64, 1, is_training, name='Branch_1_1x1')
    b1 = _conv(b1, 96, 3, is_training, name='Branch_1_3x3a')
    b1 = _conv(b1, 96, 3, is_training, strides=2, padding='VALID', name='Branch_1_3x3b')
    b2 = _max_pool_3x3_s2(net)
    return tf.concat([b0, b1, b2], axis=3)


def _mixed_6(net, channels, is_training, name):
  """17x17 module with 7x7 convolutions factorized into 1x7 and 7x1 (Figure 6)."""
  with tf.variable_scope(name):
    b0 = _conv(net, 192, 1, is_training, name='Branch_0_1x1')
    b1 = _conv(net, channels, 1, is_training, name='Branch_1_1x1')
    b1 = _conv(b1, channels, (1, 7), is_training, name='Branch_1_1x7')
    b1 = _conv(b1, 192, (7, 1), is_training, name='Branch_1_7x1')
    b2 = _conv(net, channels, 1, is_training, name='Branch_2_1x1')
    b2 = _conv(b2, channels, (7, 1), is_training, name='Branch_2_7x1a')
    b2 = _conv(b2, channels, (1, 7), is_training, name='Branch_2_1x7a')
    b2 = _conv(b2, channels, (7, 1), is_training, name='Branch_2_7x1b')
    b2 = _conv(b2, 192, (1, 7), is_training, name='Branch_2_1x7b')
    b3 = _conv(_avg_pool_3x3(net), 192, 1, is_training, name='Branch_3_1x1')
    return tf.concat([b0, b1, b2, b3], axis=3)


def _mixed_7a(net, is_training):
  """17x17 -> 8x8 grid reduction."""
  with tf.variable_scope('Mixed_7a'):
    b0 = _conv(net, 192, 1, is_training, name='Branch_0_1x1')
    b0 = _conv(b0, 320, 3, is_training, strides=2, padding='VALID', name='Branch_0_3x3')
    b1 = _conv(net, 192, 1, is_training, name='Branch_1_1x1')
    b1 = _conv(b1, 192, (1, 7), is_training, name='Branch_1_1x7')
    b1 = _conv(b1, 192, (7, 1), is_training, name='Branch_1_7x1')
    b1 = _conv(b1, 192, 3, is_training, strides=2, padding='VALID', name='Branch_1_3x3')
    b2 = _max_pool_3x3_s2(net)
    return tf.concat([b0, b1, b2], axis=3)


def _mixed_7(net, is_training, name):
  """8x8 module with expanded filter banks: 3x3 split into parallel 1x3 and 3x1 (Figure 7)."""
  with tf.variable_scope(name):
    b0 = _conv(net, 320, 1, is_training, name='Branch_0_1x1')
    b1 = _conv(net, 384, 1, is_training, name='Branch_1_1x1')
    b1 = tf.concat([_conv(b1, 384, (1, 3), is_training, name='Branch_1_1x3'),
                    _conv(b1, 384, (3, 1), is_training, name='Branch_1_3x1')], axis=3)
    b2 = _conv(net, 448, 1, is_training, name='Branch_2_1x1')
    b2 = _conv(b2, 384, 3, is_training, name='Branch_2_3x3')
    b2 = tf.concat([_conv(b2, 384, (1, 3), is_training, name='Branch_2_1x3'),
                    _conv(b2, 384, (3, 1), is_training, name='Branch_2_3x1')], axis=3)
    b3 = _conv(_avg_pool_3x3(net), 192, 1, is_training, name='Branch_3_1x1')
    return tf.concat([b0, b1, b2, b3], axis=3)


def _aux_logits(net, num_classes, is_training):
  """Auxiliary classifier on the 17x17 grid (Sec. 4): 5x5/3 average pool, 1x1 conv (128),
  a conv covering the pooled grid (768; 5x5 at 299x299), and a linear 1x1 classifier."""
  with tf.variable_scope(AUX_SCOPE):
    size = net.shape.as_list()[1]
    aux = tf.layers.average_pooling2d(net, min(5, size), strides=3, padding='VALID')
    aux = _conv(aux, 128, 1, is_training, name='Conv2d_1x1')
    aux = _conv(aux, 768, aux.shape.as_list()[1], is_training, padding='VALID', name='Conv2d_cover')
    aux = tf.layers.conv2d(aux, num_classes, 1,
                           kernel_initializer=tf.truncated_normal_initializer(stddev=0.001),
                           name='logits')
    return tf.squeeze(aux, [1, 2])


def inception_v3(images, num_classes, is_training):
  """Builds InceptionV3.

  Args:
    images: float32 or bfloat16 [batch, height, width, 3] with height, width >= 75 (static).
    num_classes: width of the logits.
    is_training: Python bool; batch norm uses batch statistics and dropout is active when True.

  Returns:
    (logits, aux_logits): float [batch, num_classes] each; aux_logits is None when not training
    (the auxiliary head only shapes the training loss).

  Raises:
    ValueError: the images are smaller than 75x75.
  """
  height, width = images.shape.as_list()[1:3]
  if min(height, width) < MIN_IMAGE_SIZE:
    raise ValueError('InceptionV3 needs inputs of at least %dx%d, got %dx%d'
                     % (MIN_IMAGE_SIZE, MIN_IMAGE_SIZE, height, width))
  net = _conv(images, 32, 3, is_training, strides=2, padding='VALID', name='Conv2d_1a_3x3')
  net = _conv(net, 32, 3, is_training, padding='VALID', name='Conv2d_2a_3x3')
  net = _conv(net, 64, 3, is_training, name='Conv2d_2b_3x3')
  net = _max_pool_3x3_s2(net)
  net = _conv(net, 80, 1, is_training, padding='VALID', name='Conv2d_3b_1x1')
  net = _conv(net, 192, 3, is_training, padding='VALID', name='Conv2d_4a_3x3')
  net = _max_pool_3x3_s2(net)
  net = _mixed_5(net, 32, is_training, 'Mixed_5b')
  net = _mixed_5(net, 64, is_training, 'Mixed_5c')
  net = _mixed_5(net, 64, is_training, 'Mixed_5d')
  net = _mixed_6a(net, is_training)
  for name, channels in (('Mixed_6b', 128), ('Mixed_6c', 160), ('Mixed_6d', 160),
                         ('Mixed_6e', 192)):
    net = _mixed_6(net, channels, is_training, name)
  aux_logits = _aux_logits(net, num_classes, is_training) if is_training else None
  net = _mixed_7a(net, is_training)
  net = _mixed_7(net, is_training, 'Mixed_7b')
  net = _mixed_7(net, is_training, 'Mixed_7c')
  net = tf.reduce_mean(net, axis=[1, 2])  # the 8x8 average pool at 299x299, global at any size
  net = seeded.dropout(net, rate=DROPOUT_RATE, is_training=is_training)
  logits = tf.layers.dense(net, num_classes, name=CLASSIFIER_SCOPE,
                           kernel_initializer=seeded.glorot_uniform())
  return logits, aux_logits
