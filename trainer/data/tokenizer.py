"""Text for the BiLSTM classifier: one tokenizer, a vocabulary, and token ids with static shapes.

The tokenizer is written once, in TensorFlow string ops, and used both by `trainer.prepare text`
(to build the vocabulary and the TFRecords) and inside the exported SavedModel (so the serving
signature takes raw strings). One implementation means training and serving cannot drift apart.

Tokenization rule (`tokenize`), applied to UTF-8 text:
  1. invalid UTF-8 bytes become U+FFFD;
  2. Unicode lower-casing of the whole text (ICU's toLower: full and context-sensitive, e.g.
     'ÉCOLE' -> 'école', 'İ' -> 'i' + U+0307, a word-final 'Σ' -> 'ς', as Python's str.lower);
  3. every character that is not a letter (\\pL), digit (\\pN), combining mark (\\pM) or space
     becomes a token of its own: punctuation and symbols split words ("don't" -> don ' t);
  4. runs of whitespace (ASCII and Unicode \\p{Z}) separate tokens; empty text has no tokens.
Token ids: 0 is padding (`PAD`), 1 is any word missing from the vocabulary (`UNK`), then the
vocabulary by decreasing training-set frequency (ties by code point order).
"""

import collections

import numpy as np
import tensorflow.compat.v1 as tf

from trainer.errors import PipelineError
from trainer.models.specs.features import PAD_ID  # pylint: disable=unused-import
from trainer.models.specs.features import UNK_ID  # pylint: disable=unused-import

PAD = '<pad>'
UNK = '<unk>'
TOKENIZER_NAME = 'lower_unicode_punct_split_v1'
VOCAB_FILENAME = 'vocab.txt'


def tokenize(texts):
  """Splits UTF-8 strings into tokens by the module's rule.

  Args:
    texts: string tensor [n].

  Returns:
    tf.RaggedTensor of strings [n, (tokens)].
  """
  texts = tf.strings.unicode_transcode(texts, 'UTF-8', 'UTF-8', errors='replace')
  texts = tf.strings.lower(texts, encoding='utf-8')
  texts = tf.strings.regex_replace(texts, r'([^\pL\pN\pM\s\p{Z}])', r' \1 ')
  texts = tf.strings.regex_replace(texts, r'[\s\p{Z}]+', ' ')
  # sep=None splits on whitespace and, unlike sep=' ', yields no token for an empty string.
  return tf.strings.split(texts, result_type='RaggedTensor')


def tokenize_python(texts, batch_size=4096):
  """`tokenize` run in a private graph: a list of lists of Python `str` tokens."""
  tokens = []
  with tf.Graph().as_default():
    batch = tf.placeholder(tf.string, [None])
    ragged = tokenize(batch)
    with tf.Session() as sess:
      for start in range(0, len(texts), batch_size):
        chunk = [t.encode('utf-8') if isinstance(t, str) else t
                 for t in texts[start:start + batch_size]]
        values, splits = sess.run([ragged.flat_values, ragged.row_splits], {batch: chunk})
        for i in range(len(chunk)):
          tokens.append([v.decode('utf-8') for v in values[splits[i]:splits[i + 1]]])
  return tokens


def build_vocabulary(token_lists, vocab_size, min_count=1):
  """The vocabulary of the training split: PAD, UNK, then the most frequent tokens.

  Args:
    token_lists: iterable of token lists (training split only).
    vocab_size: total size including PAD and UNK (>= 3).
    min_count: tokens seen fewer times are left out (they map to UNK).

  Returns:
    list of str, index = token id.

  Raises:
    ValueError: vocab_size < 3 or min_count < 1.
  """
  if vocab_size < 3 or min_count < 1:
    raise ValueError('vocab_size must be >= 3 and min_count >= 1, got %d and %d'
                     % (vocab_size, min_count))
  counts = collections.Counter(token for tokens in token_lists for token in tokens)
  kept = sorted((t for t, c in counts.items() if c >= min_count), key=lambda t: (-counts[t], t))
  return [PAD, UNK] + kept[:vocab_size - 2]


def write_vocabulary(path, vocabulary):
  with tf.io.gfile.GFile(path, 'w') as f:
    f.write(''.join(token + '\n' for token in vocabulary))


def read_vocabulary(path):
  """Reads vocab.txt (one token per line, line number = id).

  Raises:
    ValueError: the file does not start with PAD and UNK.
  """
  with tf.io.gfile.GFile(path, 'rb') as f:
    vocabulary = f.read().decode('utf-8').split('\n')
  if vocabulary and vocabulary[-1] == '':
    vocabulary.pop()
  if vocabulary[:2] != [PAD, UNK]:
    raise ValueError('%s must start with the lines %s and %s (ids %d and %d)'
                     % (path, PAD, UNK, PAD_ID, UNK_ID))
  return vocabulary


def check_vocabulary(path, vocab_size):
  """Refuses, before any work, a vocab.txt that is missing, lacks the PAD and UNK first lines
  this module writes, or whose line count is not dataset.json's vocab_size (a file cut short
  would map most words to UNK and still train, export and serve).

  Args:
    path: str, the data set's vocab.txt (local or gs://).
    vocab_size: int, dataset.json's vocab_size (the ids its records hold).

  Raises:
    PipelineError: naming the file, both sizes (or the header) and the fix.
  """
  fix = ('Re-run `python -m trainer.prepare text` (or rotten_tomatoes) with --overwrite into %s '
         'to write the records and their vocabulary again.' % path.rpartition('/')[0])
  if not tf.io.gfile.exists(path):
    raise PipelineError('%s is missing: text data needs the vocabulary its token ids come from. %s'
                        % (path, fix))
  try:
    vocabulary = read_vocabulary(path)
  except ValueError as e:  # not UTF-8 (UnicodeDecodeError), no PAD/UNK header
    raise PipelineError('%s is not a vocabulary of this pipeline (%s). %s' % (path, e, fix))
  if len(vocabulary) != vocab_size:
    raise PipelineError('%s has %d lines but dataset.json says vocab_size %d: the file is cut '
                        'short or from another conversion, so words would map to %s. %s'
                        % (path, len(vocabulary), vocab_size, UNK, fix))


def ids_python(tokens, vocabulary, max_seq_length):
  """Token ids of one token list, truncated to max_seq_length (no padding): list of int."""
  index = vocabulary if isinstance(vocabulary, dict) else {t: i for i, t in enumerate(vocabulary)}
  return [index.get(t, UNK_ID) for t in tokens[:max_seq_length]]


def vocabulary_table(vocabulary):
  """A token -> int64 id lookup table of `vocabulary` (list of str, ids by position; unknown
  tokens get UNK_ID), for `texts_to_ids`."""
  return tf.lookup.StaticHashTable(
      tf.lookup.KeyValueTensorInitializer(
          tf.constant(vocabulary[2:], tf.string),
          tf.constant(np.arange(2, len(vocabulary), dtype=np.int64))),
      default_value=UNK_ID)


def texts_to_ids(texts, vocabulary, max_seq_length):
  """In-graph text -> fixed-shape ids, exactly as `trainer.prepare` wrote them for training.

  Args:
    texts: string tensor [n], raw UTF-8 text.
    vocabulary: list of str (ids by position), embedded in the graph as a lookup table; or a
      table `vocabulary_table` built once (inside a tf.data map, build it outside the map).
    max_seq_length: tokens kept per text; longer texts are truncated (first tokens kept).

  Returns:
    (token_ids int32 [n, max_seq_length] padded with PAD_ID, length int32 [n]).
  """
  tokens = tokenize(texts)
  table = vocabulary_table(vocabulary) if isinstance(vocabulary, list) else vocabulary
  ids = tf.ragged.map_flat_values(table.lookup, tokens)
  dense = ids.to_tensor(default_value=PAD_ID)[:, :max_seq_length]
  length = tf.minimum(tf.cast(ids.row_lengths(), tf.int32), max_seq_length)
  padding = max_seq_length - tf.shape(dense)[1]
  dense = tf.pad(dense, [[0, 0], [0, padding]], constant_values=PAD_ID)
  dense = tf.reshape(tf.cast(dense, tf.int32), [-1, max_seq_length])
  return dense, length
