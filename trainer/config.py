"""The run configuration: built once from flags (`flags/config.py`) and passed down explicitly."""

import dataclasses
from typing import Optional, Tuple

from models.config import ModelConfig

MODES = ('train', 'eval', 'train_and_eval')
IMAGE_DTYPES = ('uint8', 'float32')


class PipelineError(Exception):
  """A problem the user can fix (bad flags, missing data, unreachable TPU); printed without a
  traceback by `trainer.main`."""


@dataclasses.dataclass(frozen=True)
class DataConfig:
  """Where the examples are and how to turn them into model inputs.

  Attributes:
    data_dir: directory (local or gs://) holding TFRecord shards in the ImageNet schema, or None
      with fake_data.
    train_pattern, eval_pattern: shard globs inside data_dir.
    num_classes: number of classes after `label_offset` is subtracted.
    label_offset: subtracted from `image/class/label` (1 for ImageNet converters with 1..1000).
    num_train_examples, num_eval_examples: examples per split (eval must be exact: it sizes the
      padding that lets evaluation see every example once).
    image_size: model input height and width.
    image_dtype: dtype of the batches' features['image'], 0-255 pixels either way (the model_fn
      normalizes them): 'uint8' (CPU/GPU) or 'float32' (Cloud TPU: uint8 is not among the TPU
      infeed's documented types; the cast is one op per batch on the TPU host).
    train_crop, crop_padding, eval_crop_fraction, random_flip, color_distortion: see `trainer.preprocessing`.
    cache_decoded: cache decoded images in host RAM after the first epoch (small datasets only).
    fake_data: synthetic images and labels of the right shapes instead of reading files.
    modality: 'image' (ImageNet-schema records) or 'text' (token-id records of
      `trainer.prepare text`).
    max_seq_length: text: tokens per example (longer records are truncated, shorter padded).
    vocab_size: text: ids in [0, vocab_size) (the lines of vocab_file).
    vocab_file: text: the vocabulary's file name inside data_dir (for the serving signature).
  """
  data_dir: Optional[str]
  num_classes: int
  num_train_examples: int
  num_eval_examples: int
  image_size: int
  label_offset: int = 0
  train_pattern: str = 'train-*'
  eval_pattern: str = 'validation-*'
  image_dtype: str = 'uint8'
  train_crop: str = 'distorted_bbox'
  crop_padding: int = 4
  eval_crop_fraction: float = 0.875
  random_flip: bool = True
  color_distortion: bool = False
  cache_decoded: bool = False
  fake_data: bool = False
  modality: str = 'image'
  max_seq_length: int = 0
  vocab_size: int = 0
  vocab_file: str = 'vocab.txt'

  def __post_init__(self):
    if self.image_dtype not in IMAGE_DTYPES:
      raise ValueError('image_dtype must be one of %s, got %r' % (IMAGE_DTYPES, self.image_dtype))

  @property
  def vocab_path(self):
    return '%s/%s' % (self.data_dir.rstrip('/'), self.vocab_file)

  def file_pattern(self, is_training):
    """Glob of the training or evaluation shards, e.g. gs://bucket/data/train-*."""
    return '%s/%s' % (self.data_dir.rstrip('/'),
                      self.train_pattern if is_training else self.eval_pattern)


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
  num_cores: int = 8
  tpu_connect_timeout: float = 10.0
  mirrored_devices: Tuple[str, ...] = ()
  profile_steps: Tuple[int, ...] = ()  # (start, end): trace global steps [start, end)

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
