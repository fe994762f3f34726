"""The shard layout that `trainer.prepare` writes and the input_fns read: `train-00000-of-00016`
and `validation-00000-of-00004`, the names of converted ImageNet; and what else a conversion
owns in its output directory, which every converter refuses to mix with and --overwrite
replaces (`prepare_output_dir`)."""

import re

from absl import logging
import numpy as np
import tensorflow.compat.v1 as tf

from trainer.data import arrays
from trainer.data import dataset_json
from trainer.data import tokenizer
from trainer.errors import PipelineError
from trainer.storage import outputs
from trainer.storage import staged

TRAIN_SPLIT = 'train'
EVAL_SPLIT = 'validation'
TRAIN_PATTERN = TRAIN_SPLIT + '-*'
EVAL_PATTERN = EVAL_SPLIT + '-*'
# The Beam converters' plan of the shards to write (trainer/prepare/beam_convert.py).
PLAN_DIR = '.prepare-plan'
# What a conversion writes into output_dir, and all that --overwrite deletes there: the shards,
# dataset.json, the text vocabulary, the Beam plan folder, the .npz files of `prepare arrays`,
# and the files they are written under (trainer/storage/staged.py; the `.tmp` of earlier
# versions). Other files there are the user's and are left alone.
_CONVERSION_NAME = re.compile(
    r'^\.?((%s|%s)-\d{5}-of-\d{5}|%s)(\.tmp)?$'
    % (TRAIN_SPLIT, EVAL_SPLIT, '|'.join(re.escape(name) for name in (
        dataset_json.FILENAME, tokenizer.VOCAB_FILENAME, PLAN_DIR, arrays.TRAIN_FILE,
        arrays.EVAL_FILE))))


def shard_name(split, index, num_shards):
  """'train-00003-of-00016' for split 'train', index 3 of 16 shards."""
  return '%s-%05d-of-%05d' % (split, index, num_shards)


def shard_bounds(num_examples, num_shards):
  """The [start, end) bounds of at most `num_shards` contiguous runs of (almost) equal size over
  `num_examples` (at least one run, and no more runs than examples): a list of (start, end)."""
  num_shards = max(1, min(num_shards, num_examples))
  bounds = np.linspace(0, num_examples, num_shards + 1).astype(int)
  return list(zip(bounds[:-1], bounds[1:]))


def is_conversion_output(name):
  """True for a file name in an output_dir that a conversion wrote, or is writing aside
  (see _CONVERSION_NAME)."""
  return bool(_CONVERSION_NAME.match(staged.final_name(name) or name))


def existing_conversion(output_dir):
  """The paths of what a conversion wrote in `output_dir` (sorted; [] when it does not exist)."""
  return ['%s/%s' % (output_dir.rstrip('/'), name)
          for name in outputs.existing_entries(output_dir) if is_conversion_output(name)]


def _describe(names):
  if dataset_json.FILENAME in names:
    return 'a converted dataset'
  return 'the shards of an incomplete conversion'


def check_output_dir(output_dir, overwrite):
  """Refuses an --output_dir holding a conversion (complete or not) unless `overwrite`; the
  user's other files there do not count. Run before any work.

  Returns:
    list of str names of the conversion's files and folders there.

  Raises:
    PipelineError: naming --output_dir, what it holds and --overwrite.
  """
  return outputs.check_output_dir(output_dir, '--output_dir', overwrite,
                                  owned=is_conversion_output, describe=_describe)


def prepare_output_dir(output_dir, overwrite):
  """`check_output_dir`, then deletes the earlier conversion's files (never the user's) and
  creates `output_dir`: new shards are never mixed with old ones."""
  outputs.clear_output_dir(output_dir, check_output_dir(output_dir, overwrite))
  tf.io.gfile.makedirs(output_dir)


def write_shards(output_dir, split, examples, num_shards):
  """Writes serialized `examples` (a list of bytes) as <split>-0000i-of-0000N in `output_dir`
  (local or gs://), in order, in contiguous runs of (almost) equal size, each under a
  hidden name renamed when complete (trainer/storage/staged.py). Fewer shards than `num_shards` are written when there
  are fewer examples."""
  runs = shard_bounds(len(examples), num_shards)
  for i, (start, end) in enumerate(runs):
    path = '%s/%s' % (output_dir.rstrip('/'), shard_name(split, i, len(runs)))
    with staged.staged_path(path) as temporary:
      with tf.io.TFRecordWriter(temporary) as writer:
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
          % (data.shown_pattern(is_training), TRAIN_PATTERN, EVAL_PATTERN))
  if data.modality == 'text' and not tf.io.gfile.exists(data.vocab_path):
    raise PipelineError('%s is missing: text data needs the vocabulary its token ids come from. '
                        'Re-run `python -m trainer.prepare text` into %s.'
                        % (data.vocab_path, data.data_dir))
