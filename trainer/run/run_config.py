"""The run configuration: built once from flags (`flags/to_config.py`) and passed down
explicitly."""

import dataclasses
from typing import Optional, Tuple

from trainer.data.data_config import DataConfig
from trainer.models.model_config import ModelConfig

MODES = ('train', 'eval', 'train_and_eval', 'predict', 'dry_run')


@dataclasses.dataclass(frozen=True)
class Config:
  """One training/evaluation run. Batch sizes are global (summed over all TPU cores or
  MirroredStrategy replicas). `mirrored_devices` (e.g. ('/gpu:0', '/gpu:1')) trains with
  MirroredStrategy over those devices; empty: TensorFlow's default device."""
  model: ModelConfig
  data: DataConfig
  mode: str
  model_dir: str
  train_steps: int
  eval_batch_size: int
  steps_per_eval: int
  iterations_per_loop: int
  save_checkpoints_steps: int
  keep_checkpoint_max: int
  export_dir: Optional[str] = None
  eval_timeout: int = 0
  log_every_n_secs: float = 30.0
  use_tpu: bool = False
  tpu: Optional[str] = None
  tpu_zone: Optional[str] = None
  gcp_project: Optional[str] = None
  num_cores: Optional[int] = None  # None: read from the TPU slice
  tpu_connect_timeout: float = 10.0
  tpu_topology: Optional[str] = None  # mode dry_run: the simulated slice
  eval_on_tpu: bool = True
  mirrored_devices: Tuple[str, ...] = ()
  profile_steps: Tuple[int, ...] = ()  # (start, end): trace global steps [start, end)
  seed: int = 0  # graph-level seed (initializers, dropout); data.seed is the same --seed
  preemption_grace_secs: int = 25  # SIGTERM to exit, at most (trainer.run.preemption)
  lease_expiry_secs: int = 180  # model_dir's writer lease (trainer.storage.lease)
  predict_input: Optional[str] = None  # mode predict: a glob (trainer.data.predict_input)
  predict_output: Optional[str] = None  # mode predict: the JSON-lines file
  predict_top_k: int = 5
  predict_logits: bool = False  # mode predict: write each input's logits too
  keep_best: bool = True  # train_and_eval: keep the best checkpoint (trainer.run.best_checkpoint)
  early_stopping_evals: int = 0  # train_and_eval: stop after this many evals without a better one
  overwrite: bool = False  # replace what export_dir / predict_output hold (trainer.storage.outputs)
  # Training and dry runs: the step time predicted for their device (trainer.advise.own_device).
  predict_step_time: bool = True

  @property
  def num_replicas(self):
    """Synchronous replicas the training batch is split over off TPU (MirroredStrategy)."""
    return max(1, len(self.mirrored_devices))

  @property
  def train_batch_size(self):
    return self.model.train_batch_size

  @property
  def eval_steps(self):
    """Eval batches that cover every eval example exactly once (the last one padded)."""
    return -(-self.data.num_eval_examples // self.eval_batch_size)
