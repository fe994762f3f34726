"""The Colab CNN in Keras 3: the network of `models.cnn`, layer for layer, with its layer names."""

import keras

from trainer.keras_models import layers as layers_lib
from trainer.models.specs import cnn as cnn_spec


def cnn(images, num_classes):
  """The CNN's logits of normalized images.

  Args:
    images: Keras tensor, float32 [batch, height, width, channels], height and width >= 8.
    num_classes: width of the logits.

  Returns:
    Keras tensor: logits float32 [batch, num_classes].
  """
  x = images
  for i, filters in enumerate(cnn_spec.WIDTHS):
    scope = layers_lib.Scope('block%d' % (i + 1))
    x = keras.layers.BatchNormalization(
        momentum=cnn_spec.BATCH_NORM_DECAY,
        epsilon=layers_lib.fused_epsilon(cnn_spec.BATCH_NORM_EPSILON),
        name=scope.name('batch_normalization'))(x)
    x = keras.layers.Conv2D(filters, cnn_spec.KERNEL_SIZE, padding='same', activation='elu',
                            name=scope.name('conv2d'))(x)
    x = keras.layers.MaxPooling2D(2, strides=2)(x)
    x = keras.layers.Dropout(cnn_spec.CONV_DROPOUT)(x)
  x = keras.layers.Flatten()(x)
  x = keras.layers.Dense(cnn_spec.DENSE_UNITS, activation='elu', name='dense')(x)
  x = keras.layers.Dropout(cnn_spec.DENSE_DROPOUT)(x)
  return keras.layers.Dense(num_classes, name=cnn_spec.CLASSIFIER_SCOPE)(x)
