"""Writes a text classification data set from (text, label) rows: tokenizes them
(`trainer.data.tokenizer`), builds the vocabulary from the training split only, and writes
vocab.txt, token-id shards (`trainer.data.records`) and dataset.json. The text sources
(`text_csv`, `rotten_tomatoes`) read their rows and call `write_text_dataset`.
"""

import math

from absl import logging
import numpy as np

from trainer.data import dataset_json
from trainer.data import records
from trainer.data import shards
from trainer.data import tokenizer
from trainer.errors import PipelineError
from trainer.storage import staged

DEFAULT_SEED = 20180921
# dataset.json's max_seq_length when --max_seq_length is 0: the longest training text, rounded up
# to a multiple of 8 (TPU-friendly tiles) and capped here.
MAX_DERIVED_SEQ_LENGTH = 256


def class_names_of(labels):
  """Sorted class names: numerically when every label is an integer, else as strings."""
  names = set(labels)
  try:
    return sorted(names, key=int)
  except ValueError:
    return sorted(names)


def split_rows(rows, validation_fraction, seed):
  """A fixed-seed shuffle of `rows` cut into (train, validation)."""
  if not 0 < validation_fraction < 1:
    raise PipelineError('--validation_fraction must be in (0, 1), got %s' % validation_fraction)
  order = np.random.RandomState(seed).permutation(len(rows))
  num_validation = int(round(len(rows) * validation_fraction))
  return ([rows[i] for i in order[num_validation:]], [rows[i] for i in order[:num_validation]])


def write_text_dataset(train_rows, validation_rows, output_dir, name, vocab_size=20000,
                       min_count=1, max_seq_length=0, train_shards=4, validation_shards=1,
                       class_names=None, source=None, overwrite=False):
  """Tokenizes, builds the vocabulary on train_rows, writes shards, vocab.txt and dataset.json.

  Args:
    train_rows, validation_rows: lists of (text, label name) pairs.
    output_dir: local or gs:// directory.
    name: data set name for dataset.json.
    vocab_size: vocabulary size including the PAD and UNK ids.
    min_count: minimum training-set count of a token to enter the vocabulary.
    max_seq_length: tokens kept per text; 0 derives it from the longest training text.
    class_names: class order (label ids); default `class_names_of` the training labels.
    overwrite: replace a conversion in output_dir (deleted first) instead of refusing.

  Returns:
    the dataset.json dict.

  Raises:
    PipelineError: fewer than two classes, empty splits, validation labels unseen in training,
      or output_dir holds a conversion and `overwrite` is False.
  """
  shards.check_output_dir(output_dir, overwrite)
  class_names = list(class_names or class_names_of([label for _, label in train_rows]))
  if len(class_names) < 2 or not train_rows or not validation_rows:
    raise PipelineError('text data needs at least two classes and examples in both splits (got %d '
                        'classes, %d train, %d validation).'
                        % (len(class_names), len(train_rows), len(validation_rows)))
  index = {c: i for i, c in enumerate(class_names)}
  unknown = sorted({label for _, label in train_rows + validation_rows} - set(index))
  if unknown:
    raise PipelineError('labels %s are not among the classes %s (every class needs training '
                        'examples).' % (unknown[:10], class_names))
  train_tokens = tokenizer.tokenize_python([t for t, _ in train_rows])
  validation_tokens = tokenizer.tokenize_python([t for t, _ in validation_rows])
  try:
    vocabulary = tokenizer.build_vocabulary(train_tokens, vocab_size, min_count)
  except ValueError as e:
    raise PipelineError(str(e))
  longest = max(len(tokens) for tokens in train_tokens)
  if not max_seq_length:
    max_seq_length = min(MAX_DERIVED_SEQ_LENGTH, max(8, int(math.ceil(longest / 8.0)) * 8))
  vocab_index = {t: i for i, t in enumerate(vocabulary)}
  shards.prepare_output_dir(output_dir, overwrite)
  counts, truncated, unknown_rate = {}, {}, {}
  for split, rows, tokens, num_shards in (
      (shards.TRAIN_SPLIT, train_rows, train_tokens, train_shards),
      (shards.EVAL_SPLIT, validation_rows, validation_tokens, validation_shards)):
    ids = [tokenizer.ids_python(t, vocab_index, max_seq_length) for t in tokens]
    examples = [records.text_example(i, index[label], text).SerializeToString()
                for i, (text, label) in zip(ids, rows)]
    shards.write_shards(output_dir, split, examples, num_shards)
    counts[split] = len(examples)
    truncated[split] = sum(len(t) > max_seq_length for t in tokens)
    total = sum(len(i) for i in ids)
    unknown_rate[split] = sum(i.count(tokenizer.UNK_ID) for i in ids) / float(max(total, 1))
  vocab_path = '%s/%s' % (output_dir.rstrip('/'), tokenizer.VOCAB_FILENAME)
  with staged.staged_path(vocab_path) as temporary:
    tokenizer.write_vocabulary(temporary, vocabulary)
  class_counts = {c: sum(1 for _, label in train_rows + validation_rows if label == c)
                  for c in class_names}
  info = {
      'name': name,
      'modality': 'text',
      'num_classes': len(class_names),
      'class_names': class_names,
      'class_counts': class_counts,
      'label_offset': 0,
      'num_train_examples': counts[shards.TRAIN_SPLIT],
      'num_eval_examples': counts[shards.EVAL_SPLIT],
      'max_seq_length': max_seq_length,
      'longest_train_text_tokens': longest,
      'truncated_texts': truncated,
      'unknown_token_rate': unknown_rate,
      'vocab_size': len(vocabulary),
      'vocab_file': tokenizer.VOCAB_FILENAME,
      'tokenizer': tokenizer.TOKENIZER_NAME,
      'pad_id': tokenizer.PAD_ID, 'unk_id': tokenizer.UNK_ID,
      'train_pattern': shards.TRAIN_PATTERN, 'eval_pattern': shards.EVAL_PATTERN,
      'source': source,
  }
  dataset_json.write(output_dir, info)
  logging.info('%s: vocabulary %d tokens, max_seq_length %d, %d/%d texts truncated', name,
               len(vocabulary), max_seq_length, truncated[shards.TRAIN_SPLIT],
               truncated[shards.EVAL_SPLIT])
  return info
