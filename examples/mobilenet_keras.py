"""The Keras 3 twin of examples/mobilenet.py, for `trainer.export_keras --keras_network=` and
`trainer.train_keras --network=` (docs/your-model.md): the same layers, each Keras layer named
for the TF variable scope of its twin with '-' for '/' (block1-depthwise holds
block1/depthwise/kernel), so that a checkpoint of the TF network loads into it by name.
Keras only: it runs on TensorFlow, JAX and PyTorch.
"""

import keras

from examples.mobilenet_spec import BATCH_NORM_DECAY
from examples.mobilenet_spec import BATCH_NORM_EPSILON
from examples.mobilenet_spec import BLOCKS


def _batch_norm_relu6(net, name):
  net = keras.layers.BatchNormalization(momentum=BATCH_NORM_DECAY, epsilon=BATCH_NORM_EPSILON,
                                          name=name)(net)
  return keras.layers.ReLU(max_value=6.0)(net)


def mobilenet(*, num_classes, params):
  """The Keras twin contract (docs/your-model.md).

  Args:
    num_classes: int, the width of the logits.
    params: the dict the TF network gets: 'image_size', 'mean_rgb', 'stddev_rgb' and the
      optional 'width'.

  Returns:
    keras.Model from `image` (uint8 or float [batch, size, size, 3], 0-255 pixels) to logits
    float32 [batch, num_classes].
  """
  width = float(params.get('width', 1.0))
  size = params['image_size']
  image = keras.Input((size, size, 3), name='image')
  net = keras.layers.Normalization(axis=-1, mean=list(params['mean_rgb']),
                                   variance=[s * s for s in params['stddev_rgb']])(image)
  net = keras.layers.Conv2D(int(32 * width), 3, padding='same', use_bias=False, name='stem')(net)
  net = _batch_norm_relu6(net, 'stem_bn')
  for i, (channels, stride) in enumerate(BLOCKS):
    block = 'block%d-' % (i + 1)
    net = keras.layers.DepthwiseConv2D(3, strides=stride, padding='same', use_bias=False,
                                       name=block + 'depthwise')(net)
    net = _batch_norm_relu6(net, block + 'depthwise_bn')
    net = keras.layers.Conv2D(int(channels * width), 1, use_bias=False,
                              name=block + 'pointwise')(net)
    net = _batch_norm_relu6(net, block + 'pointwise_bn')
  net = keras.layers.GlobalAveragePooling2D()(net)
  logits = keras.layers.Dense(num_classes, name='classifier')(net)
  return keras.Model(image, logits, name='mobilenet')
