"""A trained run as one PyTorch module, and its file.

`Classifier` = the run's input preprocessing + its network: for images the per-channel
normalization the run applied (forward takes pixels on the 0-255 scale); for the BiLSTM the token
ids (forward takes int64 ids; `preprocess(texts)` makes them with the run's tokenizer and
vocabulary). `save` writes one file with torch.save: the network's state_dict (torchvision's
layout for ResNet and InceptionV3), the settings that build it, and the preprocessing; `load`
reads it back with this package, or take `state_dict` alone into torchvision's class
(docs/migration.md, "To PyTorch").
"""

import io
import pickle

import torch
from torch import nn

from trainer.storage import gfile
from trainer.storage import staged
from trainer.torch_models import bilstm
from trainer.torch_models import cnn
from trainer.torch_models import inception_v3
from trainer.torch_models import layers
from trainer.torch_models import resnet
from trainer.torch_models import text

FORMAT = 'tpu-estimator-pipeline/pytorch/1'


def network(arch):
  """The network module of `arch` (a dict: model, num_classes and the model's settings).

  Raises:
    ValueError: an unknown model, or settings the network cannot take.
  """
  model = arch['model']
  if model == 'resnet':
    return resnet.ResNet(arch['resnet_depth'], arch['num_classes'])
  if model == 'inception_v3':
    return inception_v3.Inception3(arch['num_classes'], arch['image_size'])
  if model == 'cnn':
    return cnn.CNN(arch['num_classes'], arch['image_size'])
  if model == 'bilstm':
    return bilstm.BiLSTM(arch['vocab_size'], arch['num_classes'], arch['embedding_dim'],
                         arch['lstm_hidden_units'], arch['lstm_layers'], arch['lstm_pooling'],
                         arch['dropout_rate'])
  raise ValueError('unknown model %r' % (model,))


def torchvision_builder(arch):
  """The torchvision.models function whose class takes this network's state_dict, or None."""
  if arch['model'] == 'resnet':
    return resnet.TORCHVISION.get(arch['resnet_depth'])
  if (arch['model'] == 'inception_v3' and
      inception_v3.aux_pool_and_cover(arch['image_size']) == (5, 5)):
    return 'inception_v3'  # torchvision's auxiliary head: a 5x5 pool, then a 5x5 convolution
  return None


class Classifier(nn.Module):
  """The run's network behind its input preprocessing.

  forward: images float [N, 3, H, W] on the 0-255 scale (H = W = arch['image_size'], resized and
  cropped as the run's evaluation did: trainer/data/preprocessing.py), or token ids int64
  [N, max_seq_length]; returns logits float32 [N, num_classes].
  """

  def __init__(self, arch, mean_rgb=None, stddev_rgb=None, vocabulary=None):
    super().__init__()
    self.arch = dict(arch)
    self.vocabulary = list(vocabulary) if vocabulary is not None else None
    self.normalize = (layers.Normalize(mean_rgb, stddev_rgb) if arch['model'] != 'bilstm'
                      else None)
    self.network = network(arch)

  def forward(self, inputs):
    return self.network(self.normalize(inputs) if self.normalize is not None else inputs)

  def preprocess(self, texts):
    """Texts (str or UTF-8 bytes) -> token ids int64 [N, max_seq_length] for `forward`.

    Raises:
      ValueError: an image network (its inputs are pixels).
    """
    if self.vocabulary is None:
      raise ValueError('preprocess is the BiLSTM\'s: an image network takes pixels')
    return torch.tensor(text.token_ids(texts, self.vocabulary, self.arch['max_seq_length']),
                        dtype=torch.int64)


def write(path, value):
  """torch.save of `value` to `path` (local or gs://), written aside and renamed: never half a
  file. Through a buffer: torch.save writes memoryviews, which TensorFlow's GFile (the storage
  backend where TensorFlow is installed) refuses."""
  buffer = io.BytesIO()
  torch.save(value, buffer)
  with staged.staged_file(path, 'wb') as f:
    f.write(buffer.getvalue())


def read(path):
  """What `write` wrote to `path` (tensors on the CPU; plain data only: weights_only).

  Raises:
    ValueError: a file torch.save did not write, or one holding more than data.
  """
  with gfile.GFile(path, 'rb') as f:
    data = f.read()
  try:
    return torch.load(io.BytesIO(data), map_location='cpu', weights_only=True)
  except (pickle.UnpicklingError, RuntimeError, EOFError) as e:
    raise ValueError('%s is not a file of torch.save holding only tensors and plain data (%s)'
                     % (path, str(e).splitlines()[0]))


def save(classifier, path):
  """Writes `classifier` to `path` (`write` of a dict: format, arch, state_dict in the
  network's layout, mean_rgb/stddev_rgb or vocabulary, torchvision)."""
  normalize = classifier.normalize
  write(path, {
      'format': FORMAT, 'arch': classifier.arch,
      'state_dict': classifier.network.state_dict(),
      'mean_rgb': normalize.mean.flatten().tolist() if normalize is not None else None,
      'stddev_rgb': normalize.stddev.flatten().tolist() if normalize is not None else None,
      'vocabulary': classifier.vocabulary,
      'torchvision': torchvision_builder(classifier.arch)})


def load(path):
  """The Classifier saved at `path`, in eval mode.

  Raises:
    ValueError: a file that `save` did not write.
  """
  saved = read(path)
  if not isinstance(saved, dict) or saved.get('format') != FORMAT:
    raise ValueError('%s is not a PyTorch export of this pipeline (format %s)' % (path, FORMAT))
  classifier = Classifier(saved['arch'], saved['mean_rgb'], saved['stddev_rgb'],
                          saved['vocabulary'])
  classifier.network.load_state_dict(saved['state_dict'])
  return classifier.eval()
