"""Weight updates: learning-rate schedules, optimizers, weight decay, gradient clipping and the
weight EMA. `models.model_fn` builds the loss and calls `create_train_op`; the same code runs on a
TPU (gradients averaged over the cores) and on CPU/GPU (MirroredStrategy replicas or one device).
"""

import math

import tensorflow.compat.v1 as tf

# The name of the learning-rate tensor; the host_call summary and the progress hook read it.
LEARNING_RATE_NAME = 'learning_rate'


def learning_rate_schedule(config, global_step):
  """The learning rate of `config.lr_schedule` at `global_step`.

  'step' and 'exponential' scale the rate linearly with the batch, lr = base_learning_rate *
  train_batch_size / 256 (Goyal et al. 2017, Sec. 2.1), reach it linearly over `warmup_epochs`
  (Sec. 2.2), then
    'step': multiply by `lr_decay_factor` at each of `lr_decay_epochs` (He et al. 2016, Sec. 3.4);
    'exponential': multiply by `lr_decay_factor` every `lr_decay_every_epochs` after the warmup,
      staircase (Szegedy et al. 2016, Sec. 8: 0.94 every two epochs);
    'cosine': peak * (1 + cos(pi * t)) / 2, t the fraction of `train_steps` after the warmup
      (Loshchilov & Hutter 2017, Eq. 5, one cycle to 0).
  `models.recipes.learning_rate` is the same in plain Python (the tests compare them).
  'constant' returns base_learning_rate unscaled at every step (Adam, as in the Colab CNN demo).

  Args:
    config: `models.model_config.ModelConfig`.
    global_step: int64 scalar tensor.

  Returns:
    float32 scalar tensor, the learning rate at `global_step`.
  """
  if config.lr_schedule == 'constant':
    return tf.identity(tf.constant(config.base_learning_rate, tf.float32), name=LEARNING_RATE_NAME)
  steps_per_epoch = config.num_train_examples / float(config.train_batch_size)
  epoch = tf.cast(global_step, tf.float32) / steps_per_epoch
  peak = config.base_learning_rate * config.train_batch_size / 256.0
  if config.lr_schedule == 'cosine':
    warmup_steps = config.warmup_epochs * steps_per_epoch
    span = max(config.train_steps - warmup_steps, 1.0)
    t = tf.clip_by_value((tf.cast(global_step, tf.float32) - warmup_steps) / span, 0., 1.)
    decayed = peak * 0.5 * (1. + tf.cos(math.pi * t))
  else:
    if config.lr_schedule == 'step':
      # Decay k times once epoch >= the k-th boundary (no piecewise_constant: its Assert ops are
      # dropped by XLA with a warning).
      decays = tf.reduce_sum(tf.cast(
          epoch >= tf.constant(config.lr_decay_epochs or (float('inf'),), tf.float32),
          tf.float32))
    else:
      decays = tf.floor(tf.maximum(epoch - config.warmup_epochs, 0.) /
                        config.lr_decay_every_epochs)
    decayed = peak * tf.pow(config.lr_decay_factor, decays)
  if config.warmup_epochs > 0:
    warmup = peak * epoch / config.warmup_epochs
    decayed = tf.where(epoch < config.warmup_epochs, warmup, decayed)
  return tf.identity(decayed, name=LEARNING_RATE_NAME)


def weight_decay_loss(config):
  """weight_decay x the L2 loss of the trainable weights, batch-norm betas and gammas excluded
  (Goyal et al. 2017, Sec. 5.1): a float32 scalar, 0 when weight_decay is 0."""
  weights = [v for v in tf.trainable_variables() if 'batch_normalization' not in v.name]
  if not config.weight_decay or not weights:
    return tf.constant(0.0)
  return config.weight_decay * tf.add_n([tf.nn.l2_loss(tf.cast(v, tf.float32)) for v in weights])


def _optimizer(config, learning_rate):
  """The `config.optimizer` instance (momentum SGD, RMSProp or Adam) at `learning_rate`."""
  if config.optimizer == 'momentum':
    return tf.train.MomentumOptimizer(learning_rate, momentum=config.momentum,
                                      use_nesterov=config.nesterov)
  if config.optimizer == 'rmsprop':
    return tf.train.RMSPropOptimizer(learning_rate, decay=config.rmsprop_decay,
                                     momentum=config.momentum, epsilon=config.rmsprop_epsilon)
  if config.optimizer == 'adam':
    return tf.train.AdamOptimizer(learning_rate)
  raise ValueError('unknown optimizer %r' % config.optimizer)


def _minimize(config, optimizer, loss, global_step, var_list=None):
  """The update op. On TPU the gradients are averaged over the cores (CrossShardOptimizer's
  reduction) and over MirroredStrategy replicas (the optimizer's own reduction); with
  gradient_clip_norm > 0 the averaged gradient is clipped to that global norm (Pascanu et al.
  2013, Sec. 3.2), so the result does not depend on the number of cores or replicas."""
  if not config.gradient_clip_norm:
    if config.use_tpu:
      optimizer = tf.tpu.CrossShardOptimizer(optimizer)
    return optimizer.minimize(loss, global_step=global_step, var_list=var_list)
  grads_and_vars = [(g, v) for g, v in optimizer.compute_gradients(loss, var_list=var_list)
                    if g is not None]
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
        lambda strategy, pairs: strategy.extended.batch_reduce_to(tf.distribute.ReduceOp.SUM,
                                                                  pairs),
        args=(list(zip(grads, variables)),))
  grads, _ = tf.clip_by_global_norm(grads, config.gradient_clip_norm)
  if replicas > 1:
    # apply_gradients sums the replicas' gradients once more; each holds the clipped global one.
    grads = [g / replicas for g in grads]
  return optimizer.apply_gradients(zip(grads, variables), global_step=global_step)


def moving_average(config, global_step=None):
  """The weight EMA. num_updates makes the decay min(decay, (1 + step) / (10 + step)), so the
  average tracks the weights closely early on and is usable in short runs (not only after
  ~1 / (1 - decay) steps)."""
  return tf.train.ExponentialMovingAverage(config.moving_average_decay, num_updates=global_step)


def _apply_moving_average(config, global_step, variables, train_op):
  """The op updating the weight EMA (`moving_average`) after `train_op`.

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
    return moving_average(config, global_step).apply(variables)

  def update(strategy, train_ops):
    ema = moving_average(config, global_step)
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


def ema_scaffold_fn(config, network_variables):
  """scaffold_fn whose Saver restores each network variable from its moving average in the
  checkpoint the Estimator restores (the one being evaluated or exported, not the latest)."""
  def scaffold_fn():
    restore = moving_average(config).variables_to_restore(network_variables)
    return tf.train.Scaffold(saver=tf.train.Saver(restore))
  return scaffold_fn


def create_train_op(config, loss, network_variables, var_list=None):
  """The op of one training step.

  Runs the batch-norm statistics updates (UPDATE_OPS), the `config.optimizer` update at
  `learning_rate_schedule` and, with moving_average_decay > 0, the EMA update of
  `network_variables` after it.

  Args:
    config: `models.model_config.ModelConfig`.
    loss: float32 scalar, the per-core (per-replica) mean training loss.
    network_variables: the variables the EMA covers (weights and batch-norm statistics).
    var_list: the variables to train (e.g. only the classifier); None: every trainable one.

  Returns:
    (train_op, learning_rate float32 scalar tensor).
  """
  global_step = tf.train.get_or_create_global_step()
  learning_rate = learning_rate_schedule(config, global_step)
  with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
    train_op = _minimize(config, _optimizer(config, learning_rate), loss, global_step, var_list)
  if config.moving_average_decay > 0:
    with tf.control_dependencies([train_op]), tf.name_scope('moving_average'):
      train_op = _apply_moving_average(config, global_step, network_variables, train_op)
  return train_op, learning_rate
