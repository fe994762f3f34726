"""A small MobileNet-style classifier (Howard et al. 2017, "MobileNets", Sec. 3.1 and Table 1):
a 3x3 convolution, then depthwise-separable blocks (3x3 depthwise convolution, batch norm, ReLU6,
1x1 pointwise convolution, batch norm, ReLU6), global average pooling and a linear classifier.
Sized for small images (no stride in the stem; two stride-2 blocks), about 0.1M parameters at
width 1.

Written as a user of the pipeline writes a network: TensorFlow only, the network contract of
docs/your-model.md, run with

  python -m trainer.main --network=examples.mobilenet:mobilenet \
      --network_params='{"width": 0.5}' ...

Variables are float32 and named <block>/<layer>/<weight>, e.g. block2/depthwise/kernel,
block2/pointwise_bn/gamma, classifier/kernel.
"""

import tensorflow.compat.v1 as tf

from examples.mobilenet_spec import BATCH_NORM_DECAY
from examples.mobilenet_spec import BATCH_NORM_EPSILON
from examples.mobilenet_spec import BLOCKS


def _batch_norm_relu6(net, is_training, name):
  net = tf.layers.batch_normalization(net, momentum=BATCH_NORM_DECAY, epsilon=BATCH_NORM_EPSILON,
                                      training=is_training, fused=True, name=name)
  return tf.nn.relu6(net)


def _depthwise(net, stride, name):
  """A 3x3 depthwise convolution (one filter per input channel), no bias."""
  channels = net.shape.as_list()[-1]
  with tf.variable_scope(name):
    kernel = tf.get_variable('kernel', [3, 3, channels, 1], tf.float32,
                             tf.glorot_uniform_initializer())
    return tf.nn.depthwise_conv2d(net, tf.cast(kernel, net.dtype), [1, stride, stride, 1],
                                  'SAME')


def mobilenet(features, *, is_training, num_classes, params):
  """The network contract (docs/your-model.md).

  Args:
    features: dict; features['image'] uint8 or float [batch, size, size, 3], 0-255 pixels.
    is_training: Python bool.
    num_classes: int, the width of the logits.
    params: dict: 'mean_rgb', 'stddev_rgb' (0-255 scale), 'precision' ('float32' or
      'bfloat16'), and the optional 'width' (float, default 1.0: channels multiplier).

  Returns:
    logits float [batch, num_classes].
  """
  width = float(params.get('width', 1.0))
  dtype = tf.bfloat16 if params['precision'] == 'bfloat16' else tf.float32
  images = tf.cast(features['image'], tf.float32)
  images = (images - tf.constant(params['mean_rgb'])) / tf.constant(params['stddev_rgb'])
  net = tf.layers.conv2d(tf.cast(images, dtype), int(32 * width), 3, padding='same',
                         use_bias=False, name='stem')
  net = _batch_norm_relu6(net, is_training, 'stem_bn')
  for i, (channels, stride) in enumerate(BLOCKS):
    with tf.variable_scope('block%d' % (i + 1)):
      net = _depthwise(net, stride, 'depthwise')
      net = _batch_norm_relu6(net, is_training, 'depthwise_bn')
      net = tf.layers.conv2d(net, int(channels * width), 1, use_bias=False, name='pointwise')
      net = _batch_norm_relu6(net, is_training, 'pointwise_bn')
  net = tf.reduce_mean(net, axis=[1, 2])
  return tf.layers.dense(net, num_classes, name='classifier')
