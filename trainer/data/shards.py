"""The shard layout that `trainer.prepare` writes and the input_fns read: `train-00000-of-00016`
and `validation-00000-of-00004`, the names of converted ImageNet."""

from absl import logging
import numpy as np
import tensorflow.compat.v1 as tf

from trainer.errors import PipelineError

TRAIN_SPLIT = 'train'
EVAL_SPLIT = 'validation'
TRAIN_PATTERN = TRAIN_SPLIT + '-*'
EVAL_PATTERN = EVAL_SPLIT + '-*'


def shard_name(split, index, num_shards):
  """'train-00003-of-00016' for split 'train', index 3 of 16 shards."""
  return '%s-%05d-of-%05d' % (split, index, num_shards)


def shard_bounds(num_examples, num_shards):
  """The [start, end) bounds of at most `num_shards` contiguous runs of (almost) equal size over
  `num_examples` (at least one run, and no more runs than examples): a list of (start, end)."""
  num_shards = max(1, min(num_shards, num_examples))
  bounds = np.linspace(0, num_examples, num_shards + 1).astype(int)
  return list(zip(bounds[:-1], bounds[1:]))


def write_shards(output_dir, split, examples, num_shards):
  """Writes serialized `examples` (a list of bytes) as <split>-0000i-of-0000N in `output_dir`
  (local or gs://), in order, in contiguous runs of (almost) equal size. Fewer shards than
  `num_shards` are written when there are fewer examples."""
  runs = shard_bounds(len(examples), num_shards)
  for i, (start, end) in enumerate(runs):
    path = '%s/%s' % (output_dir.rstrip('/'), shard_name(split, i, len(runs)))
    with tf.io.TFRecordWriter(path) as writer:
      for example in examples[start:end]:
        writer.write(example)
  logging.info('wrote %d %s examples in %d shards to %s', len(examples), split, len(runs),
               output_dir)


def check_shards_exist(data, is_training_splits):
  """Fails fast, before any graph is built, when a split's shards are missing.

  Args:
    data: `trainer.data.data_config.DataConfig` (not fake_data).
    is_training_splits: the splits a run reads, as is_training booleans.

  Raises:
    PipelineError: no file matches a split's pattern, or text data lacks its vocab.txt.
  """
  for is_training in is_training_splits:
    if not tf.io.gfile.glob(data.file_pattern(is_training)):
      raise PipelineError(
          'no TFRecord files match %s. Point --data_dir at a directory of shards (%s, %s), e.g. '
          'one made by `python -m trainer.prepare fashion_mnist` (or `rotten_tomatoes` / `text` '
          'for bilstm) `--output_dir DIR`, or use --fake_data for a smoke test.'
          % (data.file_pattern(is_training), TRAIN_PATTERN, EVAL_PATTERN))
  if data.modality == 'text' and not tf.io.gfile.exists(data.vocab_path):
    raise PipelineError('%s is missing: text data needs the vocabulary its token ids come from. '
                        'Re-run `python -m trainer.prepare text` into %s.'
                        % (data.vocab_path, data.data_dir))
