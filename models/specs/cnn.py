"""The Colab TPU demo CNN's constants ("Fashion MNIST with Keras and TPUs", 2018)."""

# Keras BatchNormalization defaults, as in the demo.
BATCH_NORM_DECAY = 0.99
BATCH_NORM_EPSILON = 1e-3
CLASSIFIER_SCOPE = 'logits'
# Three blocks: batch norm, a KERNEL_SIZE convolution of each width with ELU, a 2x2/2 max pool,
# dropout; then DENSE_UNITS with ELU and dropout; then the logits.
WIDTHS = (64, 128, 256)
KERNEL_SIZE = 5
DENSE_UNITS = 256
CONV_DROPOUT = 0.25
DENSE_DROPOUT = 0.5
