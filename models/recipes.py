"""The training recipe each network was published with, in the names of `ModelConfig`: the one
table both trainers read.

Flags the user leaves unset take their value from here: `trainer.main` (`flags/to_config.py`), so
`--model=inception_v3` alone trains with RMSProp, label smoothing and a weight EMA, and
`trainer.train_keras` (`flags/to_keras_config.py`). `--recipe=NAME` starts any network, a user's
`--network` among them, from one of these. `learning_rate` is the schedules' reference in plain
Python, which both trainers' schedules are tested against; `steps_of_epochs` the one rule for
how many steps `--train_epochs` means.
"""

import math

MODEL_DEFAULTS = {
    # He et al. 2016, Sec. 3.4 with the large-batch rules of Goyal et al. 2017.
    'resnet': dict(optimizer='momentum', lr_schedule='step', base_learning_rate=0.1,
                   weight_decay=1e-4, label_smoothing=0.0, warmup_epochs=5.0,
                   lr_decay_epochs=(30.0, 60.0, 80.0), lr_decay_factor=0.1,
                   moving_average_decay=0.0, gradient_clip_norm=0.0),
    # Szegedy et al. 2016, Sec. 8: RMSProp (decay 0.9, epsilon 1.0), rate x0.94 every two epochs,
    # label smoothing 0.1 (Sec. 7), weight decay 4e-5 and an EMA of the weights for evaluation.
    # 0.165 per 256 examples is the Cloud TPU reference's batch-scaled base rate.
    'inception_v3': dict(optimizer='rmsprop', lr_schedule='exponential', base_learning_rate=0.165,
                         weight_decay=4e-5, label_smoothing=0.1, warmup_epochs=0.0,
                         lr_decay_every_epochs=2.0, lr_decay_factor=0.94,
                         moving_average_decay=0.9999, gradient_clip_norm=0.0),
    # The Colab TPU Fashion-MNIST demo: Adam at 1e-3, no weight decay, no schedule.
    'cnn': dict(optimizer='adam', lr_schedule='constant', base_learning_rate=1e-3,
                weight_decay=0.0, label_smoothing=0.0, warmup_epochs=0.0,
                moving_average_decay=0.0, gradient_clip_norm=0.0),
    # Recurrent nets: Adam with the gradient clipped by its global norm (Pascanu et al. 2013,
    # Sec. 3.2), which keeps exploding LSTM gradients from wrecking a step.
    'bilstm': dict(optimizer='adam', lr_schedule='constant', base_learning_rate=1e-3,
                   weight_decay=0.0, label_smoothing=0.0, warmup_epochs=0.0,
                   moving_average_decay=0.0, gradient_clip_norm=5.0),
}

# The ModelConfig fields a recipe sets (a run records them in model_config.json).
RECIPE_FIELDS = ('optimizer', 'lr_schedule', 'base_learning_rate', 'weight_decay',
                 'label_smoothing', 'warmup_epochs', 'lr_decay_epochs', 'lr_decay_every_epochs',
                 'lr_decay_factor', 'moving_average_decay', 'gradient_clip_norm')
# Values a recipe leaves out (the schedule it does not use).
SCHEDULE_DEFAULTS = dict(warmup_epochs=0.0, lr_decay_epochs=(), lr_decay_every_epochs=2.0,
                         lr_decay_factor=0.1)
SCHEDULES = ('step', 'exponential', 'cosine', 'constant')


def learning_rate(recipe, step, batch_size, steps_per_epoch, total_steps):
  """The learning rate of `recipe` after `step` optimizer steps, in plain Python.

  'step', 'exponential' and 'cosine' scale the base rate with the batch, peak =
  base_learning_rate * batch_size / 256 (Goyal et al. 2017, Sec. 2.1), reached linearly over
  warmup_epochs (Sec. 2.2); then
    'step':        x lr_decay_factor at each of lr_decay_epochs (He et al. 2016, Sec. 3.4);
    'exponential': x lr_decay_factor every lr_decay_every_epochs after the warmup, staircase
                   (Szegedy et al. 2016, Sec. 8);
    'cosine':      peak * (1 + cos(pi * t)) / 2, t the fraction of the steps after the warmup
                   (Loshchilov & Hutter 2017, "SGDR", Eq. 5, one cycle, eta_min 0).
  'constant' is base_learning_rate unscaled at every step (Adam).

  Args:
    recipe: dict of a MODEL_DEFAULTS entry's keys (lr_schedule, base_learning_rate and the
      schedule's own; SCHEDULE_DEFAULTS for the rest).
    step: int >= 0.
    batch_size: the global batch.
    steps_per_epoch: float, training examples / batch_size.
    total_steps: the run's steps (the cosine's length).

  Returns:
    float.
  """
  recipe = dict(SCHEDULE_DEFAULTS, **recipe)
  schedule = recipe['lr_schedule']
  if schedule == 'constant':
    return float(recipe['base_learning_rate'])
  peak = recipe['base_learning_rate'] * batch_size / 256.0
  epoch = step / float(steps_per_epoch)
  warmup = recipe['warmup_epochs']
  factor = recipe['lr_decay_factor']
  if schedule == 'step':
    rate = peak * factor ** sum(1 for boundary in recipe['lr_decay_epochs'] if epoch >= boundary)
  elif schedule == 'exponential':
    rate = peak * factor ** math.floor(max(epoch - warmup, 0.0) / recipe['lr_decay_every_epochs'])
  elif schedule == 'cosine':
    warmup_steps = warmup * steps_per_epoch
    t = min(max((step - warmup_steps) / max(total_steps - warmup_steps, 1.0), 0.0), 1.0)
    rate = peak * 0.5 * (1.0 + math.cos(math.pi * t))
  else:
    raise ValueError('lr_schedule must be one of %s, got %r' % (SCHEDULES, schedule))
  if warmup > 0 and epoch < warmup:
    rate = peak * epoch / warmup
  return rate


# The recipe of a --network=MODULE:CALLABLE without --recipe: Adam at 1e-3 with a constant rate
# (the Colab CNN's), which trains most small networks without tuning.
USER_NETWORK_RECIPE = 'cnn'


def recipe_name(model, recipe=None):
  """The recipe a run starts from: `recipe` if given, else the built-in `model`'s own, else
  USER_NETWORK_RECIPE for a user's network."""
  if recipe:
    return recipe
  return model if model in MODEL_DEFAULTS else USER_NETWORK_RECIPE


def steps_of_epochs(epochs, num_train_examples, batch_size):
  """The training steps of `epochs` (float) epochs of `num_train_examples` at the global
  `batch_size`, for `trainer.main` (flags/to_config.py) and `trainer.train_keras`
  (trainer/keras_run/job.py): rounded up, so every example is seen `epochs` times; at least 1.

  Example: 2 epochs of 10,202 texts at batch 64 -> ceil(318.8) = 319 steps.
  """
  return max(1, int(math.ceil(epochs * num_train_examples / batch_size)))
