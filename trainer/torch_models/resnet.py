"""ResNet v1.5 (He et al. 2016, Table 1; the stride on the 3x3 convolution) in torchvision's
layout: the parameter names of `torchvision.models.resnet18/34/50/101/152` (depth 200: the same
layout, which torchvision does not build). The one difference from torchvision's module is the
stem's max pool, TensorFlow's 'SAME' (layers.SameMaxPool2d): torchvision's symmetric padding
shifts the windows on an even map."""

from torch import nn

from trainer.models.specs import resnet as resnet_spec
from trainer.torch_models import layers

# The torchvision builder whose state_dict this layout matches, by depth.
TORCHVISION = {18: 'resnet18', 34: 'resnet34', 50: 'resnet50', 101: 'resnet101',
               152: 'resnet152'}


def _bn(channels):
  return layers.batch_norm(channels, resnet_spec.BATCH_NORM_EPSILON, resnet_spec.BATCH_NORM_DECAY)


def _conv(in_channels, out_channels, kernel_size, stride=1):
  # TF's fixed padding of a strided convolution is (k-1)//2 on both sides for odd k, as here.
  return nn.Conv2d(in_channels, out_channels, kernel_size, stride, (kernel_size - 1) // 2,
                   bias=False)


class BasicBlock(nn.Module):
  expansion = 1

  def __init__(self, in_channels, channels, stride, downsample):
    super().__init__()
    self.conv1, self.bn1 = _conv(in_channels, channels, 3, stride), _bn(channels)
    self.conv2, self.bn2 = _conv(channels, channels, 3), _bn(channels)
    self.relu = nn.ReLU(inplace=True)
    self.downsample = downsample

  def forward(self, x):
    shortcut = x if self.downsample is None else self.downsample(x)
    out = self.relu(self.bn1(self.conv1(x)))
    return self.relu(self.bn2(self.conv2(out)) + shortcut)


class Bottleneck(nn.Module):
  expansion = 4

  def __init__(self, in_channels, channels, stride, downsample):
    super().__init__()
    self.conv1, self.bn1 = _conv(in_channels, channels, 1), _bn(channels)
    self.conv2, self.bn2 = _conv(channels, channels, 3, stride), _bn(channels)
    self.conv3, self.bn3 = _conv(channels, channels * 4, 1), _bn(channels * 4)
    self.relu = nn.ReLU(inplace=True)
    self.downsample = downsample

  def forward(self, x):
    shortcut = x if self.downsample is None else self.downsample(x)
    out = self.relu(self.bn1(self.conv1(x)))
    out = self.relu(self.bn2(self.conv2(out)))
    return self.relu(self.bn3(self.conv3(out)) + shortcut)


class ResNet(nn.Module):
  """Logits float32 [N, num_classes] of normalized images float32 [N, 3, H, W].

  Raises:
    ValueError: a depth not in models.specs.resnet.DEPTHS.
  """

  def __init__(self, depth, num_classes):
    super().__init__()
    if depth not in resnet_spec.BLOCKS:
      raise ValueError('ResNet depth must be one of %s, got %r' % (resnet_spec.DEPTHS, depth))
    kind, stage_blocks = resnet_spec.BLOCKS[depth]
    block = Bottleneck if kind == 'bottleneck' else BasicBlock
    self.conv1, self.bn1 = _conv(3, 64, 7, 2), _bn(64)
    self.relu = nn.ReLU(inplace=True)
    self.maxpool = layers.SameMaxPool2d(3, 2)
    channels = 64
    for stage, num_blocks in enumerate(stage_blocks):
      width = 64 * 2 ** stage
      blocks = []
      for i in range(num_blocks):
        stride = 2 if (i == 0 and stage > 0) else 1
        downsample = None
        if i == 0 and (stride != 1 or channels != width * block.expansion):
          downsample = nn.Sequential(
              nn.Conv2d(channels, width * block.expansion, 1, stride, bias=False),
              _bn(width * block.expansion))
        blocks.append(block(channels, width, stride, downsample))
        channels = width * block.expansion
      setattr(self, 'layer%d' % (stage + 1), nn.Sequential(*blocks))
    self.avgpool = nn.AdaptiveAvgPool2d(1)
    self.fc = nn.Linear(channels, num_classes)

  def forward(self, x):
    x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
    x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
    return self.fc(self.avgpool(x).flatten(1))
