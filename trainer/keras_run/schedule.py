"""The pipeline's learning-rate schedules (`models.optimization.learning_rate_schedule`) as a
Keras 3 schedule, so that every backend trains with the same rates as the Estimator; both are
tested against `models.recipes.learning_rate`, the reference in plain Python.

'step', 'exponential' and 'cosine' scale the rate with the global batch, peak =
base_learning_rate * batch_size / 256 (Goyal et al. 2017, "Accurate, Large Minibatch SGD",
Sec. 2.1) and reach it linearly over the warmup (Sec. 2.2); then
  'step':        multiply by `decay_factor` at each of `decay_epochs` (He et al. 2016, Sec. 3.4);
  'exponential': multiply by `decay_factor` every `decay_every_epochs` after the warmup,
                 staircase (Szegedy et al. 2016, Sec. 8);
  'cosine':      peak * (1 + cos(pi * t)) / 2, t the fraction of the steps after the warmup
                 (Loshchilov & Hutter 2017, "SGDR", Eq. 5, one cycle without restarts, eta_min 0).
'constant' is base_learning_rate unscaled at every step (Adam, as the pipeline's CNN recipe).
"""

import math

import keras
from keras import ops

SCHEDULES = ('step', 'exponential', 'cosine', 'constant')


@keras.saving.register_keras_serializable(package='tpu_pipeline')
class PipelineSchedule(keras.optimizers.schedules.LearningRateSchedule):
  """The learning rate at an optimizer step (its `iterations`, int64 scalar): float32 scalar."""

  def __init__(self, schedule, base_learning_rate, batch_size, steps_per_epoch, total_steps,
               warmup_epochs=0.0, decay_epochs=(), decay_factor=0.1, decay_every_epochs=2.0):
    """Args:
      schedule: one of SCHEDULES.
      base_learning_rate: the rate per 256 examples ('constant': the rate itself).
      batch_size: the global batch (all replicas).
      steps_per_epoch: float, training examples / batch_size.
      total_steps: int, the run's steps (the cosine's length).
      warmup_epochs, decay_epochs, decay_factor: as the pipeline's flags of those names;
      decay_every_epochs: --lr_decay_every_epochs.

    Raises:
      ValueError: an unknown schedule, or steps_per_epoch or total_steps not positive.
    """
    super().__init__()
    if schedule not in SCHEDULES:
      raise ValueError('lr_schedule must be one of %s, got %r' % (SCHEDULES, schedule))
    if steps_per_epoch <= 0 or total_steps <= 0:
      raise ValueError('steps_per_epoch and total_steps must be positive')
    self.schedule = schedule
    self.base_learning_rate = float(base_learning_rate)
    self.batch_size = int(batch_size)
    self.steps_per_epoch = float(steps_per_epoch)
    self.total_steps = int(total_steps)
    self.warmup_epochs = float(warmup_epochs)
    self.decay_epochs = tuple(float(e) for e in decay_epochs)
    self.decay_factor = float(decay_factor)
    self.decay_every_epochs = float(decay_every_epochs)

  @classmethod
  def from_recipe(cls, recipe, batch_size, steps_per_epoch, total_steps):
    """The schedule of `recipe` (a run_config.KerasRecipe) for a run of `total_steps` steps of
    `batch_size` (global) examples, `steps_per_epoch` of them an epoch."""
    return cls(recipe.lr_schedule, recipe.base_learning_rate, batch_size, steps_per_epoch,
               total_steps, recipe.warmup_epochs, list(recipe.lr_decay_epochs),
               recipe.lr_decay_factor, recipe.lr_decay_every_epochs)

  @property
  def peak(self):
    return self.base_learning_rate * self.batch_size / 256.0

  def __call__(self, step):
    if self.schedule == 'constant':
      return ops.convert_to_tensor(self.base_learning_rate, 'float32')
    step = ops.cast(step, 'float32')
    epoch = step / self.steps_per_epoch
    if self.schedule == 'step':
      decays = ops.zeros((), 'float32')
      for boundary in self.decay_epochs:
        decays = decays + ops.cast(epoch >= boundary, 'float32')
      rate = self.peak * ops.power(self.decay_factor, decays)
    elif self.schedule == 'exponential':
      decays = ops.floor(ops.maximum(epoch - self.warmup_epochs, 0.0) / self.decay_every_epochs)
      rate = self.peak * ops.power(self.decay_factor, decays)
    else:
      warmup_steps = self.warmup_epochs * self.steps_per_epoch
      span = max(self.total_steps - warmup_steps, 1.0)
      t = ops.clip((step - warmup_steps) / span, 0.0, 1.0)
      rate = self.peak * 0.5 * (1.0 + ops.cos(math.pi * t))
    if self.warmup_epochs > 0:
      rate = ops.where(epoch < self.warmup_epochs, self.peak * epoch / self.warmup_epochs, rate)
    return rate

  def get_config(self):
    return {'schedule': self.schedule, 'base_learning_rate': self.base_learning_rate,
            'batch_size': self.batch_size, 'steps_per_epoch': self.steps_per_epoch,
            'total_steps': self.total_steps, 'warmup_epochs': self.warmup_epochs,
            'decay_epochs': list(self.decay_epochs), 'decay_factor': self.decay_factor,
            'decay_every_epochs': self.decay_every_epochs}
