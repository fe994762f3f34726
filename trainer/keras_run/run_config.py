"""The settings of one Keras 3 training run (`trainer.train_keras`), typed and checked once at the
entry point (`flags/to_keras_config.py`, as `flags/to_config.py` for the Estimator path): the
modules of trainer/keras_run take these, never flag values. The flags' help gives each default.
"""

import dataclasses
from typing import Optional, Tuple


@dataclasses.dataclass(frozen=True)
class KerasRecipe:
  """The optimisation recipe (trainer/keras_run/recipe.py and schedule.py).

  optimizer: 'momentum' (SGD with `momentum`, Nesterov if `nesterov`), 'rmsprop' (with
    `momentum`) or 'adam'.
  base_learning_rate: peak rate per 256 examples (x global batch / 256); 'constant': the rate.
  lr_schedule: 'step' (x lr_decay_factor at each of lr_decay_epochs), 'exponential' (x
    lr_decay_factor every lr_decay_every_epochs), 'cosine' (to 0) or 'constant', after a linear
    warmup over warmup_epochs (epochs of the training split).
  weight_decay: coupled L2, weight_decay x sum(w^2) / 2 (all but batch norms' weights).
  label_smoothing: of the cross-entropy, in [0, 1).
  gradient_clip_norm: clip to this global norm (0: none).
  aux_loss_weight: InceptionV3's auxiliary head's loss weight.
  """
  optimizer: str
  momentum: float
  nesterov: bool
  base_learning_rate: float
  lr_schedule: str
  warmup_epochs: float
  lr_decay_epochs: Tuple[float, ...]
  lr_decay_factor: float
  weight_decay: float
  label_smoothing: float
  gradient_clip_norm: float
  aux_loss_weight: float
  lr_decay_every_epochs: float = 2.0

  def as_dict(self):
    """For results.json: JSON types (the decay epochs a list)."""
    return dict(dataclasses.asdict(self), lr_decay_epochs=list(self.lr_decay_epochs))


@dataclasses.dataclass(frozen=True)
class KerasRunConfig:
  """One run. Paths are local or gs://; steps count global batches; seconds are wall time.

  model_dir: checkpoints, TensorBoard logs and the outputs; data_dir: `trainer.prepare` output.
  init_model: a .keras file to start from (fine-tuning), or None: a new network of `model`
    (resnet_depth, image_size (None: dataset.json's), embedding_dim, lstm_hidden_units), a
    built-in network or a user's Keras network as MODULE:CALLABLE (`keras_models.user_twin`)
    with network_params.
  train_steps: total steps, or None: train_epochs of the training split.
  dtype_policy: 'float32' or 'mixed_bfloat16'.
  crop_padding: None: dataset.json's; cache_decoded: keep decoded training images in memory.
  log_every_steps: one `fit` epoch; save_checkpoints_steps: a multiple of it.
  cpu_replicas: TensorFlow: logical CPU devices under MirroredStrategy (0: GPUs or the CPU).
  data_parallel, multi_host, multi_host_timeout (s): JAX (trainer/keras_run/devices.py).
  lease_expiry_secs: of the writer's lease on model_dir (trainer/storage/lease.py).
  """
  model_dir: str
  data_dir: str
  init_model: Optional[str]
  model: str
  resnet_depth: int
  image_size: Optional[int]
  embedding_dim: int
  lstm_hidden_units: int
  overwrite: bool
  train_steps: Optional[int]
  train_epochs: float
  train_batch_size: int
  eval_batch_size: int
  recipe: KerasRecipe
  dtype_policy: str
  crop_padding: Optional[int]
  cache_decoded: bool
  log_every_steps: int
  save_checkpoints_steps: int
  keep_checkpoints: int
  cpu_replicas: int
  data_parallel: bool
  multi_host: bool
  multi_host_timeout: int
  seed: int
  lease_expiry_secs: int
  network_params: str = ''  # a user's network (`model` MODULE:CALLABLE): its params, JSON
