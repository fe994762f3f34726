"""The small convolutional network of the Colab TPU Fashion-MNIST demo ("Fashion MNIST with Keras
and TPUs", TensorFlow Colab notebooks, 2018): three blocks of [batch norm, 5x5 conv ('same', ELU),
2x2 max-pool, dropout 0.25] with 64, 128 and 256 filters, then Dense 256 + ELU, dropout 0.5 and a
linear classifier. About 1.6M parameters at 28x28.
"""

import tensorflow.compat.v1 as tf

from trainer.models import seeded
from trainer.models.specs import cnn as cnn_spec
from trainer.models.specs.cnn import BATCH_NORM_DECAY  # pylint: disable=unused-import
from trainer.models.specs.cnn import BATCH_NORM_EPSILON
from trainer.models.specs.cnn import CLASSIFIER_SCOPE


@tf.custom_gradient
def elu(x):
  """ELU (Clevert et al. 2016): x for x > 0, exp(x) - 1 otherwise, with its gradient written out.

  Written when this network diverged on intel-tensorflow 1.15.2 with the built-in EluGrad
  (BENCHMARKS.md, the CNN's runs). The cause found later: that build's fused Conv2D + BiasAdd +
  Elu computes ReLU (trainer/run/tf_build.py turns the fusion off for this network); reading
  the pre-activation here also kept the training graph off it, not the evaluation graph. The
  forward tf.nn.elu kernel is kept; the gradient, 1 for x > 0 and elu(x) + 1 otherwise, is
  computed here.
  """
  y = tf.nn.elu(x)

  def grad(dy):
    return dy * tf.where(x > 0, tf.ones_like(y), y + 1.)
  return y, grad


def cnn(images, num_classes, is_training):
  """Builds the network.

  Args:
    images: float32 or bfloat16 [batch, height, width, channels], height and width >= 8 (static).
    num_classes: width of the logits.
    is_training: Python bool; batch statistics and dropout when True.

  Returns:
    logits: float [batch, num_classes].
  """
  net = images
  for i, filters in enumerate(cnn_spec.WIDTHS):
    with tf.variable_scope('block%d' % (i + 1)):
      net = tf.layers.batch_normalization(net, momentum=BATCH_NORM_DECAY,
                                          epsilon=BATCH_NORM_EPSILON, training=is_training,
                                          fused=True)
      net = tf.layers.conv2d(net, filters, cnn_spec.KERNEL_SIZE, padding='same', activation=elu,
                             kernel_initializer=seeded.glorot_uniform())
      net = tf.layers.max_pooling2d(net, 2, strides=2)
      net = seeded.dropout(net, rate=cnn_spec.CONV_DROPOUT, is_training=is_training)
  net = tf.layers.flatten(net)
  net = tf.layers.dense(net, cnn_spec.DENSE_UNITS, activation=elu, name='dense',
                        kernel_initializer=seeded.glorot_uniform())
  net = seeded.dropout(net, rate=cnn_spec.DENSE_DROPOUT, is_training=is_training)
  return tf.layers.dense(net, num_classes, name=CLASSIFIER_SCOPE,
                         kernel_initializer=seeded.glorot_uniform())
