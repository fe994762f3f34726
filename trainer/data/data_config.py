"""What the input_fns read and how they turn records into model inputs."""

import dataclasses
from typing import Optional

from trainer.data import shards
from trainer.data import tokenizer
from trainer.models import features
from trainer.storage import patterns


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
    image_dtype: dtype of features['image'] (`models.features`): 'uint8' (CPU/GPU), 'float32'
      or 'bfloat16' (Cloud TPU; the cast is one op per batch on the TPU host).
    train_crop, crop_padding, eval_crop_fraction, random_flip, color_distortion: see
      `trainer.data.preprocessing`.
    cache_decoded: cache decoded images in host RAM after the first epoch (small datasets only).
    fake_data: synthetic images and labels of the right shapes instead of reading files.
    modality: 'image' (ImageNet-schema records) or 'text' (token-id records of
      `python -m trainer.prepare text`).
    max_seq_length: text: tokens per example (longer records are truncated, shorter padded).
    vocab_size: text: ids in [0, vocab_size) (the lines of vocab_file).
    vocab_file: text: the vocabulary's file name inside data_dir (for the serving signature).
    seed: keys the training input's file and example shuffles and each example's augmentation
      (`trainer.data.input_fn`).
  """
  data_dir: Optional[str]
  num_classes: int
  num_train_examples: int
  num_eval_examples: int
  image_size: int
  label_offset: int = 0
  train_pattern: str = shards.TRAIN_PATTERN
  eval_pattern: str = shards.EVAL_PATTERN
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
  vocab_file: str = tokenizer.VOCAB_FILENAME
  seed: int = 0

  def __post_init__(self):
    if self.image_dtype not in features.IMAGE_DTYPES:
      raise ValueError('image_dtype must be one of %s, got %r'
                       % (features.IMAGE_DTYPES, self.image_dtype))

  @property
  def vocab_path(self):
    return '%s/%s' % (self.data_dir.rstrip('/'), self.vocab_file)

  def file_pattern(self, is_training):
    """Glob of the training or evaluation shards, e.g. gs://bucket/data/train-*: data_dir
    escaped (`trainer.storage.patterns.glob_escape`: a data_dir `d[12]` never reads `d1`'s
    shards), the file-name pattern as dataset.json gives it."""
    return '%s/%s' % (patterns.glob_escape(self.data_dir.rstrip('/')),
                      self.train_pattern if is_training else self.eval_pattern)

  def shown_pattern(self, is_training):
    """file_pattern as the user wrote the directory, for messages."""
    return '%s/%s' % (self.data_dir.rstrip('/'),
                      self.train_pattern if is_training else self.eval_pattern)


PREPROCESSING_FIELDS = ('train_crop', 'crop_padding', 'eval_crop_fraction', 'random_flip',
                        'color_distortion')


def from_dataset_json(data_dir, info, image_size, seed=0, **preprocessing_overrides):
  """The DataConfig of `data_dir` from its dataset.json dict `info` (`trainer.data.dataset_json`),
  for a model of `image_size` (0 for text); `preprocessing_overrides` (PREPROCESSING_FIELDS, e.g.
  crop_padding) replace dataset.json's preprocessing.

  Raises:
    ValueError: a field DataConfig refuses (dataset_json.read has checked the schema).
    KeyError: `info` lacks num_classes or a split size (a dict that dataset_json.read did not
      check).
  """
  modality = info.get('modality', 'image')
  preprocessing = {k: v for k, v in info.get('preprocessing', {}).items()
                   if k in PREPROCESSING_FIELDS}
  preprocessing.update(preprocessing_overrides)
  return DataConfig(
      data_dir=data_dir, num_classes=info['num_classes'], label_offset=info.get('label_offset', 0),
      num_train_examples=info['num_train_examples'],
      num_eval_examples=info['num_eval_examples'],
      image_size=image_size if modality == 'image' else 0,
      train_pattern=info.get('train_pattern', DataConfig.train_pattern),
      eval_pattern=info.get('eval_pattern', DataConfig.eval_pattern), modality=modality,
      max_seq_length=info.get('max_seq_length', 0), vocab_size=info.get('vocab_size', 0),
      vocab_file=info.get('vocab_file', DataConfig.vocab_file), seed=seed, **preprocessing)
