"""Pieces the Keras networks share: TF1-style layer naming, batch-norm epsilon, masked pooling."""

import keras
from keras import ops

from trainer.models.specs import batch_norm
from trainer.models.specs import bilstm as bilstm_spec

# Keras 3 forbids '/' in layer names and the torch backend '.' (torch.nn.ParameterDict keys are
# variable paths): a TF1 variable scope 'a/b' is the layer name 'a-b', which no scope of `models/`
# contains. Files written before this used 'a.b'; `keras_models.upgrade` renames them.
SCOPE_SEPARATOR = '-'
LEGACY_SCOPE_SEPARATOR = '.'
# The epsilon a TF fused batch norm given `epsilon` computes with (models/specs/batch_norm.py).
fused_epsilon = batch_norm.fused_epsilon


def scope_of(layer_name):
  """The TF1 variable scope a Keras layer name stands for ('a-b', or the legacy 'a.b' -> 'a/b')."""
  return layer_name.replace(SCOPE_SEPARATOR, '/').replace(LEGACY_SCOPE_SEPARATOR, '/')


class Scope:
  """Names layers as tf.compat.v1.layers names them inside one variable scope: the first conv2d
  is 'conv2d', the next 'conv2d_1', and so on per kind ('' is the top level)."""

  def __init__(self, scope=''):
    self._prefix = scope.replace('/', SCOPE_SEPARATOR) + SCOPE_SEPARATOR if scope else ''
    self._counts = {}

  def name(self, kind):
    """The next layer name of `kind` ('conv2d', 'batch_normalization', 'dense', ...)."""
    count = self._counts.get(kind, 0)
    self._counts[kind] = count + 1
    return self._prefix + (kind if count == 0 else '%s_%d' % (kind, count))

  def child(self, name):
    """An unnumbered name inside this scope, e.g. the scope of a sub-block."""
    return self._prefix + name


@keras.saving.register_keras_serializable(package='tpu_pipeline')
class MaskedPooling(keras.layers.Layer):
  """Pools [batch, time, units] over the real positions of `mask` (bool [batch, time]):
  'max' or 'mean'; 0 for a text without tokens, as `models.bilstm` pools.

  Output: float [batch, units].
  """

  def __init__(self, pooling, **kwargs):
    super().__init__(**kwargs)
    # The mask arrives as an input; the pooled output has no time axis left to mask.
    self.supports_masking = True
    if pooling not in ('max', 'mean'):
      raise ValueError("pooling must be 'max' or 'mean', got %r" % (pooling,))
    self.pooling = pooling

  def call(self, outputs, mask):
    valid = ops.cast(mask, outputs.dtype)[:, :, None]
    length = ops.sum(valid, axis=1)
    if self.pooling == 'mean':
      return ops.sum(outputs * valid, axis=1) / ops.maximum(length, 1.)
    pooled = ops.max(outputs * valid + (1. - valid) * bilstm_spec.MASKED_VALUE, axis=1)
    return ops.where(length > 0, pooled, ops.zeros_like(pooled))

  def compute_mask(self, inputs, mask=None):
    return None

  def compute_output_shape(self, input_shape):
    return (input_shape[0], input_shape[2])

  def get_config(self):
    return dict(super().get_config(), pooling=self.pooling)


def pixel_normalization(mean_rgb, stddev_rgb):
  """(pixel - mean) / stddev per channel of 0-255 images, as
  `models.network_contract.normalize_images`: a built-in Keras layer, so the .keras file keeps it
  on every backend."""
  return keras.layers.Normalization(axis=-1, mean=list(mean_rgb),
                                    variance=[s * s for s in stddev_rgb], name='normalize')
