"""The BiLSTM's text preprocessing in plain Python, for the PyTorch module: the tokenizer rule of
trainer/data/tokenizer.py (which is written in TensorFlow string ops) and its token ids.

The rule: invalid UTF-8 becomes U+FFFD; the whole text is lower-cased (ICU's full,
context-sensitive mapping, as Python's str.lower: 'İ' -> 'i' + U+0307, a word-final 'Σ' -> 'ς');
every character that is not a letter, digit, combining mark or space is a token of its own;
whitespace (space, tab, newline, \\v, \\f, \\r and the Unicode separators Z*) separates tokens.
Ids: 0 padding, 1 a word outside the vocabulary, then the vocabulary's order; the first
max_seq_length tokens are kept.
"""

import unicodedata

from trainer.models.specs.features import PAD_ID
from trainer.models.specs.features import UNK_ID

# TensorFlow's rule: RE2's \s (tab, newline, \f, \r, space) and \p{Z} become a space, then the
# split on ASCII whitespace (\v too). Python's isspace() is wider: U+001C-U+001F and U+0085 are
# symbols to TensorFlow.
_ASCII_SPACE = frozenset(' \t\n\v\f\r')


def _is_space(char):
  return char in _ASCII_SPACE or unicodedata.category(char).startswith('Z')


def tokenize(text):
  """str or UTF-8 bytes -> list of str tokens, by the module's rule."""
  if isinstance(text, bytes):
    text = text.decode('utf-8', errors='replace')
  tokens, word = [], []
  for char in text.lower():
    if _is_space(char):
      kind = 'space'
    elif unicodedata.category(char)[0] in 'LNM':
      kind = 'word'
    else:
      kind = 'symbol'
    if kind != 'word' and word:
      tokens.append(''.join(word))
      word = []
    if kind == 'word':
      word.append(char)
    elif kind == 'symbol':
      tokens.append(char)
  if word:
    tokens.append(''.join(word))
  return tokens


def token_ids(texts, vocabulary, max_seq_length):
  """Texts -> token ids, list of lists of int, each padded with PAD_ID to max_seq_length.

  Args:
    texts: iterable of str (or UTF-8 bytes).
    vocabulary: list of str, the run's vocab.txt (id = position).
    max_seq_length: tokens per text; longer texts keep their first tokens.
  """
  index = {token: i for i, token in enumerate(vocabulary) if i > UNK_ID}
  rows = []
  for text in texts:
    ids = [index.get(token, UNK_ID) for token in tokenize(text)[:max_seq_length]]
    rows.append(ids + [PAD_ID] * (max_seq_length - len(ids)))
  return rows
