"""Networks that break the network contract (models/network_contract.py) each in one way, as a
user's code might: tests/test_your_network.py checks that each is refused at start in one line."""

import numpy as np
import tensorflow.compat.v1 as tf

not_callable = 3


def wrong_signature(images, training):  # pylint: disable=unused-argument
  return images


def _dense(features, width):
  images = tf.cast(features['image'], tf.float32)
  return tf.layers.dense(tf.reduce_mean(images, axis=[1, 2]), width)


def wrong_width(features, *, is_training, num_classes, params):  # pylint: disable=unused-argument
  return _dense(features, num_classes + 1)


def integer_logits(features, *, is_training, num_classes, params):  # pylint: disable=unused-argument
  return tf.cast(_dense(features, num_classes), tf.int32)


def no_variables(features, *, is_training, num_classes, params):  # pylint: disable=unused-argument
  batch = features['image'].shape.as_list()[0]
  return tf.zeros([batch, num_classes])


def numpy_logits(features, *, is_training, num_classes, params):  # pylint: disable=unused-argument
  return np.zeros([2, num_classes], np.float32)


def needs_a_param(features, *, is_training, num_classes, params):  # pylint: disable=unused-argument
  return _dense(features, num_classes) * params['temperature']
