"""The BiLSTM text pipeline: tokenizer, vocabulary, `trainer.prepare text` / `rotten_tomatoes` on
the real snippets, the network's padding invariance and gradient clipping. The SavedModel on raw
strings against TPUEstimator.predict on the token ids: tests/test_main.py's export check."""

import os

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from trainer.data import dataset_json
from trainer.data import input_fn as input_fn_lib
from trainer.data import shards
from trainer.data import tokenizer
from trainer.data.data_config import DataConfig
from trainer.errors import PipelineError
from trainer.models import bilstm
from trainer.models import features as features_lib
from trainer.models import model_fn as model_fn_lib
from trainer.models.model_config import ModelConfig
from trainer.prepare import text_csv

from helpers import read_records
from helpers import run_main
from helpers import run_prepare
from helpers import TINY_BY_MODEL

# --- tokenizer and vocabulary --------------------------------------------------------------------

def test_tokenizer_lowercases_and_splits_punctuation_including_non_ascii():
  texts = ["Hello, World!  Don't", '', '  \t ', 'ÉCOLE Über — naïve…', 'a\u00a0b\tc\nd',
           '日本語です。', b'caf\xe9 OK', 'x' * 3 + '42' + '_y']
  assert tokenizer.tokenize_python(texts) == [
      ['hello', ',', 'world', '!', 'don', "'", 't'],
      [],
      [],
      ['école', 'über', '—', 'naïve', '…'],
      ['a', 'b', 'c', 'd'],           # no-break space, tab and newline all separate tokens
      ['日本語です', '。'],
      ['caf', '\ufffd', 'ok'],        # an invalid UTF-8 byte becomes U+FFFD, a symbol token
      ['xxx42', '_', 'y'],
  ]


def test_vocabulary_keeps_frequent_training_tokens_after_the_reserved_ids(tmp_path):
  tokens = [['b', 'a', 'b', 'c'], ['a', 'b'], ['ü', 'ü']]
  assert tokenizer.build_vocabulary(tokens, vocab_size=10, min_count=2) == [
      '<pad>', '<unk>', 'b', 'a', 'ü']
  assert tokenizer.build_vocabulary(tokens, vocab_size=3) == ['<pad>', '<unk>', 'b']
  vocabulary = tokenizer.build_vocabulary(tokens, vocab_size=10)
  assert tokenizer.ids_python(['a', 'never-seen', 'c'], vocabulary, 10) == [3, tokenizer.UNK_ID, 5]
  path = str(tmp_path / 'vocab.txt')
  tokenizer.write_vocabulary(path, vocabulary)
  assert tokenizer.read_vocabulary(path) == vocabulary
  (tmp_path / 'bad.txt').write_text('the\nof\n')
  with pytest.raises(ValueError, match='must start with'):
    tokenizer.read_vocabulary(str(tmp_path / 'bad.txt'))
  with pytest.raises(ValueError):
    tokenizer.build_vocabulary(tokens, vocab_size=2)


def test_in_graph_ids_equal_the_ids_prepare_writes():
  """The serving graph's text -> ids equals prepare's for unknown words, empty, non-ASCII and
  over-long text (truncated to the first max_seq_length tokens)."""
  vocabulary = tokenizer.build_vocabulary(
      tokenizer.tokenize_python(['the film is great', 'a naïve, dull film', 'ÉCOLE']), 100)
  texts = ['The film is GREAT!', '', 'zebra crossing', 'École naïve', 'the film ' * 20]
  max_seq_length = 8
  expected = [tokenizer.ids_python(t, vocabulary, max_seq_length)
              for t in tokenizer.tokenize_python(texts)]
  with tf.Graph().as_default():
    ids, length = tokenizer.texts_to_ids(tf.constant([t.encode() for t in texts]), vocabulary,
                                        max_seq_length)
    assert ids.shape.as_list()[1] == max_seq_length  # static: the model needs it
    with tf.Session() as sess:
      sess.run(tf.tables_initializer())
      ids, length = sess.run([ids, length])
  assert length.tolist() == [len(e) for e in expected] == [5, 0, 2, 2, 8]
  for row, e in zip(ids, expected):
    assert row.tolist() == e + [tokenizer.PAD_ID] * (max_seq_length - len(e))
  assert ids[2].tolist()[:2] == [tokenizer.UNK_ID, tokenizer.UNK_ID]


# --- trainer.prepare text ------------------------------------------------------------------------

def _write_csv(path, rows, delimiter=','):
  import csv  # pylint: disable=g-import-not-at-top
  with open(path, 'w', newline='', encoding='utf-8') as f:
    writer = csv.writer(f, delimiter=delimiter)
    writer.writerow(['id', 'review', 'sentiment'])
    for i, (text, label) in enumerate(rows):
      writer.writerow([i, text, label])


def _records(directory, split):
  out = []
  for r in read_records(os.path.join(directory, split + '-*')):
    f = tf.train.Example.FromString(r).features.feature
    out.append((f['text/raw'].bytes_list.value[0].decode(),
                list(f['text/token_ids'].int64_list.value),
                f['text/class/label'].int64_list.value[0]))
  return out


_ROWS = [('Great, "moving" film!', 'pos'), ('Dull and slow.', 'neg'), ('It is a film.', 'meh'),
         ('Loved it', 'pos'), ('Hated it', 'neg'), ('Fine, I guess', 'meh')] * 5


def test_prepare_text_builds_the_vocabulary_from_the_training_file_only(tmp_path):
  _write_csv(str(tmp_path / 'train.csv'), _ROWS)
  _write_csv(str(tmp_path / 'val.tsv'), [('A zebra film', 'pos'), ('', 'neg')], delimiter='\t')
  out = str(tmp_path / 'out')
  info = text_csv.prepare(
      [str(tmp_path / 'train.csv')], out, validation_input=str(tmp_path / 'val.tsv'),
      text_column='review', label_column='sentiment', train_shards=2, validation_shards=1)
  assert info['class_names'] == ['meh', 'neg', 'pos'] and info['num_classes'] == 3
  assert (info['num_train_examples'], info['num_eval_examples']) == (30, 2)
  assert dataset_json.read(out) == info
  vocabulary = tokenizer.read_vocabulary(os.path.join(out, 'vocab.txt'))
  assert len(vocabulary) == info['vocab_size'] and 'zebra' not in vocabulary
  assert {'great', '"', 'film', ','} <= set(vocabulary)
  validation = _records(out, 'validation')
  index = {t: i for i, t in enumerate(vocabulary)}
  assert validation[0] == ('A zebra film', [index['a'], tokenizer.UNK_ID, index['film']], 2)
  assert validation[1] == ('', [], 1)
  train = _records(out, 'train')
  assert sorted((t, l) for t, _, l in train) == sorted(
      (t, ['meh', 'neg', 'pos'].index(l)) for t, l in _ROWS)
  assert info['max_seq_length'] == 8  # longest training text: 7 tokens, rounded up to 8


def test_prepare_text_splits_one_file_with_a_fixed_seed(tmp_path):
  rows = [('review number %d is %s' % (i, 'good' if i % 3 else 'bad'), str(10 if i % 3 else 2))
          for i in range(50)]
  _write_csv(str(tmp_path / 'all.csv'), rows)
  runs = {}
  for name, seed in (('a', 1), ('b', 1), ('c', 2)):
    out = str(tmp_path / name)
    info = text_csv.prepare([str(tmp_path / 'all.csv')], out, seed=seed,
                                           text_column='review', label_column='sentiment')
    runs[name] = (_records(out, 'train'), _records(out, 'validation'))
  assert info['class_names'] == ['2', '10']  # integer labels sort numerically
  assert (info['num_train_examples'], info['num_eval_examples']) == (40, 10)
  assert runs['a'] == runs['b'] and runs['a'] != runs['c']
  train_texts = {t for t, _, _ in runs['a'][0]}
  assert not train_texts & {t for t, _, _ in runs['a'][1]}
  assert len(train_texts) == 40


def test_prepare_text_refuses_bad_input_with_what_to_do(tmp_path):
  _write_csv(str(tmp_path / 'train.csv'), _ROWS)
  with pytest.raises(PipelineError, match="no column 'text'.*--text_column"):
    text_csv.prepare([str(tmp_path / 'train.csv')], str(tmp_path / 'o1'))
  _write_csv(str(tmp_path / 'val.csv'), [('new label here', 'surprise')])
  with pytest.raises(PipelineError, match='surprise'):
    text_csv.prepare(
        [str(tmp_path / 'train.csv')], str(tmp_path / 'o2'), text_column='review',
        label_column='sentiment', validation_input=str(tmp_path / 'val.csv'))
  proc = run_prepare('text', '--input=' + str(tmp_path / 'nope.csv'),
                     '--output_dir=' + str(tmp_path / 'o3'))
  assert proc.returncode == 2 and 'nope.csv does not exist' in proc.stderr


def test_prepare_text_cli(tmp_path):
  _write_csv(str(tmp_path / 'train.csv'), _ROWS)
  proc = run_prepare('text', '--input=' + str(tmp_path / 'train.csv'),
                     '--output_dir=' + str(tmp_path / 'out'), '--text_column=review',
                     '--label_column=sentiment', '--vocab_size=5', '--max_seq_length=3')
  assert proc.returncode == 0, proc.stderr[-2000:]
  info = dataset_json.read(str(tmp_path / 'out'))
  assert info['vocab_size'] == 5 and info['max_seq_length'] == 3
  assert info['num_train_examples'] + info['num_eval_examples'] == 30
  assert info['num_eval_examples'] == 6  # the default 80/20 split
  assert max(len(ids) for _, ids, _ in _records(str(tmp_path / 'out'), 'train')) == 3


def test_rotten_tomatoes_is_the_deduplicated_fresh_and_rotten_snippets(rotten_tomatoes_dir):
  info = dataset_json.read(rotten_tomatoes_dir)
  assert info['class_names'] == ['fresh', 'rotten']
  assert info['class_counts'] == {'fresh': 7368, 'rotten': 5384}
  assert (info['num_train_examples'], info['num_eval_examples']) == (10202, 2550)
  train, validation = _records(rotten_tomatoes_dir, 'train'), _records(rotten_tomatoes_dir,
                                                                       'validation')
  assert (len(train), len(validation)) == (10202, 2550)
  texts = [t for t, _, _ in train + validation]
  assert len(set(texts)) == len(texts)
  majority = max(np.mean([l == 0 for _, _, l in validation]),
                 np.mean([l == 1 for _, _, l in validation]))
  assert 0.55 < majority < 0.61  # the data notes: a majority guess scores 0.58
  assert info['truncated_texts'] == {'train': 0, 'validation': 0}
  assert info['max_seq_length'] >= max(len(ids) for _, ids, _ in train)


# --- the network ---------------------------------------------------------------------------------

@pytest.mark.parametrize('pooling', bilstm.POOLINGS)
def test_padding_does_not_change_the_logits(pooling):
  """The same texts padded to 12 and to 40 positions give the same logits (2 stacked layers;
  one text is empty)."""
  rng = np.random.RandomState(0)
  length = np.array([5, 12, 1, 0, 9], np.int32)
  ids = rng.randint(2, 50, size=(5, 12)).astype(np.int32) * (np.arange(12) < length[:, None])
  logits = []
  with tf.Graph().as_default():
    for padded_length in (12, 40):
      padded = np.zeros((5, padded_length), np.int32)
      padded[:, :12] = ids
      with tf.variable_scope('net', reuse=tf.AUTO_REUSE):
        logits.append(bilstm.bilstm(tf.constant(padded), tf.constant(length), 50, 3, False,
                                    embedding_dim=8, hidden_units=6, num_layers=2,
                                    pooling=pooling))
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      short, long = sess.run(logits)
  assert np.abs(short).max() > 0
  np.testing.assert_allclose(short, long, rtol=1e-5, atol=1e-6)
  assert np.all(np.isfinite(short))


def test_gradient_is_clipped_to_its_global_norm():
  """One plain-SGD step (rate 1) moves the weights by exactly the clipped gradient."""
  config = ModelConfig(model='bilstm', num_classes=2, vocab_size=30, max_seq_length=6,
                       embedding_dim=4, lstm_hidden_units=4, dropout_rate=0.0,
                       optimizer='momentum', momentum=0.0, lr_schedule='constant',
                       base_learning_rate=1.0, weight_decay=0.0, gradient_clip_norm=1e-3,
                       skip_host_call=True)
  with tf.Graph().as_default():
    tf.set_random_seed(7)
    features = {'token_ids': tf.constant([[2, 3, 4, 0, 0, 0], [5, 6, 7, 8, 9, 10]]),
                'length': tf.constant([3, 6]), 'mask': tf.ones([2])}
    spec = model_fn_lib.model_fn_builder(config)(features, tf.constant([0, 1]),
                                                 tf.estimator.ModeKeys.TRAIN, {})
    weights = tf.trainable_variables()
    grads = tf.gradients(spec.loss, weights)
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      before = sess.run(weights)
      raw_norm = np.sqrt(sum(np.sum(np.square(tf.convert_to_tensor(g).eval()))
                             for g in grads))
      sess.run(spec.train_op)
      after = sess.run(weights)
  moved = np.sqrt(sum(np.sum(np.square(a - b)) for a, b in zip(after, before)))
  # The clip must be active for the test to mean anything: the raw norm is ~0.05-0.1 with these
  # shapes, whatever the initialisation, and the clip is 1e-3.
  assert raw_norm > 10 * config.gradient_clip_norm
  np.testing.assert_allclose(moved, config.gradient_clip_norm, rtol=1e-3)


# --- end to end ----------------------------------------------------------------------------------

def test_records_with_ids_outside_the_vocabulary_are_refused(text_small_dir, tmp_path):
  data_dir = str(tmp_path / 'data')
  os.makedirs(data_dir)
  tf.io.gfile.copy(os.path.join(text_small_dir, 'vocab.txt'), os.path.join(data_dir, 'vocab.txt'))
  info = dataset_json.read(text_small_dir)
  records = read_records(os.path.join(text_small_dir, 'train-*'), 64)
  bad = tf.train.Example.FromString(records[3])
  bad.features.feature['text/token_ids'].int64_list.value[0] = info['vocab_size'] + 7
  records[3] = bad.SerializeToString()
  shards.write_shards(data_dir, 'train', records, 1)
  shards.write_shards(data_dir, 'validation', records[:10], 1)
  dataset_json.write(data_dir, dict(info, num_train_examples=64, num_eval_examples=10))
  args, _ = TINY_BY_MODEL['bilstm']
  proc = run_main('--train_steps=4', '--data_dir=' + data_dir, '--model_dir=' + str(tmp_path / 'm'),
                  '--skip_host_call', *args)
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert 'outside [0, vocab_size)' in proc.stderr and 'Traceback' not in proc.stderr


def test_model_and_data_modality_must_match(text_small_dir, small_dir, tmp_path):
  proc = run_main('--model=cnn', '--train_steps=1', '--data_dir=' + text_small_dir,
                  '--model_dir=' + str(tmp_path / 'a'))
  assert (proc.returncode == 2 and 'holds text data' in proc.stderr
          and '--model=bilstm' in proc.stderr)
  args, _ = TINY_BY_MODEL['bilstm']
  proc = run_main('--train_steps=1', '--data_dir=' + small_dir,
                  '--model_dir=' + str(tmp_path / 'b'),
                  *args)
  assert proc.returncode == 2 and 'holds image data' in proc.stderr


@pytest.mark.parametrize('is_training', [True, False])
def test_text_batches_follow_the_features_contract(text_small_dir, is_training):
  """The text input_fn builds exactly what models.features promises the model_fn, and the real
  snippets' ids are padded with PAD_ID after their length."""
  info = dataset_json.read(text_small_dir)
  data = DataConfig(data_dir=text_small_dir, num_classes=2, num_train_examples=256,
                    num_eval_examples=90, image_size=0, modality='text',
                    max_seq_length=info['max_seq_length'], vocab_size=info['vocab_size'])
  with tf.Graph().as_default():
    dataset = input_fn_lib.input_fn_builder(data, is_training, global_batch_size=32)(
        {'batch_size': 32})
    shapes, dtypes = tf.data.get_output_shapes(dataset), tf.data.get_output_types(dataset)
    # take(1), read to its end: the session closes with no tf.data thread still running.
    next_batch = tf.data.make_one_shot_iterator(dataset.take(1)).get_next()
    with tf.Session() as sess:
      features, labels = sess.run(next_batch)
      with pytest.raises(tf.errors.OutOfRangeError):
        sess.run(next_batch)
  spec = features_lib.feature_spec('text', 32, max_seq_length=info['max_seq_length'])
  assert {k: (shapes[0][k].as_list(), dtypes[0][k]) for k in shapes[0]} == spec
  assert (shapes[1].as_list(), dtypes[1]) == ([32], features_lib.LABEL_DTYPE)
  ids, length = features[features_lib.TOKEN_IDS], features[features_lib.LENGTH]
  assert length.min() >= 1 and set(labels) <= {0, 1}
  for row, n in zip(ids, length):
    assert (row[:n] != tokenizer.PAD_ID).all() and (row[n:] == tokenizer.PAD_ID).all()
