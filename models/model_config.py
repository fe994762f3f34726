"""The explicit configuration a model_fn is built from.

Model code never reads absl FLAGS: `flags/to_config.py` turns the parsed flags into a
`ModelConfig` and `models.model_fn.model_fn_builder(config)` closes over it. The training recipe
each network was published with is in `models/recipes.py`.
"""

import dataclasses
from typing import Tuple

from trainer.models import user_code
from trainer.models.specs import bilstm
from trainer.models.specs import cnn
from trainer.models.specs import inception_v3
from trainer.models.specs import resnet

MODELS = ('resnet', 'inception_v3', 'cnn', 'bilstm')
IMAGE_MODELS = ('resnet', 'inception_v3', 'cnn')
TEXT_MODELS = ('bilstm',)
OPTIMIZERS = ('momentum', 'rmsprop', 'adam')
LR_SCHEDULES = ('step', 'exponential', 'cosine', 'constant')
PRECISIONS = ('float32', 'bfloat16')

# Per-channel pixel statistics of ImageNet on the 0-255 scale: the normalization of data sets
# whose dataset.json gives none.
IMAGENET_MEAN_RGB = (0.485 * 255, 0.456 * 255, 0.406 * 255)
IMAGENET_STDDEV_RGB = (0.229 * 255, 0.224 * 255, 0.225 * 255)


@dataclasses.dataclass(frozen=True)
class ModelConfig:
  """Everything a model_fn needs; all batch sizes are global (summed over TPU cores).

  Attributes:
    model: network name, one of `MODELS`, or a user's network as MODULE:CALLABLE
      (`models.network_contract`; `--network`).
    network_params: a user network's --network_params, JSON object text ('' for none).
    input_fn: a legacy job's --input_fn as MODULE:CALLABLE; `model` is then its --model_fn
      (`trainer.run.user_model_fn`), and the network, recipe and sizes here do not apply.
    num_classes: number of output classes (logits width).
    image_size: input height and width in pixels (images are square, 3 channels).
    mean_rgb, stddev_rgb: per-channel statistics on the 0-255 scale; the model_fn normalizes
      its 0-255 input images with them (`normalize_images`).
    vocab_size, max_seq_length: text models: embedding rows (ids 0 = padding, 1 = unknown) and
      tokens per example (static; shorter texts are padded and masked).
    embedding_dim, lstm_hidden_units, lstm_layers, lstm_pooling, dropout_rate: the BiLSTM's
      sizes (hidden units per direction), pooling ('max', 'mean' or 'final' states) and dropout.
    train_batch_size: global training batch size, used to scale the learning rate and to convert
      epochs into steps for the schedule.
    num_train_examples: examples in one training epoch (for the epoch-based schedule).
    resnet_depth: ResNet depth, one of `models.resnet.DEPTHS`.
    optimizer: 'momentum' (SGD), 'rmsprop' or 'adam'.
    lr_schedule: 'step', 'exponential' or 'cosine' (base rate scaled by train_batch_size / 256,
      Goyal et al. 2017, Sec. 2.1, after `warmup_epochs` of linear warmup, Sec. 2.2) or 'constant'
      (base_learning_rate as given, unscaled: the usual setting for Adam).
    base_learning_rate: learning rate for a global batch of 256 ('constant': the rate itself).
    momentum: momentum of the SGD and RMSProp optimizers.
    nesterov: Nesterov momentum for 'momentum' (the Cloud TPU reference ResNet uses it; He et al.
      2016 and this project's recipes use classical momentum).
    rmsprop_decay, rmsprop_epsilon: RMSProp's squared-gradient decay and epsilon (Szegedy et al.
      2016, Sec. 8: 0.9 and 1.0).
    weight_decay: L2 coefficient applied to all trainable weights except batch-norm variables.
    label_smoothing: label smoothing epsilon for the training loss (Szegedy et al. 2016, Sec. 7).
    warmup_epochs: epochs of linear warmup from 0 to the scaled base rate.
    lr_decay_epochs: 'step': epochs at which the rate is multiplied by `lr_decay_factor`.
    lr_decay_every_epochs: 'exponential': the rate is multiplied by `lr_decay_factor` every this
      many epochs (staircase).
    lr_decay_factor: decay multiplier of both decaying schedules.
    train_steps: the run's training steps: the length of the 'cosine' schedule (0: unknown).
    moving_average_decay: decay of an exponential moving average of the network's variables,
      kept in the checkpoint and used by evaluation and export; 0 disables it.
    gradient_clip_norm: clip the gradient to this global norm before the update (summed over
      TPU cores first); 0 disables clipping.
    aux_loss_weight: weight of InceptionV3's auxiliary classifier loss (Szegedy et al. 2016,
      Sec. 4).
    precision: 'float32' or 'bfloat16' (activations only; variables stay float32).
    use_tpu: build the TPU variant (CrossShardOptimizer, bfloat16 allowed). The model_fn builds
      the CPU variant in float32 anyway when TPUEstimator passes params['use_tpu'] False (the
      export graph, and evaluation with eval_on_tpu False).
    skip_host_call: do not write per-step TensorBoard summaries through host_call.
    model_dir: where host_call writes its summaries.
    iterations_per_loop: training steps per TPU host round trip; the host_call's summary writer
      queues that many steps' events between flushes (a GCS events file is uploaded whole at
      every flush).
    init_checkpoint: a checkpoint prefix or directory (local or gs://) whose matching variables
      initialise a new run (`models.warm_start`); '' for none. A checkpoint in model_dir wins.
    init_from_moving_average: initialise from the checkpoint's weight EMAs instead.
    freeze_backbone: train only the classifier (`classifier_scope`), as a linear probe; the
      batch-norm statistics of the frozen layers still follow the new data.

  Raises:
    ValueError: from the constructor, for an unknown name or a value the network cannot take.
  """
  model: str = 'resnet'
  network_params: str = ''
  input_fn: str = ''
  num_classes: int = 10
  image_size: int = 32
  mean_rgb: Tuple[float, float, float] = IMAGENET_MEAN_RGB
  stddev_rgb: Tuple[float, float, float] = IMAGENET_STDDEV_RGB
  train_batch_size: int = 128
  num_train_examples: int = 60000
  resnet_depth: int = 18
  vocab_size: int = 0
  max_seq_length: int = 0
  embedding_dim: int = 256
  lstm_hidden_units: int = 1024
  lstm_layers: int = 1
  lstm_pooling: str = 'max'
  dropout_rate: float = 0.5
  gradient_clip_norm: float = 0.0
  optimizer: str = 'momentum'
  lr_schedule: str = 'step'
  base_learning_rate: float = 0.1
  momentum: float = 0.9
  nesterov: bool = False
  rmsprop_decay: float = 0.9
  rmsprop_epsilon: float = 1.0
  weight_decay: float = 1e-4
  label_smoothing: float = 0.0
  warmup_epochs: float = 5.0
  lr_decay_epochs: Tuple[float, ...] = (30.0, 60.0, 80.0)
  lr_decay_every_epochs: float = 2.0
  lr_decay_factor: float = 0.1
  train_steps: int = 0
  moving_average_decay: float = 0.0
  aux_loss_weight: float = 0.4
  precision: str = 'float32'
  use_tpu: bool = False
  skip_host_call: bool = False
  model_dir: str = ''
  iterations_per_loop: int = 100
  init_checkpoint: str = ''
  init_from_moving_average: bool = False
  freeze_backbone: bool = False

  @property
  def is_model_fn(self):
    """Whether this is a legacy job's own model_fn and input_fn (--model_fn, --input_fn)."""
    return bool(self.input_fn)

  @property
  def is_built_in(self):
    """Whether the network is one of `MODELS` (not a user's MODULE:CALLABLE)."""
    return self.model in MODELS

  @property
  def modality(self):
    """'text' or 'image': a built-in's own, a user network's from its data (a text data set
    gives max_seq_length)."""
    if self.is_built_in:
      return 'text' if self.model in TEXT_MODELS else 'image'
    return 'text' if self.max_seq_length else 'image'

  @property
  def classifier_scope(self):
    """The variable scope of the network's classifier (the final layer producing the
    logits), defined by each network module; None for a user's network."""
    if not self.is_built_in:
      return None
    return {'resnet': resnet.CLASSIFIER_SCOPE, 'inception_v3': inception_v3.CLASSIFIER_SCOPE,
            'cnn': cnn.CLASSIFIER_SCOPE, 'bilstm': bilstm.CLASSIFIER_SCOPE}[self.model]

  def __post_init__(self):
    if self.is_model_fn:
      for name in ('model', 'input_fn'):
        if not user_code.is_spec(getattr(self, name)):
          raise ValueError('--%s must be MODULE:CALLABLE, got %r'
                           % ('model_fn' if name == 'model' else name, getattr(self, name)))
      return  # the user's model_fn owns its network and recipe
    if not self.is_built_in and not user_code.is_spec(self.model):
      raise ValueError('model must be one of %s or a network as MODULE:CALLABLE, got %r'
                       % (MODELS, self.model))
    if not self.is_built_in and self.freeze_backbone:
      raise ValueError('--freeze_backbone needs a built-in network, whose classifier scope this '
                       'pipeline knows: drop it for --network=%s.' % self.model)
    if self.is_built_in and self.network_params:
      raise ValueError('--network_params is read by a --network=MODULE:CALLABLE only, not by '
                       'the built-in %s: drop it.' % self.model)
    for name, allowed in (('optimizer', OPTIMIZERS),
                          ('lr_schedule', LR_SCHEDULES), ('precision', PRECISIONS),
                          ('lstm_pooling', bilstm.POOLINGS)):
      if getattr(self, name) not in allowed:
        raise ValueError('%s must be one of %s, got %r' % (name, allowed, getattr(self, name)))
    if self.model == 'resnet' and self.resnet_depth not in resnet.DEPTHS:
      raise ValueError('resnet_depth must be one of %s, got %r'
                       % (resnet.DEPTHS, self.resnet_depth))
    if self.model == 'inception_v3' and self.image_size < inception_v3.MIN_IMAGE_SIZE:
      raise ValueError(
          'InceptionV3 needs inputs of at least %dx%d pixels, got --image_size=%d: pass '
          '--image_size=%d or more (images are resized to it, e.g. 28x28 Fashion-MNIST to 75x75).'
          % (inception_v3.MIN_IMAGE_SIZE, inception_v3.MIN_IMAGE_SIZE, self.image_size,
             inception_v3.MIN_IMAGE_SIZE))
    if self.model == 'cnn' and self.image_size < 8:
      raise ValueError('the cnn pools three times by 2: --image_size must be >= 8, got %d'
                       % self.image_size)
    if self.model in TEXT_MODELS:
      if self.vocab_size < 3 or self.max_seq_length < 1:
        raise ValueError('%s needs vocab_size >= 3 (padding, unknown and a word) and '
                         'max_seq_length >= 1, got %d and %d: prepare the data with `python -m '
                         'trainer.prepare text` (it writes both into dataset.json).'
                         % (self.model, self.vocab_size, self.max_seq_length))
      for name in ('embedding_dim', 'lstm_hidden_units', 'lstm_layers'):
        if getattr(self, name) < 1:
          raise ValueError('%s must be positive, got %d' % (name, getattr(self, name)))
    if not 0.0 <= self.dropout_rate < 1.0:
      raise ValueError('dropout_rate must be in [0, 1), got %s' % self.dropout_rate)
    if self.gradient_clip_norm < 0:
      raise ValueError('gradient_clip_norm must be >= 0 (0 disables it), got %s'
                       % self.gradient_clip_norm)
    if self.num_classes < 2:
      raise ValueError('num_classes must be >= 2, got %d' % self.num_classes)
    if list(self.lr_decay_epochs) != sorted(self.lr_decay_epochs):
      raise ValueError('lr_decay_epochs must be increasing, got %s' % (self.lr_decay_epochs,))
    if self.lr_decay_every_epochs <= 0:
      raise ValueError('lr_decay_every_epochs must be positive, got %s'
                       % self.lr_decay_every_epochs)
    if not 0.0 <= self.moving_average_decay < 1.0:
      raise ValueError('moving_average_decay must be in [0, 1) (0 disables it), got %s'
                       % self.moving_average_decay)
