"""The sizes of examples/mobilenet.py and its Keras twin examples/mobilenet_keras.py, without
TensorFlow or Keras: both read them from here."""

# (output channels at width 1, stride) of each depthwise-separable block.
BLOCKS = ((64, 1), (128, 2), (128, 1), (256, 2))
BATCH_NORM_DECAY = 0.99
BATCH_NORM_EPSILON = 1e-3  # tf.compat.v1.layers.batch_normalization's default
