"""How many steps `--train_epochs` means, one rule for `trainer.main` (flags/to_config.py) and
`trainer.train_keras` (trainer/keras_run/job.py), without TensorFlow."""

import math


def steps_of_epochs(epochs, num_train_examples, batch_size):
  """The training steps of `epochs` (float) epochs of `num_train_examples` at the global
  `batch_size`: rounded up, so every example is seen `epochs` times; at least 1.

  Example: 2 epochs of 10,202 texts at batch 64 -> ceil(318.8) = 319 steps.
  """
  return max(1, int(math.ceil(epochs * num_train_examples / batch_size)))
