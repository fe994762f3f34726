"""TPUEstimator model_fn for the image and text classifiers; the same function runs on TPU and on
CPU/GPU.

Features contract (produced by `trainer.input_pipeline`):
  image models: features['image']: uint8 (float32 with use_tpu: uint8 is not among the
                TPU infeed's documented types; not run on a TPU here)
                [batch, image_size, image_size, 3], pixels on the 0-255 scale; the model_fn
                normalizes them with the data set's mean_rgb and stddev_rgb.
  text models:  features['token_ids']: int32 [batch, max_seq_length], 0-padded;
                features['length']: int32 [batch], real tokens per example.
  features['mask']:  float32 [batch]; 1.0 for real examples, 0.0 for eval padding (not served).
  labels: int32 [batch] in [0, num_classes).
`params['batch_size']` is the per-shard batch size (TPUEstimator divides the global one).
"""

import tensorflow.compat.v1 as tf
import tensorflow.compat.v2 as tf2

from models import bilstm
from models import cnn
from models import inception_v3
from models import resnet

# The host_call summary and the logging hook both look for these names.
LEARNING_RATE_NAME = 'learning_rate'
TRAIN_LOSS_COLLECTION = 'train_loss'
NETWORK_VARIABLES_COLLECTION = 'network_variables'


def learning_rate_schedule(config, global_step):
  """The learning rate of `config.lr_schedule` at `global_step`.

  'step' and 'exponential' scale the rate linearly with the batch, lr = base_learning_rate *
  train_batch_size / 256 (Goyal et al. 2017, Sec. 2.1), reach it linearly over `warmup_epochs`
  (Sec. 2.2), then
    'step': multiply by `lr_decay_factor` at each of `lr_decay_epochs` (He et al. 2016, Sec. 3.4);
    'exponential': multiply by `lr_decay_factor` every `lr_decay_every_epochs` after the warmup,
      staircase (Szegedy et al. 2016, Sec. 8: 0.94 every two epochs).
  'constant' returns base_learning_rate unscaled at every step (Adam, as in the Colab CNN demo).

  Args:
    config: `models.config.ModelConfig`.
    global_step: int64 scalar tensor.

  Returns:
    float32 scalar tensor, the learning rate at `global_step`.
  """
  if config.lr_schedule == 'constant':
    return tf.identity(tf.constant(config.base_learning_rate, tf.float32), name=LEARNING_RATE_NAME)
  steps_per_epoch = config.num_train_examples / float(config.train_batch_size)
  epoch = tf.cast(global_step, tf.float32) / steps_per_epoch
  peak = config.base_learning_rate * config.train_batch_size / 256.0
  if config.lr_schedule == 'step':
    # Decay k times once epoch >= the k-th boundary (no piecewise_constant: its Assert ops are
    # dropped by XLA with a warning).
    decays = tf.reduce_sum(tf.cast(
        epoch >= tf.constant(config.lr_decay_epochs or (float('inf'),), tf.float32), tf.float32))
  else:
    decays = tf.floor(tf.maximum(epoch - config.warmup_epochs, 0.) / config.lr_decay_every_epochs)
  decayed = peak * tf.pow(config.lr_decay_factor, decays)
  if config.warmup_epochs > 0:
    warmup = peak * epoch / config.warmup_epochs
    decayed = tf.where(epoch < config.warmup_epochs, warmup, decayed)
  return tf.identity(decayed, name=LEARNING_RATE_NAME)


def normalize_images(images, mean_rgb, stddev_rgb):
  """(pixel - mean) / stddev per channel of 0-255 images ([..., 3], uint8 or float) as float32.

  The first op of every image network, so it runs on the accelerator and is part of the
  exported SavedModel; the input pipeline hands over uint8 pixels (a quarter of the bytes of
  float32 to batch and copy). The Cloud TPU reference ResNet normalizes in its model_fn too.
  """
  images = tf.cast(images, tf.float32)
  return (images - tf.constant(mean_rgb, tf.float32)) / tf.constant(stddev_rgb, tf.float32)


def _network(config, features, is_training, dtype):
  """Returns (logits, aux_logits or None) of the configured network, computing in `dtype`."""
  if config.model == 'bilstm':
    return bilstm.bilstm(
        features['token_ids'], features['length'], config.vocab_size, config.num_classes,
        is_training, embedding_dim=config.embedding_dim, hidden_units=config.lstm_hidden_units,
        num_layers=config.lstm_layers, pooling=config.lstm_pooling,
        dropout_rate=config.dropout_rate, compute_dtype=dtype), None
  images = features['image'] if isinstance(features, dict) else features
  images = tf.cast(normalize_images(images, config.mean_rgb, config.stddev_rgb), dtype)
  if config.model == 'resnet':
    return resnet.resnet_v1_5(images, config.resnet_depth, config.num_classes, is_training), None
  if config.model == 'inception_v3':
    return inception_v3.inception_v3(images, config.num_classes, is_training)
  if config.model == 'cnn':
    return cnn.cnn(images, config.num_classes, is_training), None
  raise ValueError('unknown model %r' % config.model)


def _logits(config, features, is_training):
  """Runs the network in float32 or, on TPU, in a bfloat16 scope with float32 variables (so
  checkpoints stay usable on CPU/GPU). Returns float32 (logits, aux_logits or None)."""
  if config.precision == 'bfloat16':
    with tf.tpu.bfloat16_scope():
      logits, aux_logits = _network(config, features, is_training, tf.bfloat16)
    return (tf.cast(logits, tf.float32),
            None if aux_logits is None else tf.cast(aux_logits, tf.float32))
  return _network(config, features, is_training, tf.float32)


def _weight_decay(config):
  """L2 over trainable weights, excluding batch-norm betas and gammas (Goyal et al. 2017, Sec. 5.1)."""
  weights = [v for v in tf.trainable_variables() if 'batch_normalization' not in v.name]
  if not config.weight_decay or not weights:
    return tf.constant(0.0)
  return config.weight_decay * tf.add_n([tf.nn.l2_loss(tf.cast(v, tf.float32)) for v in weights])


def _optimizer(config, learning_rate):
  if config.optimizer == 'momentum':
    return tf.train.MomentumOptimizer(learning_rate, momentum=config.momentum)
  if config.optimizer == 'rmsprop':
    return tf.train.RMSPropOptimizer(learning_rate, decay=config.rmsprop_decay,
                                     momentum=config.momentum, epsilon=config.rmsprop_epsilon)
  if config.optimizer == 'adam':
    return tf.train.AdamOptimizer(learning_rate)
  raise ValueError('unknown optimizer %r' % config.optimizer)


def _minimize(config, optimizer, loss, global_step):
  """The update op. On TPU the gradients are averaged over the cores (CrossShardOptimizer's
  reduction) and over MirroredStrategy replicas (the optimizer's own reduction); with
  gradient_clip_norm > 0 the averaged gradient is clipped to that global norm (Pascanu et al.
  2013, Sec. 3.2), so the result does not depend on the number of cores or replicas."""
  if not config.gradient_clip_norm:
    if config.use_tpu:
      optimizer = tf.tpu.CrossShardOptimizer(optimizer)
    return optimizer.minimize(loss, global_step=global_step)
  grads_and_vars = [(g, v) for g, v in optimizer.compute_gradients(loss) if g is not None]
  variables = [v for _, v in grads_and_vars]
  # Dense gradients: the sparse (IndexedSlices) embedding update needs Unique, which XLA and
  # TPUs cannot compile.
  grads = [tf.convert_to_tensor(g) for g, _ in grads_and_vars]
  if config.use_tpu:
    # The per-core loss is a mean over that core's examples: average the gradients over cores.
    num_shards = tf.tpu.cross_replica_sum(tf.constant(1.0))
    grads = [tf.tpu.cross_replica_sum(g) / num_shards for g in grads]
  replica = tf.distribute.get_replica_context()
  replicas = replica.num_replicas_in_sync if replica else 1
  if replicas > 1:
    # MirroredStrategy under the Estimator: compute_gradients scaled each replica's loss by
    # 1 / replicas, so the sum over replicas is the gradient of the global batch's mean loss.
    # (ReplicaContext.all_reduce fails on mirrored variables in TF 1.15: reduce in a merge_call.)
    grads = replica.merge_call(
        lambda strategy, pairs: strategy.extended.batch_reduce_to(tf.distribute.ReduceOp.SUM, pairs),
        args=(list(zip(grads, variables)),))
  grads, _ = tf.clip_by_global_norm(grads, config.gradient_clip_norm)
  if replicas > 1:
    # apply_gradients sums the replicas' gradients once more; each holds the clipped global one.
    grads = [g / replicas for g in grads]
  return optimizer.apply_gradients(zip(grads, variables), global_step=global_step)


def _moving_average(config, global_step=None):
  """The weight EMA. num_updates makes the decay min(decay, (1 + step) / (10 + step)), so the
  average tracks the weights closely early on and is usable in short runs (not only after
  ~1 / (1 - decay) steps)."""
  return tf.train.ExponentialMovingAverage(config.moving_average_decay, num_updates=global_step)


def _apply_moving_average(config, global_step, variables, train_op):
  """The op updating the weight EMA (`_moving_average`) after `train_op`.

  On TPU: `tf.train.ExponentialMovingAverage.apply`. On CPU/GPU the same update is written out,
  so that it (1) reads each variable after the step: the EMA would read the snapshot that
  `dynamic_rnn` caches of each LSTM variable, taken before the update, and (2) runs under
  MirroredStrategy, where it is built once in cross-replica context on each variable's
  cross-replica value (the weights, equal on every replica after the update, and the replicas'
  mean of each batch-norm statistic); TF 1.15's EMA cannot run inside a replica (it names the
  shadows after the replica's copy). The shadows get the EMA's names, initial values and decay,
  so evaluation and export restore them the same way.
  """
  if config.use_tpu:
    return _moving_average(config, global_step).apply(variables)

  def update(strategy, train_ops):
    ema = _moving_average(config, global_step)
    shadows = []
    for variable in variables:
      # The name alone, as the EMA gives it: outside the enclosing name scope. Initialised with
      # the variable's own initial value (one session run initialises both).
      with tf.get_default_graph().name_scope(None):
        shadows.append(tf.Variable(variable.initial_value, trainable=False,
                                   name=ema.average_name(variable),
                                   collections=[tf.GraphKeys.GLOBAL_VARIABLES]))
    # After every replica's step (TF 2 does not carry the caller's control dependencies into a
    # merge_call): the updated step count and weights.
    with tf.control_dependencies(strategy.experimental_local_results(train_ops)):
      step = tf.cast(global_step, tf.float32)
      decay = tf.minimum(config.moving_average_decay, (1. + step) / (10. + step))
      updates = [
          strategy.extended.update(shadow, lambda s, v: s.assign_sub((s - v) * (1. - decay)),
                                   args=(variable.read_value(),))
          for shadow, variable in zip(shadows, variables)]
    return tf.group(updates)

  replica = tf.distribute.get_replica_context()
  if replica is None or replica.num_replicas_in_sync == 1:
    return update(tf.distribute.get_strategy(), train_op)
  return replica.merge_call(update, args=(train_op,))


def _ema_scaffold_fn(config, network_variables):
  """scaffold_fn whose Saver restores each network variable from its moving average in the
  checkpoint the Estimator restores (the one being evaluated or exported, not the latest)."""
  def scaffold_fn():
    restore = _moving_average(config).variables_to_restore(network_variables)
    return tf.train.Scaffold(saver=tf.train.Saver(restore))
  return scaffold_fn


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


def _host_call(config, global_step, loss, learning_rate):
  """TensorBoard scalars written on the host every step (also when the step runs on a TPU)."""
  def host_call_fn(gs, loss, lr):
    with tf2.summary.create_file_writer(config.model_dir).as_default(), \
        tf2.summary.record_if(True):
      tf2.summary.scalar('loss', loss[0], step=gs[0])
      tf2.summary.scalar('learning_rate', lr[0], step=gs[0])
      return tf.summary.all_v2_summary_ops()
  return host_call_fn, [tf.reshape(global_step, [1]), tf.reshape(loss, [1]),
                        tf.reshape(learning_rate, [1])]


def model_fn_builder(config):
  """Returns a TPUEstimator model_fn for `config` (a `models.config.ModelConfig`).

  The model_fn returns a `tf.estimator.tpu.TPUEstimatorSpec` for
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
    del params  # Shapes come from the features; the batch size is static in them.
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
      scaffold_fn = _ema_scaffold_fn(config, network_variables)

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

    mask = features['mask']
    onehot = tf.one_hot(labels, config.num_classes)
    label_smoothing = config.label_smoothing if is_training else 0.

    def xent(logits):
      return tf.losses.softmax_cross_entropy(
          onehot, logits, weights=mask, label_smoothing=label_smoothing,
          reduction=tf.losses.Reduction.SUM_BY_NONZERO_WEIGHTS)

    loss = xent(logits) + _weight_decay(config)
    if aux_logits is not None:
      loss += config.aux_loss_weight * xent(aux_logits)

    if mode == tf.estimator.ModeKeys.EVAL:
      return tf.estimator.tpu.TPUEstimatorSpec(
          mode, loss=loss, eval_metrics=(metric_fn, [labels, logits, mask]),
          scaffold_fn=scaffold_fn)

    global_step = tf.train.get_or_create_global_step()
    learning_rate = learning_rate_schedule(config, global_step)
    # Batch-norm moving averages are updated by UPDATE_OPS, which must run with each step.
    with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
      train_op = _minimize(config, _optimizer(config, learning_rate), loss, global_step)
    if config.moving_average_decay > 0:
      with tf.control_dependencies([train_op]), tf.name_scope('moving_average'):
        train_op = _apply_moving_average(config, global_step, network_variables, train_op)
    if not config.use_tpu:
      # The progress hook reads the loss from here; on TPU the loss lives on the device and
      # TPUEstimator reports it itself at the end of each iterations_per_loop.
      tf.add_to_collection(TRAIN_LOSS_COLLECTION, loss)
    host_call = None if config.skip_host_call else _host_call(config, global_step, loss, learning_rate)
    return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op, host_call=host_call)

  return model_fn
