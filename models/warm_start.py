"""Warm start: initialise a new run's network from another run's checkpoint (`init_checkpoint`).

Every network variable whose checkpoint name and shape match is initialised from the checkpoint
(and so is its moving average, with moving_average_decay > 0); only the classifier may differ
(another class count) and keep its initializer: a checkpoint of another depth or size is
refused. A bilstm's embedding is matched by shape only: it is only meaningful with the same
vocab.txt as the checkpoint's run. The driver resolves and checks the checkpoint first. It
works through the model_fn's `scaffold_fn`, which TPUEstimator calls on the host's CPU graph
(on a TPU and off it) after the network is built: `tf.train.init_from_checkpoint` there only
replaces initializers, so a run that resumes from its own model_dir restores its own checkpoint
over them, and each variable is matched by name *and* shape with a report of what was not.
(Estimator's `warm_start_from` would also work on TPU, but it fails on a shape mismatch instead
of leaving the variable, and reports nothing.)

Checkpoints of the Cloud TPU reference ResNet (tensorflow/tpu `models/official/resnet/
resnet_model.py`, r1.15, whose published ImageNet checkpoints use that layout) name their layers
by creation order (`conv2d_7/kernel`, `batch_normalization_7/gamma`, `dense/kernel`) without this
project's `stageN_blockM/` scopes. Their ResNet-50 and deeper create the same layers in the same
order as `models.resnet`, so the i-th convolution and batch norm map one to one. Their ResNet-18
and -34 also project the shortcut of stage 1's first block (1x1, 64 to 64 channels), where this
ResNet adds the input unchanged (He et al. 2016, option B): such a checkpoint is refused, since
dropping that layer would change what the network computes.
"""

import re

import tensorflow.compat.v1 as tf

EMA_SUFFIX = '/ExponentialMovingAverage'

_REFERENCE_LAYER = re.compile(r'^(conv2d|batch_normalization)(?:_(\d+))?/')


def checkpoint_prefix(path):
  """The checkpoint prefix of `path`: a prefix itself, or a directory (its newest checkpoint).

  Raises:
    ValueError: nothing at `path` is a checkpoint.
  """
  if tf.io.gfile.isdir(path):
    prefix = tf.train.latest_checkpoint(path)
    if not prefix:
      raise ValueError('init_checkpoint %s is a directory without a checkpoint (no `checkpoint` '
                       'state file naming one); pass a checkpoint prefix such as '
                       'DIR/model.ckpt-1000.' % path)
    return prefix
  if not tf.io.gfile.exists(path + '.index'):
    raise ValueError('init_checkpoint %s is not a checkpoint: %s.index does not exist. Pass a '
                     'checkpoint prefix (DIR/model.ckpt-1000) or a directory.' % (path, path))
  return path


def is_reference_resnet(checkpoint_names):
  """True for the Cloud TPU reference ResNet's layout (numbered layers at the top level)."""
  # ResNet-18, the smallest, has 21 convolutions (conv2d ... conv2d_20).
  return ('conv2d_20/kernel' in checkpoint_names and 'dense/kernel' in checkpoint_names and
          not any(name.startswith('stage') for name in checkpoint_names))


def reference_resnet_names(variables):
  """{variable: the reference ResNet checkpoint's name for it} for `models.resnet` variables.

  Args:
    variables: the network's variables in creation order (convolutions and batch norms are
      numbered in that order in the reference).
  """
  names, counts, layer_index = {}, {}, {}
  for variable in variables:
    name = variable_name(variable)
    layer, leaf = name.rsplit('/', 1)
    kind = layer.rsplit('/', 1)[-1]
    kind = re.sub(r'_\d+$', '', kind)
    if kind == 'dense':
      names[variable] = 'dense/' + leaf
      continue
    if layer not in layer_index:
      layer_index[layer] = counts.get(kind, 0)
      counts[kind] = layer_index[layer] + 1
    index = layer_index[layer]
    names[variable] = '%s%s/%s' % (kind, '_%d' % index if index else '', leaf)
  return names


def check_reference_depth(prefix, checkpoint_shapes, num_convolutions):
  """Refuses a Cloud TPU reference ResNet checkpoint whose convolutions do not map one to one
  onto a ResNet with `num_convolutions` (the reference ResNet-18/34's extra projection).

  Raises:
    ValueError: the counts differ, with the reason.
  """
  theirs = sum(1 for n in checkpoint_shapes if _REFERENCE_LAYER.match(n) and n.endswith('/kernel'))
  if theirs != num_convolutions:
    raise ValueError(
        'checkpoint %s is a Cloud TPU reference ResNet with %d convolutions; this ResNet '
        'has %d. The reference ResNet-18/34 projects the shortcut of stage 1\'s first block '
        '(conv2d_1, batch_normalization_1), where this one adds the input unchanged, so its '
        'checkpoint cannot initialise this network without changing it; ResNet-50 and deeper '
        'map one to one. Otherwise check --resnet_depth.' % (prefix, theirs, num_convolutions))


def variable_name(variable):
  """A variable's name without ':0'. (Not `.op.name`: inside a MirroredStrategy replica that is
  the replica's own component, e.g. `w/replica_1`.)"""
  return variable.name.split(':')[0]


# Checkpoint tensors that are not weights: the step and Adam's non-slot accumulators. Slots and
# moving averages are named `<variable>/<slot>` and recognised by their variable's name.
NOT_WEIGHTS = frozenset(['global_step', 'beta1_power', 'beta2_power'])


def assignment_map(init_checkpoint, variables, model_name, num_classes,
                   from_moving_average=False):
  """Which checkpoint tensor initialises which variable.

  Every network variable but the classifier (variables whose last dimension is num_classes)
  must match a checkpoint tensor by name and shape, and the checkpoint must hold no weights the
  network lacks: a checkpoint of another depth or size is refused, not half used.

  Args:
    init_checkpoint: a checkpoint prefix or directory, local or gs://.
    variables: the network's variables (weights and batch-norm statistics), in creation order.
    model_name: the config's model ('resnet' enables the reference ResNet layout).
    num_classes: the width of this network's logits.
    from_moving_average: take each weight's exponential moving average from the checkpoint
      (`<name>/ExponentialMovingAverage`) instead of the weight.

  Returns:
    (prefix, {checkpoint tensor name: variable}, [names of the variables left initialised],
     layout: 'this project' or 'Cloud TPU reference ResNet').

  Raises:
    ValueError: not a checkpoint; a reference ResNet-18/34 checkpoint; no moving averages with
      from_moving_average; a variable other than the classifier unmatched; weights the network
      lacks.
  """
  prefix = checkpoint_prefix(init_checkpoint)
  shapes = dict(tf.train.list_variables(prefix))
  layout = 'this project'
  names = {v: variable_name(v) for v in variables}
  if model_name == 'resnet' and is_reference_resnet(shapes):
    layout = 'Cloud TPU reference ResNet'
    names = reference_resnet_names(variables)
    check_reference_depth(prefix, shapes, sum(
        1 for v in variables
        if variable_name(v).endswith('/kernel') and 'dense' not in variable_name(v)))
  known = set(names.values())
  if from_moving_average:
    if not any(name.endswith(EMA_SUFFIX) for name in shapes):
      raise ValueError('init_checkpoint %s holds no moving averages of the weights (no '
                       '*%s tensors); drop --init_from_moving_average.' % (prefix, EMA_SUFFIX))
    # A variable without an average of its own (e.g. batch-norm statistics, when the EMA did
    # not cover them) takes its value.
    names = {v: n + EMA_SUFFIX if n + EMA_SUFFIX in shapes else n for v, n in names.items()}
  restore, skipped, unmatched = {}, [], []
  for variable in variables:
    name = names[variable]
    if shapes.get(name) == variable.shape.as_list():
      restore[name] = variable
      continue
    skipped.append('%s %s (checkpoint: %s)' % (variable_name(variable),
                                               variable.shape.as_list(),
                                               shapes.get(name, 'absent')))
    if not variable.shape.as_list() or variable.shape.as_list()[-1] != num_classes:
      unmatched.append(skipped[-1])
  if unmatched:
    raise ValueError(
        'init_checkpoint %s matches only %d of this network\'s %d variables by name and shape '
        '(%s layout), and all but the classifier must match: is it a checkpoint of another '
        '--model, --resnet_depth or network size? First unmatched: %s'
        % (prefix, len(restore), len(variables), layout, '; '.join(unmatched[:3])))
  extra = sorted(n for n in shapes if n not in known and n not in NOT_WEIGHTS and
                 not any(n.startswith(k + '/') for k in known))
  if extra:
    raise ValueError(
        'init_checkpoint %s holds %d weights this network does not have (first: %s): a checkpoint '
        'of a deeper or larger network? Check --resnet_depth and the network sizes.'
        % (prefix, len(extra), ', '.join(extra[:3])))
  return prefix, restore, skipped, layout
