"""The Colab TPU demo CNN's constants ("Fashion MNIST with Keras and TPUs", 2018)."""

# Keras BatchNormalization defaults, as in the demo.
BATCH_NORM_DECAY = 0.99
BATCH_NORM_EPSILON = 1e-3
CLASSIFIER_SCOPE = 'logits'
