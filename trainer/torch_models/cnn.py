"""The Colab CNN (`models.cnn`): three blocks of batch norm, 5x5 convolution with ELU, 2x2 max
pool; a 256-unit ELU layer; the logits. A plain torch.nn module (torchvision has no such
network); the flattened features are in PyTorch's [C, H, W] order (the converter reorders
TensorFlow's [H, W, C] rows of the first dense kernel)."""

import torch
from torch import nn
from torch.nn import functional as F

from trainer.models.specs import cnn as cnn_spec
from trainer.torch_models import layers


def flat_size(image_size):
  """(side, features) after the three 2x2/2 'VALID' pools of an image_size input."""
  side = image_size
  for _ in cnn_spec.WIDTHS:
    side //= 2
  return side, side * side * cnn_spec.WIDTHS[-1]


def elu(x):
  """ELU (alpha 1) as where(x > 0, x, expm1(x)): F.elu's values, and a gradient PyTorch/XLA gets
  right (torch_xla 2.9.0's gradient of F.elu differs from PyTorch's by up to 1.2 on N(0, 1)
  inputs on PJRT_DEVICE=CPU, found here; a fine-tune with it diverged)."""
  return torch.where(x > 0, x, torch.expm1(torch.clamp(x, max=0.0)))


class CNN(nn.Module):
  """Logits float32 [N, num_classes] of normalized images float32 [N, 3, image_size, image_size]."""

  def __init__(self, num_classes, image_size):
    super().__init__()
    channels = 3
    for i, width in enumerate(cnn_spec.WIDTHS):
      setattr(self, 'bn%d' % (i + 1), layers.batch_norm(
          channels, cnn_spec.BATCH_NORM_EPSILON, cnn_spec.BATCH_NORM_DECAY))
      setattr(self, 'conv%d' % (i + 1), nn.Conv2d(channels, width, cnn_spec.KERNEL_SIZE,
                                                   padding=cnn_spec.KERNEL_SIZE // 2))
      channels = width
    self.fc1 = nn.Linear(flat_size(image_size)[1], cnn_spec.DENSE_UNITS)
    self.fc2 = nn.Linear(cnn_spec.DENSE_UNITS, num_classes)
    self.dropout_conv = nn.Dropout(cnn_spec.CONV_DROPOUT)
    self.dropout_fc = nn.Dropout(cnn_spec.DENSE_DROPOUT)

  def forward(self, x):
    for i in range(len(cnn_spec.WIDTHS)):
      x = getattr(self, 'conv%d' % (i + 1))(getattr(self, 'bn%d' % (i + 1))(x))
      x = self.dropout_conv(F.max_pool2d(elu(x), 2, 2))
    x = self.dropout_fc(elu(self.fc1(x.flatten(1))))
    return self.fc2(x)
