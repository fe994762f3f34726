"""The PyTorch state_dict of a Keras twin (keras_models.build) loaded with a run's checkpoint:
each Keras layer's weights (`layer.get_weights()`, NumPy) under its PyTorch name, in PyTorch's
layouts. Every Keras weight goes to one PyTorch tensor and every PyTorch tensor is set (the
batch-norm step counters aside): anything else is an error naming it.

Layouts: a convolution kernel [H, W, in, out] -> [out, in, H, W]; a dense kernel [in, out] -> a
Linear's [out, in] (the CNN's first one with its rows from TF's [H, W, C] flattening to PyTorch's
[C, H, W]; InceptionV3's auxiliary logits are a 1x1 convolution there, a Linear here); batch
norm gamma, beta, moving mean and variance -> weight (ones where TF had no gamma), bias,
running_mean, running_var; a Keras LSTM's kernel, recurrent kernel and bias (gates i, f, c, o, as
PyTorch's i, f, g, o) -> weight_ih, weight_hh, bias_ih, with bias_hh zero.
"""

import re

import numpy as np
import torch

from trainer.models.specs import inception_v3 as inception_spec
from trainer.models.specs import resnet as resnet_spec
from trainer.torch_models import cnn

# InceptionV3's branch scopes (keras_models/inception_v3.py) -> torchvision's module names.
_INCEPTION_BRANCHES = {
    'A': {'Branch_0_1x1': 'branch1x1', 'Branch_1_1x1': 'branch5x5_1',
          'Branch_1_5x5': 'branch5x5_2', 'Branch_2_1x1': 'branch3x3dbl_1',
          'Branch_2_3x3a': 'branch3x3dbl_2', 'Branch_2_3x3b': 'branch3x3dbl_3',
          'Branch_3_1x1': 'branch_pool'},
    'B': {'Branch_0_3x3': 'branch3x3', 'Branch_1_1x1': 'branch3x3dbl_1',
          'Branch_1_3x3a': 'branch3x3dbl_2', 'Branch_1_3x3b': 'branch3x3dbl_3'},
    'C': {'Branch_0_1x1': 'branch1x1', 'Branch_1_1x1': 'branch7x7_1',
          'Branch_1_1x7': 'branch7x7_2', 'Branch_1_7x1': 'branch7x7_3',
          'Branch_2_1x1': 'branch7x7dbl_1', 'Branch_2_7x1a': 'branch7x7dbl_2',
          'Branch_2_1x7a': 'branch7x7dbl_3', 'Branch_2_7x1b': 'branch7x7dbl_4',
          'Branch_2_1x7b': 'branch7x7dbl_5', 'Branch_3_1x1': 'branch_pool'},
    'D': {'Branch_0_1x1': 'branch3x3_1', 'Branch_0_3x3': 'branch3x3_2',
          'Branch_1_1x1': 'branch7x7x3_1', 'Branch_1_1x7': 'branch7x7x3_2',
          'Branch_1_7x1': 'branch7x7x3_3', 'Branch_1_3x3': 'branch7x7x3_4'},
    'E': {'Branch_0_1x1': 'branch1x1', 'Branch_1_1x1': 'branch3x3_1',
          'Branch_1_1x3': 'branch3x3_2a', 'Branch_1_3x1': 'branch3x3_2b',
          'Branch_2_1x1': 'branch3x3dbl_1', 'Branch_2_3x3': 'branch3x3dbl_2',
          'Branch_2_1x3': 'branch3x3dbl_3a', 'Branch_2_3x1': 'branch3x3dbl_3b',
          'Branch_3_1x1': 'branch_pool'},
}
_INCEPTION_KIND = {'Mixed_5b': 'A', 'Mixed_5c': 'A', 'Mixed_5d': 'A', 'Mixed_6a': 'B',
                   'Mixed_6b': 'C', 'Mixed_6c': 'C', 'Mixed_6d': 'C', 'Mixed_6e': 'C',
                   'Mixed_7a': 'D', 'Mixed_7b': 'E', 'Mixed_7c': 'E'}
_AUX = {'Conv2d_1x1': 'conv0', 'Conv2d_cover': 'conv1', 'logits': 'fc'}
_NUMBERED = re.compile(r'^(?P<kind>conv2d|batch_normalization)(?:_(?P<n>\d+))?$')


class ConversionError(ValueError):
  """The Keras twin's weights and the PyTorch network do not correspond one to one."""


def _resnet_name(layer_name, projects):
  """A ResNet Keras layer name -> its torchvision module name."""
  if layer_name == resnet_spec.CLASSIFIER_SCOPE:
    return 'fc'
  scope, _, kind = layer_name.rpartition('-')
  match = _NUMBERED.match(kind)
  if not match:
    raise ConversionError('unexpected ResNet layer %r' % layer_name)
  n = int(match.group('n') or 0)
  short = 'conv' if match.group('kind') == 'conv2d' else 'bn'
  if not scope:
    return short + '1'  # the stem
  stage, block = (int(v) for v in re.match(r'^stage(\d+)_block(\d+)$', scope).groups())
  if projects(scope):  # keras_models.resnet builds the projection first
    if n == 0:
      return 'layer%d.%d.downsample.%d' % (stage, block - 1, 0 if short == 'conv' else 1)
    n -= 1
  return 'layer%d.%d.%s%d' % (stage, block - 1, short, n + 1)


def _inception_name(layer_name):
  """An InceptionV3 Keras layer name -> its torchvision module name."""
  if layer_name == inception_spec.CLASSIFIER_SCOPE:
    return 'fc'
  parts = layer_name.split('-')
  suffix = {'conv2d': 'conv', 'batch_normalization': 'bn'}
  if parts[0] == inception_spec.AUX_SCOPE:
    head = 'AuxLogits.' + _AUX[parts[1]]
    return head if parts[1] == 'logits' else head + '.' + suffix[parts[2]]
  if len(parts) == 2:
    return '%s.%s' % (parts[0], suffix[parts[1]])
  return '%s.%s.%s' % (parts[0], _INCEPTION_BRANCHES[_INCEPTION_KIND[parts[0]]][parts[1]],
                       suffix[parts[2]])


def _tensor(array):
  return torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32))


def _conv_weights(weights):
  out = {'weight': _tensor(weights[0].transpose(3, 2, 0, 1))}
  if len(weights) > 1:
    out['bias'] = _tensor(weights[1])
  return out


def _batch_norm_weights(layer, weights):
  weights = list(weights)
  gamma = weights.pop(0) if layer.scale else np.ones_like(weights[-1])
  beta = weights.pop(0) if layer.center else np.zeros_like(weights[-1])
  return {'weight': _tensor(gamma), 'bias': _tensor(beta), 'running_mean': _tensor(weights[0]),
          'running_var': _tensor(weights[1])}


def _dense_weights(weights, flat_side=None):
  kernel = weights[0]
  if flat_side:  # TF flattened [H, W, C]; PyTorch flattens [C, H, W]
    channels = kernel.shape[0] // (flat_side * flat_side)
    kernel = kernel.reshape(flat_side, flat_side, channels, -1).transpose(2, 0, 1, 3)
    kernel = kernel.reshape(flat_side * flat_side * channels, -1)
  return {'weight': _tensor(kernel.T), 'bias': _tensor(weights[1])}


def _lstm_weights(weights, layer_index):
  """A Keras Bidirectional(LSTM)'s weights: forward [kernel, recurrent, bias], then backward."""
  out = {}
  for direction, suffix in ((weights[:3], ''), (weights[3:], '_reverse')):
    kernel, recurrent, bias = direction
    key = 'l%d%s' % (layer_index, suffix)
    out.update({'weight_ih_' + key: _tensor(kernel.T), 'weight_hh_' + key: _tensor(recurrent.T),
                'bias_ih_' + key: _tensor(bias), 'bias_hh_' + key: _tensor(np.zeros_like(bias))})
  return out


def state_dict(keras_model, arch, network):
  """The state_dict of `network` (the torch module of `arch`) from `keras_model`'s weights.

  Raises:
    ConversionError: a Keras weight with no PyTorch tensor, a PyTorch tensor left unset, or a
      shape that differs.
  """
  model = arch['model']
  layers = [layer for layer in keras_model.layers if layer.weights and layer.name != 'normalize']
  names = {layer.name for layer in layers}
  if model == 'resnet':
    convs_per_block = 3 if resnet_spec.BLOCKS[arch['resnet_depth']][0] == 'bottleneck' else 2

    def projects(scope):
      return ('%s-conv2d_%d' % (scope, convs_per_block)) in names
  out = {}
  for layer in layers:
    kind, weights = type(layer).__name__, layer.get_weights()
    if model == 'resnet':
      name = _resnet_name(layer.name, projects)
    elif model == 'inception_v3':
      name = _inception_name(layer.name)
    elif model == 'cnn':
      name = {'dense': 'fc1', 'logits': 'fc2'}.get(layer.name) or re.sub(
          r'^block(\d)-(conv2d|batch_normalization)$',
          lambda m: ('conv' if m.group(2) == 'conv2d' else 'bn') + m.group(1), layer.name)
    else:
      name = {'embedding': 'embedding', 'logits': 'fc'}.get(layer.name, 'lstm')
    if kind == 'Conv2D' and name.endswith('.fc'):  # InceptionV3's auxiliary logits, 1x1
      weights = [weights[0][0, 0], weights[1]]
      kind = 'Dense'
    if kind == 'Conv2D':
      tensors = _conv_weights(weights)
    elif kind == 'BatchNormalization':
      tensors = _batch_norm_weights(layer, weights)
    elif kind == 'Dense':
      side = cnn.flat_size(arch['image_size'])[0] if (model, name) == ('cnn', 'fc1') else None
      tensors = _dense_weights(weights, side)
    elif kind == 'Embedding':
      tensors = {'weight': _tensor(weights[0])}
    elif kind == 'Bidirectional':
      tensors = _lstm_weights(weights, int(layer.name.rsplit('_', 1)[1]))
    else:
      raise ConversionError('no PyTorch counterpart for Keras layer %s (%s)' % (layer.name, kind))
    for key, value in tensors.items():
      full = '%s.%s' % (name, key)
      if full in out:
        raise ConversionError('two Keras layers map to %s (the second: %s)' % (full, layer.name))
      out[full] = value
  expected = network.state_dict()
  for key, value in expected.items():
    if key.endswith('num_batches_tracked'):
      out.setdefault(key, value)
  missing, extra = sorted(set(expected) - set(out)), sorted(set(out) - set(expected))
  if missing or extra:
    raise ConversionError('the Keras weights and the PyTorch %s differ: unset %s; unknown %s'
                          % (model, missing[:5], extra[:5]))
  for key, value in expected.items():
    if tuple(value.shape) != tuple(out[key].shape):
      raise ConversionError('%s: PyTorch shape %s, converted %s' % (
          key, tuple(value.shape), tuple(out[key].shape)))
  return out

