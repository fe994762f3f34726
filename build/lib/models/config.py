"""The explicit configuration a model_fn is built from.

Model code never reads absl FLAGS: `flags/config.py` turns the parsed flags into a `ModelConfig`
and `models.model_fn.model_fn_builder(config)` closes over it.
"""

import dataclasses
from typing import Tuple

RESNET_DEPTHS = (18, 34, 50, 101, 152, 200)
MODELS = ('resnet',)
PRECISIONS = ('float32', 'bfloat16')


@dataclasses.dataclass(frozen=True)
class ModelConfig:
  """Everything a model_fn needs; all batch sizes are global (summed over TPU cores).

  Attributes:
    model: network name, one of `MODELS`.
    num_classes: number of output classes (logits width).
    image_size: input height and width in pixels (images are square, 3 channels).
    train_batch_size: global training batch size, used to scale the learning rate and to convert
      epochs into steps for the schedule.
    num_train_examples: examples in one training epoch (for the epoch-based schedule).
    resnet_depth: ResNet depth, one of `RESNET_DEPTHS`.
    base_learning_rate: learning rate for a global batch of 256; scaled linearly with the batch
      (Goyal et al. 2017, "Accurate, Large Minibatch SGD", Sec. 2.1).
    momentum: momentum of the SGD optimizer.
    weight_decay: L2 coefficient applied to all trainable weights except batch-norm variables.
    label_smoothing: label smoothing epsilon for the training loss (Szegedy et al. 2016, Sec. 7).
    warmup_epochs: epochs of linear warmup from 0 to the scaled base rate (Goyal et al. 2017, Sec 2.2).
    lr_decay_epochs: epochs at which the learning rate is multiplied by `lr_decay_factor`.
    lr_decay_factor: step-decay multiplier.
    precision: 'float32' or 'bfloat16' (activations only; variables stay float32).
    use_tpu: build the TPU variant (CrossShardOptimizer, bfloat16 allowed).
    skip_host_call: do not write per-step TensorBoard summaries through host_call.
    model_dir: where host_call writes its summaries.
  """
  model: str = 'resnet'
  num_classes: int = 10
  image_size: int = 32
  train_batch_size: int = 128
  num_train_examples: int = 60000
  resnet_depth: int = 18
  base_learning_rate: float = 0.1
  momentum: float = 0.9
  weight_decay: float = 1e-4
  label_smoothing: float = 0.0
  warmup_epochs: float = 5.0
  lr_decay_epochs: Tuple[float, ...] = (30.0, 60.0, 80.0)
  lr_decay_factor: float = 0.1
  precision: str = 'float32'
  use_tpu: bool = False
  skip_host_call: bool = False
  model_dir: str = ''

  def __post_init__(self):
    if self.model not in MODELS:
      raise ValueError('model must be one of %s, got %r' % (MODELS, self.model))
    if self.model == 'resnet' and self.resnet_depth not in RESNET_DEPTHS:
      raise ValueError('resnet_depth must be one of %s, got %r' % (RESNET_DEPTHS, self.resnet_depth))
    if self.precision not in PRECISIONS:
      raise ValueError('precision must be one of %s, got %r' % (PRECISIONS, self.precision))
    if self.num_classes < 2:
      raise ValueError('num_classes must be >= 2, got %d' % self.num_classes)
    if list(self.lr_decay_epochs) != sorted(self.lr_decay_epochs):
      raise ValueError('lr_decay_epochs must be increasing, got %s' % (self.lr_decay_epochs,))
