"""Pieces the PyTorch networks share: TensorFlow's 'SAME' pooling and the input normalization."""

import torch
from torch import nn
from torch.nn import functional as F

from trainer.models.specs import batch_norm as batch_norm_spec


def batch_norm(channels, epsilon, decay, affine_weight=True):
  """nn.BatchNorm2d computing as TF's fused batch norm with `epsilon` did, its running averages
  moving as TF's `decay` (torch's momentum is 1 - decay). `affine_weight=False`: a TF batch norm
  without gamma (scale=False) is gamma 1, kept as a weight of ones so the layout is torchvision's."""
  bn = nn.BatchNorm2d(channels, eps=batch_norm_spec.fused_epsilon(epsilon),
                      momentum=1.0 - decay)
  if not affine_weight:  # a constant 1: no optimizer moves it
    nn.init.ones_(bn.weight)
    bn.weight.requires_grad_(False)
  return bn


def same_padding(size, kernel, stride):
  """(before, after) padding of TensorFlow's 'SAME' on one axis of `size`: the output is
  ceil(size / stride) and the extra row, if any, goes after."""
  out = -(-size // stride)
  total = max((out - 1) * stride + kernel - size, 0)
  return total // 2, total - total // 2


class SameMaxPool2d(nn.Module):
  """TensorFlow's max pool with padding='SAME'. PyTorch's MaxPool2d(k, s, padding=(k-1)//2)
  pads both sides alike; TF pads 0 before and 1 after a 3x3/2 pool on an even map (ResNet's stem at
  32 or 224 px), so the windows, and the logits, differ. Input/output float [N, C, H, W]."""

  def __init__(self, kernel_size, stride):
    super().__init__()
    self.kernel_size, self.stride = kernel_size, stride

  def forward(self, x):
    top, bottom = same_padding(x.shape[2], self.kernel_size, self.stride)
    left, right = same_padding(x.shape[3], self.kernel_size, self.stride)
    x = F.pad(x, (left, right, top, bottom), value=float('-inf'))
    return F.max_pool2d(x, self.kernel_size, self.stride)

  def extra_repr(self):
    return 'kernel_size=%d, stride=%d, padding=TensorFlow SAME' % (self.kernel_size, self.stride)


def same_avg_pool_3x3(x):
  """TensorFlow's 3x3/1 average pool with padding='SAME': the border windows average the pixels
  they cover (torchvision's Inception divides by 9, padding included)."""
  return F.avg_pool2d(x, 3, stride=1, padding=1, count_include_pad=False)


class Normalize(nn.Module):
  """(pixel - mean) / stddev per channel, as the run normalized its images.

  Input: float [N, 3, H, W], pixels on the 0-255 scale. Output: float32, same shape.
  """

  def __init__(self, mean_rgb, stddev_rgb):
    super().__init__()
    self.register_buffer('mean', torch.tensor(mean_rgb, dtype=torch.float32).view(1, -1, 1, 1))
    self.register_buffer('stddev', torch.tensor(stddev_rgb, dtype=torch.float32).view(1, -1, 1, 1))

  def forward(self, x):
    return (x.float() - self.mean) / self.stddev
