"""The Colab CNN (`models.cnn`): three blocks of batch norm, 5x5 convolution with ELU, 2x2 max
pool; a 256-unit ELU layer; the logits. A plain torch.nn module (torchvision has no such
network); the flattened features are in PyTorch's [C, H, W] order (the converter reorders
TensorFlow's [H, W, C] rows of the first dense kernel)."""

from torch import nn
from torch.nn import functional as F

from trainer.models.specs import cnn as cnn_spec
from trainer.torch_models import layers

WIDTHS = (64, 128, 256)


def flat_size(image_size):
  """(side, features) after the three 2x2/2 'VALID' pools of an image_size input."""
  side = image_size
  for _ in WIDTHS:
    side //= 2
  return side, side * side * WIDTHS[-1]


class CNN(nn.Module):
  """Logits float32 [N, num_classes] of normalized images float32 [N, 3, image_size, image_size]."""

  def __init__(self, num_classes, image_size):
    super().__init__()
    channels = 3
    for i, width in enumerate(WIDTHS):
      setattr(self, 'bn%d' % (i + 1), layers.batch_norm(
          channels, cnn_spec.BATCH_NORM_EPSILON, cnn_spec.BATCH_NORM_DECAY))
      setattr(self, 'conv%d' % (i + 1), nn.Conv2d(channels, width, 5, padding=2))
      channels = width
    self.fc1 = nn.Linear(flat_size(image_size)[1], 256)
    self.fc2 = nn.Linear(256, num_classes)
    self.dropout_conv, self.dropout_fc = nn.Dropout(0.25), nn.Dropout(0.5)

  def forward(self, x):
    for i in range(len(WIDTHS)):
      x = getattr(self, 'conv%d' % (i + 1))(getattr(self, 'bn%d' % (i + 1))(x))
      x = self.dropout_conv(F.max_pool2d(F.elu(x), 2, 2))
    x = self.dropout_fc(F.elu(self.fc1(x.flatten(1))))
    return self.fc2(x)
