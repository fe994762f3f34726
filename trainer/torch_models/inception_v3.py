"""InceptionV3 (Szegedy et al. 2016) with its auxiliary classifier, in the layout of
`torchvision.models.inception_v3` (itself ported from TensorFlow): the same module and parameter
names, so the state_dict of a run at 299 to 346 px loads into torchvision's class. Two things compute as
TensorFlow did, not as torchvision does: the 3x3 average pools of the mixed blocks leave the
padding out of the mean (layers.same_avg_pool_3x3), and the auxiliary head's pool and 'cover'
convolution follow the map's size (models.inception_v3), so outside 299-346 px its conv1 kernel
is not torchvision's 5x5."""

import collections

import torch
from torch import nn
from torch.nn import functional as F

from trainer.models.specs import inception_v3 as inception_spec
from trainer.torch_models import layers

# Training mode's outputs, as torchvision's InceptionOutputs.
InceptionOutputs = collections.namedtuple('InceptionOutputs', 'logits aux_logits')


class BasicConv2d(nn.Module):
  """Convolution (no bias), batch norm (gamma 1 in TF's network: kept as a weight), ReLU."""

  def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0):
    super().__init__()
    self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding, bias=False)
    self.bn = layers.batch_norm(out_channels, inception_spec.BATCH_NORM_EPSILON,
                                inception_spec.BATCH_NORM_DECAY, affine_weight=False)

  def forward(self, x):
    return F.relu(self.bn(self.conv(x)))


class InceptionA(nn.Module):

  def __init__(self, in_channels, pool_features):
    super().__init__()
    self.branch1x1 = BasicConv2d(in_channels, 64, 1)
    self.branch5x5_1 = BasicConv2d(in_channels, 48, 1)
    self.branch5x5_2 = BasicConv2d(48, 64, 5, padding=2)
    self.branch3x3dbl_1 = BasicConv2d(in_channels, 64, 1)
    self.branch3x3dbl_2 = BasicConv2d(64, 96, 3, padding=1)
    self.branch3x3dbl_3 = BasicConv2d(96, 96, 3, padding=1)
    self.branch_pool = BasicConv2d(in_channels, pool_features, 1)

  def forward(self, x):
    return torch.cat([
        self.branch1x1(x), self.branch5x5_2(self.branch5x5_1(x)),
        self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x))),
        self.branch_pool(layers.same_avg_pool_3x3(x))], 1)


class InceptionB(nn.Module):

  def __init__(self, in_channels):
    super().__init__()
    self.branch3x3 = BasicConv2d(in_channels, 384, 3, stride=2)
    self.branch3x3dbl_1 = BasicConv2d(in_channels, 64, 1)
    self.branch3x3dbl_2 = BasicConv2d(64, 96, 3, padding=1)
    self.branch3x3dbl_3 = BasicConv2d(96, 96, 3, stride=2)

  def forward(self, x):
    return torch.cat([
        self.branch3x3(x), self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x))),
        F.max_pool2d(x, 3, 2)], 1)


class InceptionC(nn.Module):

  def __init__(self, in_channels, channels_7x7):
    super().__init__()
    c7 = channels_7x7
    self.branch1x1 = BasicConv2d(in_channels, 192, 1)
    self.branch7x7_1 = BasicConv2d(in_channels, c7, 1)
    self.branch7x7_2 = BasicConv2d(c7, c7, (1, 7), padding=(0, 3))
    self.branch7x7_3 = BasicConv2d(c7, 192, (7, 1), padding=(3, 0))
    self.branch7x7dbl_1 = BasicConv2d(in_channels, c7, 1)
    self.branch7x7dbl_2 = BasicConv2d(c7, c7, (7, 1), padding=(3, 0))
    self.branch7x7dbl_3 = BasicConv2d(c7, c7, (1, 7), padding=(0, 3))
    self.branch7x7dbl_4 = BasicConv2d(c7, c7, (7, 1), padding=(3, 0))
    self.branch7x7dbl_5 = BasicConv2d(c7, 192, (1, 7), padding=(0, 3))
    self.branch_pool = BasicConv2d(in_channels, 192, 1)

  def forward(self, x):
    b1 = self.branch7x7_3(self.branch7x7_2(self.branch7x7_1(x)))
    b2 = x
    for i in range(1, 6):
      b2 = getattr(self, 'branch7x7dbl_%d' % i)(b2)
    return torch.cat([self.branch1x1(x), b1, b2,
                      self.branch_pool(layers.same_avg_pool_3x3(x))], 1)


class InceptionD(nn.Module):

  def __init__(self, in_channels):
    super().__init__()
    self.branch3x3_1 = BasicConv2d(in_channels, 192, 1)
    self.branch3x3_2 = BasicConv2d(192, 320, 3, stride=2)
    self.branch7x7x3_1 = BasicConv2d(in_channels, 192, 1)
    self.branch7x7x3_2 = BasicConv2d(192, 192, (1, 7), padding=(0, 3))
    self.branch7x7x3_3 = BasicConv2d(192, 192, (7, 1), padding=(3, 0))
    self.branch7x7x3_4 = BasicConv2d(192, 192, 3, stride=2)

  def forward(self, x):
    b1 = x
    for i in range(1, 5):
      b1 = getattr(self, 'branch7x7x3_%d' % i)(b1)
    return torch.cat([self.branch3x3_2(self.branch3x3_1(x)), b1, F.max_pool2d(x, 3, 2)], 1)


class InceptionE(nn.Module):

  def __init__(self, in_channels):
    super().__init__()
    self.branch1x1 = BasicConv2d(in_channels, 320, 1)
    self.branch3x3_1 = BasicConv2d(in_channels, 384, 1)
    self.branch3x3_2a = BasicConv2d(384, 384, (1, 3), padding=(0, 1))
    self.branch3x3_2b = BasicConv2d(384, 384, (3, 1), padding=(1, 0))
    self.branch3x3dbl_1 = BasicConv2d(in_channels, 448, 1)
    self.branch3x3dbl_2 = BasicConv2d(448, 384, 3, padding=1)
    self.branch3x3dbl_3a = BasicConv2d(384, 384, (1, 3), padding=(0, 1))
    self.branch3x3dbl_3b = BasicConv2d(384, 384, (3, 1), padding=(1, 0))
    self.branch_pool = BasicConv2d(in_channels, 192, 1)

  def forward(self, x):
    b1 = self.branch3x3_1(x)
    b1 = torch.cat([self.branch3x3_2a(b1), self.branch3x3_2b(b1)], 1)
    b2 = self.branch3x3dbl_2(self.branch3x3dbl_1(x))
    b2 = torch.cat([self.branch3x3dbl_3a(b2), self.branch3x3dbl_3b(b2)], 1)
    return torch.cat([self.branch1x1(x), b1, b2,
                      self.branch_pool(layers.same_avg_pool_3x3(x))], 1)


def _side_after_stem(image_size):
  """The map's side at Mixed_6e (the auxiliary head's input) for an image_size input."""
  side = (image_size - 3) // 2 + 1 - 2      # Conv2d_1a_3x3 /2, Conv2d_2a_3x3 'VALID'
  side = (side - 3) // 2 + 1 - 2            # max pool /2, Conv2d_4a_3x3 'VALID'
  side = (side - 3) // 2 + 1                # max pool /2
  return (side - 3) // 2 + 1                # Mixed_6a /2


def aux_pool_and_cover(image_size):
  """(pool, cover): the auxiliary head's 'VALID' average pool, min(5, side) with stride 3 on
  Mixed_6e's map of side `side`, and its next convolution's kernel, which covers what is left
  (5x5 from 299 to 346 px, as torchvision's; 1x1 at 75 px; 9x9 at 512)."""
  side = _side_after_stem(image_size)
  pool = min(5, side)
  return pool, (side - pool) // 3 + 1


class InceptionAux(nn.Module):
  """The auxiliary classifier on Mixed_6e's map of an image_size input: the pool and
  covering convolution of `aux_pool_and_cover`, a 1x1 convolution between them, the logits."""

  def __init__(self, in_channels, num_classes, image_size):
    super().__init__()
    self.pool, cover = aux_pool_and_cover(image_size)
    self.conv0 = BasicConv2d(in_channels, 128, 1)
    self.conv1 = BasicConv2d(128, 768, cover)
    self.fc = nn.Linear(768, num_classes)

  def forward(self, x):
    x = self.conv1(self.conv0(F.avg_pool2d(x, self.pool, stride=3)))
    return self.fc(x.flatten(1))


class Inception3(nn.Module):
  """Logits float32 [N, num_classes] of normalized images float32 [N, 3, image_size, image_size]
  (in training mode InceptionOutputs(logits, aux_logits), as torchvision's).

  Raises:
    ValueError: image_size below models.specs.inception_v3.MIN_IMAGE_SIZE.
  """

  def __init__(self, num_classes, image_size):
    super().__init__()
    if image_size < inception_spec.MIN_IMAGE_SIZE:
      raise ValueError('InceptionV3 needs inputs of at least %dx%d, got %d'
                       % (inception_spec.MIN_IMAGE_SIZE, inception_spec.MIN_IMAGE_SIZE,
                          image_size))
    self.Conv2d_1a_3x3 = BasicConv2d(3, 32, 3, stride=2)
    self.Conv2d_2a_3x3 = BasicConv2d(32, 32, 3)
    self.Conv2d_2b_3x3 = BasicConv2d(32, 64, 3, padding=1)
    self.maxpool1 = nn.MaxPool2d(3, 2)
    self.Conv2d_3b_1x1 = BasicConv2d(64, 80, 1)
    self.Conv2d_4a_3x3 = BasicConv2d(80, 192, 3)
    self.maxpool2 = nn.MaxPool2d(3, 2)
    self.Mixed_5b = InceptionA(192, 32)
    self.Mixed_5c = InceptionA(256, 64)
    self.Mixed_5d = InceptionA(288, 64)
    self.Mixed_6a = InceptionB(288)
    self.Mixed_6b = InceptionC(768, 128)
    self.Mixed_6c = InceptionC(768, 160)
    self.Mixed_6d = InceptionC(768, 160)
    self.Mixed_6e = InceptionC(768, 192)
    self.AuxLogits = InceptionAux(768, num_classes, image_size)
    self.Mixed_7a = InceptionD(768)
    self.Mixed_7b = InceptionE(1280)
    self.Mixed_7c = InceptionE(2048)
    self.avgpool = nn.AdaptiveAvgPool2d(1)
    self.dropout = nn.Dropout(inception_spec.DROPOUT_RATE)
    self.fc = nn.Linear(2048, num_classes)

  def forward(self, x):
    for name in ('Conv2d_1a_3x3', 'Conv2d_2a_3x3', 'Conv2d_2b_3x3', 'maxpool1', 'Conv2d_3b_1x1',
                 'Conv2d_4a_3x3', 'maxpool2', 'Mixed_5b', 'Mixed_5c', 'Mixed_5d', 'Mixed_6a',
                 'Mixed_6b', 'Mixed_6c', 'Mixed_6d', 'Mixed_6e'):
      x = getattr(self, name)(x)
    aux = self.AuxLogits(x) if self.training else None
    x = self.Mixed_7c(self.Mixed_7b(self.Mixed_7a(x)))
    logits = self.fc(self.dropout(self.avgpool(x).flatten(1)))
    return InceptionOutputs(logits, aux) if self.training else logits
