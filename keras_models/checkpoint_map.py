"""Loads a checkpoint of this pipeline (or of the Cloud TPU reference ResNet) into a Keras model
of `keras_models.build`, through an explicit name map.

Every Keras weight has one checkpoint tensor (`weight_map`), every weight tensor of the
checkpoint must be used, and both are checked: a weight left at its initial value or a
checkpoint weight nothing reads is an error that names it. The map, by layer:
  Conv2D, Dense, BatchNormalization  '<scope>/<weight>' (kernel, bias, gamma, beta,
                                     moving_mean, moving_variance), scope = the layer's name
                                     with '-' for '/' (keras_models.layers.scope_of)
  Embedding                          'embedding'
  Bidirectional LSTM 'bilstm_N'      'bilstm_N/bidirectional_rnn/{fw,bw}/{forward,backward}/
                                     {kernel,bias}', converted by `lstm_weights`
Layouts are equal for the rest (HWIO convolution and [in, out] dense kernels in both). Values
are read as float32: a bfloat16 tensor (a checkpoint written by other bfloat16 code; this
pipeline keeps float32 variables) is widened, which is exact, and reported.
"""

import collections
import re

from absl import logging
import keras
import numpy as np
import tensorflow as tf

from trainer.keras_models import layers as layers_lib
from trainer.models import warm_start
from trainer.models.specs import bilstm as bilstm_spec

LAYOUT_PIPELINE = 'this pipeline'
LAYOUT_REFERENCE = 'Cloud TPU reference ResNet'
_DIRECTIONS = (('forward_layer', 'fw', 'forward'), ('backward_layer', 'bw', 'backward'))
# What models.warm_start.reference_resnet_names reads of a variable: its name.
_Named = collections.namedtuple('_Named', 'name')


class CheckpointMismatch(ValueError):
  """The checkpoint and the Keras network do not correspond one to one."""


def lstm_weights(kernel, bias, forget_bias=bilstm_spec.LSTM_FORGET_BIAS):
  """A TF1 LSTMCell's weights as Keras LSTM weights.

  TF1 (rnn_cell_impl.LSTMCell) multiplies [input; h] by one kernel whose columns are the gates
  i, j (the new input), f, o and adds `forget_bias` to f at run time; Keras (keras.layers.LSTM)
  keeps `kernel` (input) and `recurrent_kernel` (h) apart, with the gates in the order i, f, c
  (= j), o, and holds the whole forget bias in `bias`.

  Args:
    kernel: float32 [input_dim + units, 4 * units].
    bias: float32 [4 * units].
    forget_bias: the cell's forget_bias.

  Returns:
    (kernel [input_dim, 4 units], recurrent_kernel [units, 4 units], bias [4 units]).
  """
  units = bias.shape[0] // 4
  input_dim = kernel.shape[0] - units

  def reorder(x):
    i, j, f, o = np.split(x, 4, axis=-1)
    return np.concatenate([i, f, j, o], axis=-1)
  bias = reorder(bias).copy()
  bias[units:2 * units] += forget_bias
  return reorder(kernel[:input_dim]), reorder(kernel[input_dim:]), bias


def _reference_names(model):
  """{pipeline name: reference ResNet name} for a Keras ResNet (models.warm_start's map, fed
  the pipeline's names in the order the TF1 network creates its layers)."""
  def creation_order(layer):
    scope = layers_lib.scope_of(layer.name).split('/')
    block = re.match(r'stage(\d+)_block(\d+)$', scope[0]) if len(scope) > 1 else None
    index = re.search(r'_(\d+)$', scope[-1])
    return (tuple(int(g) for g in block.groups()) if block else (0, 0),
            int(index.group(1)) if index else 0)
  layers = sorted((l for l in model.layers if l.weights), key=creation_order)
  variables = [_Named('%s/%s:0' % (layers_lib.scope_of(l.name), w.name))
               for l in layers for w in l.weights]
  return {v.name[:-2]: name for v, name in warm_start.reference_resnet_names(variables).items()}


def weight_map(model):
  """The explicit map: [(checkpoint tensor names, convert, [Keras variables])] covering every
  weight of `model` once. `convert` takes the tensors (float32 ndarrays) and returns the
  variables' values in order."""
  entries = []
  for layer in model.layers:
    if not layer.weights:
      continue
    scope = layers_lib.scope_of(layer.name)
    if isinstance(layer, keras.layers.Bidirectional):
      for attribute, short, cell_name in _DIRECTIONS:
        cell = getattr(layer, attribute).cell
        prefix = '%s/bidirectional_rnn/%s/%s/' % (scope, short, cell_name)
        entries.append(([prefix + 'kernel', prefix + 'bias'], lstm_weights,
                        [cell.kernel, cell.recurrent_kernel, cell.bias]))
    elif isinstance(layer, keras.layers.Embedding):
      entries.append(([scope], lambda value: [value], [layer.embeddings]))
    else:
      for weight in layer.weights:
        entries.append((['%s/%s' % (scope, weight.name)], lambda value: [value], [weight]))
  mapped = [id(v) for _, _, variables in entries for v in variables]
  missing = [w.path for w in model.weights if id(w) not in mapped]
  if missing or len(mapped) != len(set(mapped)):
    raise CheckpointMismatch('the name map does not cover every weight of the Keras model once: '
                             '%s' % (missing or 'a weight is mapped twice'))
  return entries


def load(model, prefix, use_moving_average, model_name):
  """Assigns every weight of `model` from the checkpoint `prefix`.

  Args:
    model: a keras_models.build model of the checkpoint's network.
    prefix: a checkpoint prefix (local or gs://).
    use_moving_average: read each weight's `<name>/ExponentialMovingAverage` instead (the
      weights this pipeline evaluates and exports with --moving_average_decay > 0); every
      weight must have one, as the pipeline's EMA restore requires.
    model_name: the network ('resnet' recognises the Cloud TPU reference layout).

  Returns:
    dict: layout, weights (Keras variables assigned), tensors (checkpoint tensors read),
    moving_average (bool), widened (names of bfloat16 tensors read as float32).

  Raises:
    CheckpointMismatch: a tensor the map names is absent or of another shape, a weight tensor
      of the checkpoint is left unused, a moving average missing with use_moving_average, or a
      reference ResNet-18/34 (its extra projection).
  """
  reader = tf.train.load_checkpoint(prefix)
  shapes = reader.get_variable_to_shape_map()
  dtypes = reader.get_variable_to_dtype_map()
  layout, rename = LAYOUT_PIPELINE, {}
  if model_name == 'resnet' and warm_start.is_reference_resnet(shapes):
    layout, rename = LAYOUT_REFERENCE, _reference_names(model)
    try:
      warm_start.check_reference_depth(prefix, shapes, sum(
          1 for l in model.layers if isinstance(l, keras.layers.Conv2D)))
    except ValueError as e:
      raise CheckpointMismatch(str(e))
  if use_moving_average and not any(n.endswith(warm_start.EMA_SUFFIX) for n in shapes):
    raise CheckpointMismatch(
        'checkpoint %s holds no moving averages of the weights (no *%s tensors): convert '
        'without --use_moving_average.' % (prefix, warm_start.EMA_SUFFIX))
  read, widened, count, no_average = set(), [], 0, []
  for names, convert, variables in weight_map(model):
    values = []
    for name in names:
      name = rename.get(name, name)
      if name not in shapes:
        raise CheckpointMismatch(
            'checkpoint %s has no tensor %s, which the Keras weight %s needs (%s layout): is it '
            'a checkpoint of another --model or depth?' % (prefix, name, variables[0].path, layout))
      source = name + warm_start.EMA_SUFFIX if use_moving_average else name
      if source not in shapes:
        no_average.append(name)
        continue
      value = reader.get_tensor(source)
      if dtypes[source] == tf.bfloat16:
        widened.append(source)
      values.append(np.asarray(value, np.float32))
      read.add(name)
    if len(values) < len(names):
      continue
    for variable, value in zip(variables, convert(*values)):
      if tuple(variable.shape) != value.shape:
        raise CheckpointMismatch(
            'checkpoint tensor %s has shape %s, the Keras weight %s %s: the run\'s settings '
            '(model_config.json or the flags) do not match its checkpoint.'
            % (names, value.shape, variable.path, tuple(variable.shape)))
      variable.assign(value)
      count += 1
  if no_average:
    raise CheckpointMismatch(
        'checkpoint %s has no moving average of %d weights (first: %s); the pipeline could not '
        'have evaluated it with them either: convert without --use_moving_average.'
        % (prefix, len(no_average), ', '.join(no_average[:3])))
  unused = sorted(n for n in shapes if n not in read and n not in warm_start.NOT_WEIGHTS and
                  not any(n.startswith(r + '/') for r in read))
  if unused:
    raise CheckpointMismatch(
        'checkpoint %s holds %d weights the Keras network does not have (first: %s): a deeper or '
        'larger network than the settings say?' % (prefix, len(unused), ', '.join(unused[:3])))
  if widened:
    logging.warning('%d bfloat16 tensors read as float32 (exact): %s', len(widened),
                    ', '.join(widened[:3]))
  return {'layout': layout, 'weights': count, 'tensors': len(read),
          'moving_average': bool(use_moving_average), 'widened': widened}
