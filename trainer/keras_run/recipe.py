"""The model, optimizer and loss of a Keras 3 run, after the pipeline's recipes
(`models.model_fn`, `models.optimization`):
  loss          softmax cross-entropy of the logits with label smoothing (Szegedy et al. 2016,
                "Rethinking the Inception Architecture", Sec. 7: one-hot * (1 - e) + e / classes),
                + aux_loss_weight x the auxiliary head's for InceptionV3 (Sec. 8 of the same);
  weight decay  coupled L2, weight_decay x sum(w^2) / 2 over the trainable weights but the batch
                norms' (as `models.optimization.weight_decay_loss`; Goyal et al. 2017, Sec. 5.1),
                added to the loss through each variable's Keras regularizer, not saved with it;
  optimizer     SGD with momentum (Nesterov optional), RMSProp or Adam at
                `schedule.PipelineSchedule`;
                with gradient_clip_norm > 0 the gradient is clipped to that global norm (Pascanu
                et al. 2013, Sec. 3.2);
  precision     'mixed_bfloat16': the layers compute in bfloat16 and keep float32 weights
                (keras.mixed_precision), as the pipeline's --precision=bfloat16.
"""

import keras
import numpy as np

from trainer.data import dataset_json
from trainer.errors import PipelineError
from trainer.keras_models import build
from trainer.keras_models import user_twin
from trainer.models.model_config import ModelConfig
from trainer.models.model_config import MODELS

POLICIES = ('float32', 'mixed_bfloat16')


def _with_policy(config, policy):
  """A functional model's config with every layer's dtype policy replaced by `policy`."""
  config = dict(config)
  layers = []
  for layer in config['layers']:
    layer = dict(layer, config=dict(layer['config']))
    if layer['class_name'] != 'InputLayer' and 'dtype' in layer['config']:
      layer['config']['dtype'] = policy
    layers.append(layer)
  config['layers'] = layers
  return config


def load_model(path, policy='float32'):
  """The Keras model of a .keras file (trainer.export_keras or an earlier run), in `policy`.

  Raises:
    PipelineError: the file cannot be loaded (an old-format file on torch: with the command
      that upgrades it).
  """
  try:
    model = keras.saving.load_model(path, compile=False)
  except KeyError as e:
    if 'can\'t contain "."' in str(e):
      raise PipelineError('--init_model=%s has the layer names of an earlier version, which the '
                          'torch backend cannot load: upgrade it first with `python -m '
                          'trainer.export_keras --upgrade=%s --output=NEW.keras`.' % (path, path))
    raise
  except (OSError, ValueError) as e:
    raise PipelineError('--init_model=%s cannot be loaded as a Keras model: %s' % (path, e))
  if policy == 'float32':
    return model
  rebuilt = model.__class__.from_config(_with_policy(model.get_config(), policy))
  rebuilt.set_weights(model.get_weights())
  return rebuilt


def build_model(config, num_classes, info):
  """A new network of the run's `config` (trainer.keras_run.run_config.KerasRunConfig: model,
  resnet_depth, image_size, BiLSTM sizes, dtype_policy) with `num_classes` for the data of
  dataset.json `info` (call after seeding)."""
  settings = dict(model=config.model, num_classes=num_classes, resnet_depth=config.resnet_depth,
                  image_size=config.image_size or dataset_json.image_size(info) or 32,
                  vocab_size=info.get('vocab_size', 0),
                  max_seq_length=info.get('max_seq_length', 0))
  for name in ('mean_rgb', 'stddev_rgb'):
    if name in info:
      settings[name] = tuple(info[name])
  if config.model == 'bilstm':
    settings.update(embedding_dim=config.embedding_dim,
                    lstm_hidden_units=config.lstm_hidden_units)
  user = config.model not in MODELS
  if user:  # a user's Keras network: its params, not the built-ins' sizes
    settings.update(network_params=config.network_params)
    del settings['resnet_depth']
  try:
    network = ModelConfig(**settings)
  except (TypeError, ValueError) as e:
    raise PipelineError('the network settings cannot build a model: %s' % e)
  previous = keras.config.dtype_policy()
  keras.config.set_dtype_policy(config.dtype_policy)
  try:
    if user:
      return user_twin.build_model(config.model, network, flag='--network')
    return build.build_model(network)
  finally:
    keras.config.set_dtype_policy(previous)


def add_weight_decay(model, weight_decay):
  """Gives every trainable weight but the batch norms' an L2 regularizer of weight_decay / 2
  (Keras' L2 is l2 * sum(w^2); the pipeline's tf.nn.l2_loss is sum(w^2) / 2); returns how many.
  The regularizers live on the variables only: a saved model does not keep them."""
  if not weight_decay:
    return 0
  count = 0
  for layer in model.layers:
    if isinstance(layer, keras.layers.BatchNormalization):
      continue
    for variable in layer.trainable_weights:
      variable.regularizer = keras.regularizers.L2(weight_decay / 2.0)
      count += 1
  return count


def optimizer_of(recipe, schedule):
  """The optimizer of `recipe` (run_config.KerasRecipe: optimizer, momentum, nesterov,
  gradient_clip_norm) at the learning rate `schedule`."""
  clip = {'global_clipnorm': recipe.gradient_clip_norm} if recipe.gradient_clip_norm else {}
  if recipe.optimizer == 'momentum':
    return keras.optimizers.SGD(schedule, momentum=recipe.momentum, nesterov=recipe.nesterov,
                                **clip)
  if recipe.optimizer == 'rmsprop':
    # The Estimator's RMSProp (models.optimization): decay and epsilon of ModelConfig, epsilon
    # inside the square root in both; TF1 starts the mean square at 1, Keras at 0.
    return keras.optimizers.RMSprop(schedule, rho=ModelConfig.rmsprop_decay,
                                    momentum=recipe.momentum,
                                    epsilon=ModelConfig.rmsprop_epsilon, **clip)
  return keras.optimizers.Adam(schedule, **clip)


def compile_model(model, optimizer, label_smoothing, aux_loss_weight):
  """Compiles with the cross-entropy of one-hot labels (`one_hot_labels`) and accuracy."""
  xent = keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=label_smoothing)
  metrics = [keras.metrics.CategoricalAccuracy(name='accuracy')]
  if isinstance(model.output, dict):
    model.compile(optimizer=optimizer, loss={build.LOGITS: xent, build.AUX_LOGITS: xent},
                  loss_weights={build.LOGITS: 1.0, build.AUX_LOGITS: aux_loss_weight},
                  metrics={build.LOGITS: metrics})
  else:
    model.compile(optimizer=optimizer, loss=xent, metrics=metrics)


def targets(model, one_hot):
  """The targets of `compile_model`'s losses for one-hot labels [batch, classes]: the labels, or
  both heads' of InceptionV3."""
  if isinstance(model.output, dict):
    return {build.LOGITS: one_hot, build.AUX_LOGITS: one_hot}
  return one_hot


def one_hot_labels(model, dataset, num_classes):
  """A tf.data dataset of (inputs, int labels) batches as (inputs, `targets` of float32 one-hot
  labels [batch, classes])."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return dataset.map(lambda x, y: (x, targets(model, tf.one_hot(y, num_classes,
                                                                 dtype=tf.float32))))


def one_hot_batches(model, batches, num_classes):
  """`one_hot_labels` for an iterator of NumPy (inputs, int labels [b]) batches: yields (inputs,
  `targets` of float32 one-hot labels [b, num_classes])."""
  identity = np.eye(num_classes, dtype=np.float32)
  for inputs, labels in batches:
    yield inputs, targets(model, identity[labels])


def scores(model, batches):
  """The main head's accuracy and mean softmax cross-entropy (the pipeline's eval_loss: no label
  smoothing, no auxiliary head) over NumPy (inputs, int labels) `batches`, every one of them: the
  whole evaluation set, no example dropped or padded.

  Returns:
    {'accuracy': float, 'loss': float (nats per example), 'examples': int}.

  Raises:
    ValueError: `model` gives another number of rows than a batch has labels.
  """
  correct = examples = 0
  loss = 0.0
  for inputs, labels in batches:
    logits = np.asarray(build.logits_of(model.predict_on_batch(inputs)), np.float64)
    if len(logits) != len(labels):  # as the training model under MirroredStrategy gave
      raise ValueError('%d rows of logits for a batch of %d: evaluate a model built outside '
                       'any tf.distribute scope.' % (len(logits), len(labels)))
    correct += int((logits.argmax(axis=1) == labels).sum())
    shifted = logits - logits.max(axis=1, keepdims=True)
    loss += float((np.log(np.exp(shifted).sum(axis=1))
                   - shifted[np.arange(len(labels)), labels]).sum())
    examples += len(labels)
  return {'accuracy': correct / max(examples, 1), 'loss': loss / max(examples, 1),
          'examples': examples}
