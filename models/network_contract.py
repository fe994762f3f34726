"""The network contract: one signature that the four built-in networks (`models.networks`) and a
user's own network (`--network=MODULE:CALLABLE`) both meet, so the same model_fn, dry run,
lease, preemption handling and export serve every network (docs/your-model.md).

  network(features, *, is_training, num_classes, params) -> logits

  features     dict, as `models.features` defines it:
                 images: features['image'] uint8 [batch, size, size, 3], 0-255 pixels, not
                   normalized (float32 on a Cloud TPU's infeed, bfloat16 with bfloat16 precision);
                 text:   features['token_ids'] int32 [batch, max_seq_length] (0 = padding,
                   1 = unknown) and features['length'] int32 [batch];
                 training and evaluation add features['mask'] float32 [batch] (ignore it).
               `batch` is static (params['batch_size'] of TPUEstimator: per core on a TPU); it
               is None in the exported serving graph.
  is_training  Python bool: batch statistics and dropout on when True.
  num_classes  Python int: the width of the logits.
  params       dict: the --network_params JSON object, plus the run's keys (RUN_KEYS of
               models/specs/network_params.py):
                 'precision': 'float32', or 'bfloat16' on a TPU (the network then runs inside
                   tf.tpu.bfloat16_scope: `compute_dtype(params)` is the dtype to compute in;
                   off TPU bfloat16 is a rewrite of the float32 graph, and params say float32);
                 images: 'image_size' (int, pixels), 'mean_rgb' and 'stddev_rgb' (3 floats each,
                   0-255 scale: the data set's statistics, for `normalize_images`);
                 text: 'vocab_size' and 'max_seq_length' (ints).
  returns      logits float32 (or bfloat16 under bfloat16) [batch, num_classes], or a pair
               (logits, aux_logits) whose aux_logits, when not None, adds aux_loss_weight x its
               cross-entropy to the training loss (InceptionV3's auxiliary head).

The network creates its variables with tf.compat.v1 (tf.layers, tf.get_variable): they must be
float32 (checkpoints then load on any device) and there must be trainable ones. It runs in
TF 1.15 and in TF 2.15's compat.v1 graph mode.
"""

import tensorflow.compat.v1 as tf

from trainer.errors import PipelineError
from trainer.models import features as features_lib
from trainer.models import user_code

CONTRACT = 'network(features, *, is_training, num_classes, params) -> logits'


def compute_dtype(params):
  """tf.bfloat16 when params['precision'] is 'bfloat16', else tf.float32."""
  return tf.bfloat16 if params.get('precision') == 'bfloat16' else tf.float32


def normalize_images(images, mean_rgb, stddev_rgb):
  """(pixel - mean) / stddev per channel of 0-255 images ([..., 3], uint8 or float) as float32.

  The first op of every built-in image network, so it runs on the accelerator and is part of the
  exported SavedModel; the input pipeline hands over uint8 pixels (a quarter of the bytes of
  float32 to batch and copy). The Cloud TPU reference ResNet normalizes in its model_fn too.
  """
  images = tf.cast(images, tf.float32)
  return (images - tf.constant(mean_rgb, tf.float32)) / tf.constant(stddev_rgb, tf.float32)


def load(spec):
  """The network callable of a --network=MODULE:CALLABLE (`models.user_code.load`)."""
  return user_code.load(spec, '--network', ({},),
                        dict(is_training=True, num_classes=2, params={}), CONTRACT)


def outputs_of(outputs, batch_size, num_classes, name):
  """(logits, aux_logits or None) of what a network returned, checked against the contract.

  Args:
    outputs: the network's return value.
    batch_size: the features' static batch (int or None).
    num_classes: the expected logits width.
    name: the network, for messages.

  Raises:
    PipelineError: not a tensor (or pair of tensors), not rank 2, not [batch, num_classes], or
      not a floating dtype.
  """
  aux = None
  if isinstance(outputs, (tuple, list)) and len(outputs) == 2:
    outputs, aux = outputs
  pairs = [('logits', outputs)] + ([('aux_logits', aux)] if aux is not None else [])
  for what, tensor in pairs:
    if not isinstance(tensor, tf.Tensor):
      raise PipelineError('network %s returned %s as its %s; the contract is %s, a float32 '
                          'tensor [batch, num_classes].' % (name, type(tensor).__name__, what,
                                                            CONTRACT))
    shape = tensor.shape.as_list() if tensor.shape.rank is not None else None
    want = [batch_size, num_classes]
    if (shape is None or len(shape) != 2 or shape[1] != num_classes or
        (batch_size is not None and shape[0] not in (batch_size, None))):
      raise PipelineError('network %s returned %s of shape %s; they must be [batch, num_classes] '
                          '= %s (static; num_classes is the num_classes argument).'
                          % (name, what, shape, want))
    if not tensor.dtype.is_floating:
      raise PipelineError('network %s returned %s of dtype %s; they must be float32 (or '
                          'bfloat16 under --precision=bfloat16).' % (name, what, tensor.dtype.name))
  return outputs, aux


def check_builds(network, name, features_spec, num_classes, params):
  """Builds `network` once for training in a scratch graph, before a run writes anything: the
  call, its outputs and its variables meet the contract.

  Args:
    network: the callable.
    name: its --network spec, for messages.
    features_spec: `models.features.feature_spec(...)` of one batch.
    num_classes: int.
    params: the params dict it will be given.

  Raises:
    PipelineError: the call raised, an output breaks the contract, or it creates no trainable
      variable or a variable that is not float32.
  """
  with tf.Graph().as_default():
    features = {key: tf.placeholder(dtype, shape, name=key)
                for key, (shape, dtype) in features_spec.items()}
    batch_size = next(iter(features_spec.values()))[0][0]
    try:
      outputs = network(features, is_training=True, num_classes=num_classes, params=dict(params))
    except PipelineError:
      raise
    except Exception as e:  # pylint: disable=broad-except  # the user's code failed
      raise PipelineError('network %s raised %s when built for training on features %s: %s'
                          % (name, type(e).__name__, _describe(features_spec), e))
    outputs_of(outputs, batch_size, num_classes, name)
    trainable = tf.trainable_variables()
    if not trainable:
      raise PipelineError('network %s creates no trainable variable (with tf.compat.v1 layers '
                          'or tf.get_variable): there is nothing to train.' % name)
    wrong = [v.op.name for v in tf.global_variables() if v.dtype.base_dtype != tf.float32
             and v.dtype.base_dtype.is_floating]
    if wrong:
      raise PipelineError('network %s creates variables that are not float32 (%s): keep '
                          'variables float32 and compute in compute_dtype(params).'
                          % (name, ', '.join(wrong[:5])))


def _describe(features_spec):
  return ', '.join('%s %s %s' % (key, dtype.name, shape)
                   for key, (shape, dtype) in sorted(features_spec.items())
                   if key != features_lib.MASK)
