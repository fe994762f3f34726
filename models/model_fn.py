"""TPUEstimator model_fn for every network that meets the network contract (the built-in image and
text classifiers and a user's --network); the same function runs on TPU and on CPU/GPU. Its
inputs follow the features contract of `models.features`, its network `models.network_contract`;
the weight updates are in `models.optimization`.
"""

import dataclasses

import tensorflow.compat.v1 as tf
import tensorflow.compat.v2 as tf2

from trainer.models import features as features_lib
from trainer.models import network_contract
from trainer.models import networks
from trainer.models import optimization
from trainer.models import warm_start
from trainer.models.specs import network_params

# The progress hook reads the training loss from this collection (CPU/GPU only).
TRAIN_LOSS_COLLECTION = 'train_loss'
# uint8 input images of a training batch, for TensorBoard (CPU/GPU only; trainer.run.hooks).
INPUT_IMAGES_COLLECTION = 'input_images'
NUM_INPUT_IMAGES = 4
TRAIN_ACCURACY_TAG = 'train_top_1_accuracy'  # the host_call's TensorBoard scalar
NETWORK_VARIABLES_COLLECTION = 'network_variables'


def _logits(config, features, is_training):
  """Calls the config's network through the network contract (`models.network_contract`): in
  float32 or, on TPU, in a bfloat16 scope with float32 variables (so checkpoints stay usable on
  CPU/GPU; off TPU bfloat16 is a rewrite of the float32 graph, trainer.run.cpu_bfloat16).
  Returns float32 (logits, aux_logits or None)."""
  if not isinstance(features, dict):  # a serving input receiver's bare image tensor
    features = {features_lib.IMAGE: features}
  network = networks.network_of(config.model)
  params = network_params.params_of(config)  # float32 off TPU
  key = features_lib.TOKEN_IDS if features_lib.TOKEN_IDS in features else features_lib.IMAGE
  batch_size = features[key].shape.as_list()[0]

  def call():
    return network_contract.outputs_of(
        network(features, is_training=is_training, num_classes=config.num_classes,
                params=params), batch_size, config.num_classes, config.model)

  if config.precision == 'bfloat16' and config.use_tpu:  # off TPU: trainer.run.cpu_bfloat16
    with tf.tpu.bfloat16_scope():
      logits, aux_logits = call()
  else:
    logits, aux_logits = call()
  return (tf.cast(logits, tf.float32),
          None if aux_logits is None else tf.cast(aux_logits, tf.float32))


def metric_fn(labels, logits, mask):
  """TPU-compatible eval metrics, weighted by `mask` so padded examples count for nothing.

  Args:
    labels: int32 [batch].
    logits: float32 [batch, num_classes].
    mask: float32 [batch], 1.0 real / 0.0 padding.

  Returns:
    dict of (value, update_op): top_1_accuracy, top_5_accuracy, eval_loss (mean cross-entropy
    without label smoothing) and num_examples (count of real examples seen).
  """
  predictions = tf.argmax(logits, axis=1, output_type=tf.int32)
  k = min(5, logits.shape[-1])
  in_top_5 = tf.cast(tf.nn.in_top_k(logits, labels, k), tf.float32)
  xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
  real = mask > 0
  return {
      'top_1_accuracy': tf.metrics.accuracy(labels, predictions, weights=mask),
      'top_5_accuracy': tf.metrics.mean(in_top_5, weights=mask),
      'eval_loss': tf.metrics.mean(xent, weights=mask),
      'num_examples': tf.metrics.true_positives(tf.ones_like(real), real),
  }


def _host_call(config, global_step, loss, learning_rate, accuracy):
  """TensorBoard scalars written on the host every step (also when the step runs on a TPU):
  loss and learning_rate, and train_top_1_accuracy (the mean over the cores of each core's
  batch accuracy)."""
  def host_call_fn(gs, loss, lr, accuracy):
    # One flush per loop, as the Cloud TPU reference does: each flush of a gs:// events file
    # uploads the whole file again.
    writer = tf2.summary.create_file_writer(config.model_dir,
                                            max_queue=config.iterations_per_loop)
    with writer.as_default(), tf2.summary.record_if(True):
      tf2.summary.scalar('loss', loss[0], step=gs[0])
      tf2.summary.scalar('learning_rate', lr[0], step=gs[0])
      # On a TPU, TPUEstimator concatenates each core's [1] tensor: average them.
      tf2.summary.scalar(TRAIN_ACCURACY_TAG, tf.reduce_mean(accuracy), step=gs[0])
      return tf.summary.all_v2_summary_ops()
  return host_call_fn, [tf.reshape(global_step, [1]), tf.reshape(loss, [1]),
                        tf.reshape(learning_rate, [1]), tf.reshape(accuracy, [1])]


def _batch_accuracy(labels, logits, mask):
  """float32 scalar: top-1 accuracy over the real (mask 1) examples of one batch."""
  correct = tf.cast(tf.equal(tf.argmax(logits, axis=1, output_type=tf.int32), labels), tf.float32)
  return tf.reduce_sum(correct * mask) / tf.maximum(tf.reduce_sum(mask), 1.0)


def _record_input_images(features):
  """Adds the first NUM_INPUT_IMAGES input images (uint8 [n, size, size, 3]) to
  INPUT_IMAGES_COLLECTION (trainer.run.hooks.InputImagesHook writes them once). Only a slice: the
  step may be compiled with XLA, which has no string ops (the hook encodes them)."""
  tf.add_to_collection(INPUT_IMAGES_COLLECTION,
                       tf.cast(features[features_lib.IMAGE][:NUM_INPUT_IMAGES], tf.uint8))


def _warm_start_scaffold_fn(config, network_variables):
  """scaffold_fn that initialises the network from config.init_checkpoint (models.warm_start:
  why through scaffold_fn); logs what was restored and what was not."""
  prefix, restore, skipped, layout = warm_start.assignment_map(
      config.init_checkpoint, network_variables, config.model, config.num_classes,
      config.init_from_moving_average)
  tf.logging.info('Warm start from %s (%s layout%s): %d of %d network variables restored; '
                  'unless model_dir holds a checkpoint of its own, which wins.', prefix, layout,
                  ', weight moving averages' if config.init_from_moving_average else '',
                  len(restore), len(network_variables))
  if skipped:
    tf.logging.warning('Warm start: %d variables keep their initializers (name or shape not in '
                       'the checkpoint): %s', len(skipped), '; '.join(skipped))

  def scaffold_fn():
    tf.train.init_from_checkpoint(prefix, restore)
    # The weights' moving averages (moving_average_decay > 0) were created from the random
    # initial values: start them from the same checkpoint tensors as their weights.
    by_name = {warm_start.variable_name(v): v for v in tf.global_variables()}
    averages = {name: by_name[warm_start.variable_name(v) + warm_start.EMA_SUFFIX]
                for name, v in restore.items()
                if warm_start.variable_name(v) + warm_start.EMA_SUFFIX in by_name}
    if averages:
      tf.train.init_from_checkpoint(prefix, averages)
    return tf.train.Scaffold()
  return scaffold_fn


def _classifier_variables(config, network_variables):
  """The trainable variables of the classifier (config.classifier_scope): what
  freeze_backbone trains."""
  prefix = config.classifier_scope + '/'
  variables = [v for v in network_variables
               if warm_start.variable_name(v).startswith(prefix) and v.trainable]
  if not variables:
    raise ValueError('freeze_backbone: no trainable variable in the classifier scope %r'
                     % config.classifier_scope)
  return variables


def model_fn_builder(model_config):
  """Returns a TPUEstimator model_fn for `model_config` (a `models.model_config.ModelConfig`).

  The model_fn takes features and labels as `models.features` defines them and returns a
  `tf.estimator.tpu.TPUEstimatorSpec` for
    TRAIN: `config.optimizer` (CrossShardOptimizer only on TPU) on label-smoothed softmax
      cross-entropy + aux_loss_weight x the auxiliary head's (InceptionV3) + weight decay; with
      moving_average_decay > 0 each step also updates the EMA of the network's variables.
    EVAL: `metric_fn` on masked batches.
    PREDICT: `classes` int32 [batch], `probabilities` and `logits` float32 [batch, num_classes],
      also the `serving_default` export signature.
  With moving_average_decay > 0, EVAL and PREDICT (hence export) restore the network's variables
  from their moving averages in the checkpoint being read.
  """
  def model_fn(features, labels, mode, params):
    # Shapes come from the features (the batch size is static in them); params only say where
    # this graph runs. TPUEstimator builds the CPU graphs of a TPU model (the export graph with
    # export_to_tpu False, evaluation with eval_on_tpu False) with params['use_tpu'] False:
    # build them in float32 without cross-replica ops, so they run on a CPU/GPU (the variables
    # are float32 either way; such an evaluation measures the float32 network).
    config = model_config
    if model_config.use_tpu and params and params.get('use_tpu') is False:
      config = dataclasses.replace(model_config, use_tpu=False, precision='float32')
    is_training = mode == tf.estimator.ModeKeys.TRAIN
    # Weights and batch-norm statistics: what the moving average covers, recorded as they are
    # created (collections would also hold variables of an earlier call).
    network_variables = []

    def record(next_creator, **kwargs):
      variable = next_creator(**kwargs)
      network_variables.append(variable)
      return variable

    with tf.variable_creator_scope(record):
      logits, aux_logits = _logits(config, features, is_training)
    if network_variables:
      for variable in network_variables:
        tf.add_to_collection(NETWORK_VARIABLES_COLLECTION, variable)
    else:
      # MirroredStrategy: replicas after the first reuse the first one's variables (through
      # variable-scope reuse, without creating any).
      network_variables = tf.get_collection(NETWORK_VARIABLES_COLLECTION)
    scaffold_fn = None
    if config.moving_average_decay > 0 and not is_training:
      scaffold_fn = optimization.ema_scaffold_fn(config, network_variables)
    if is_training and config.init_checkpoint:
      scaffold_fn = _warm_start_scaffold_fn(config, network_variables)

    if mode == tf.estimator.ModeKeys.PREDICT:
      predictions = {
          'classes': tf.argmax(logits, axis=1, output_type=tf.int32),
          'probabilities': tf.nn.softmax(logits),
          # Callers that need a log-likelihood take it from the logits: a saturated softmax
          # rounds small probabilities to 0.
          'logits': logits,
      }
      return tf.estimator.tpu.TPUEstimatorSpec(
          mode, predictions=predictions, scaffold_fn=scaffold_fn,
          export_outputs={'serving_default': tf.estimator.export.PredictOutput(predictions)})

    mask = features[features_lib.MASK]
    onehot = tf.one_hot(labels, config.num_classes)
    label_smoothing = config.label_smoothing if is_training else 0.

    def xent(logits):
      return tf.losses.softmax_cross_entropy(
          onehot, logits, weights=mask, label_smoothing=label_smoothing,
          reduction=tf.losses.Reduction.SUM_BY_NONZERO_WEIGHTS)

    loss = xent(logits) + optimization.weight_decay_loss(config)
    if aux_logits is not None:
      loss += config.aux_loss_weight * xent(aux_logits)

    if mode == tf.estimator.ModeKeys.EVAL:
      return tf.estimator.tpu.TPUEstimatorSpec(
          mode, loss=loss, eval_metrics=(metric_fn, [labels, logits, mask]),
          scaffold_fn=scaffold_fn)

    train_op, learning_rate = optimization.create_train_op(
        config, loss, network_variables, _classifier_variables(config, network_variables)
        if config.freeze_backbone else None)
    if not config.use_tpu:
      # The progress hook reads the loss from here; on TPU the loss lives on the device and
      # TPUEstimator reports it itself at the end of each iterations_per_loop.
      tf.add_to_collection(TRAIN_LOSS_COLLECTION, loss)
    if not config.use_tpu and isinstance(features, dict) and features_lib.IMAGE in features:
      _record_input_images(features)
    host_call = None if config.skip_host_call else _host_call(
        config, tf.train.get_global_step(), loss, learning_rate,
        _batch_accuracy(labels, logits, mask))
    return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op,
                                             host_call=host_call, scaffold_fn=scaffold_fn)

  return model_fn
