"""From a Keras twin loaded with a run's weights to the run's PyTorch Classifier, and out."""

import dataclasses

import numpy as np
import torch

from trainer.torch_models import classifier
from trainer.torch_models import from_keras as from_keras_lib


def from_keras(keras_model, config, vocabulary=None):
  """The Classifier of the run whose network `keras_model` holds.

  Args:
    keras_model: keras_models.build's model, its weights loaded.
    config: the run's models.model_config.ModelConfig.
    vocabulary: list of str, the run's vocab.txt (the BiLSTM); None for images.

  Returns:
    classifier.Classifier in eval mode.

  Raises:
    ValueError: settings the PyTorch network cannot take, or weights that do not correspond
      (from_keras.ConversionError).
  """
  arch = {k: v for k, v in dataclasses.asdict(config).items()
          if isinstance(v, (int, float, str, bool, type(None), tuple, list))}
  images = config.model != 'bilstm'
  module = classifier.Classifier(arch, config.mean_rgb if images else None,
                                 config.stddev_rgb if images else None,
                                 None if images else vocabulary)
  module.network.load_state_dict(from_keras_lib.state_dict(keras_model, arch, module.network))
  return module.eval()


def predict_function(module):
  """inputs (NumPy: images float [n, H, W, 3] on the 0-255 scale, or token ids [n, length]) ->
  logits (NumPy float32 [n, num_classes]), on the CPU."""

  def predict(inputs):
    inputs = np.asarray(inputs)
    if inputs.ndim == 4:
      tensor = torch.from_numpy(np.ascontiguousarray(inputs.transpose(0, 3, 1, 2),
                                                     dtype=np.float32))
    else:
      tensor = torch.from_numpy(inputs.astype(np.int64))
    with torch.no_grad():
      return module(tensor).numpy()
  return predict


save = classifier.save  # (module, path): local or gs://, written aside and renamed


def torchvision_builder(module):
  return classifier.torchvision_builder(module.arch)
