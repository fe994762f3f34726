"""Every input is checked before any work, each error naming the field and the fix: the bad-input
matrix's rows (tests/refusals.py runs them; each must exit 2 with one `error:` line holding the
expected words, no traceback, every file as it was) for a malformed dataset.json, TF_CONFIG and
CLUSTER_SPEC, flag values out of range, a vocab.txt that does not match dataset.json, a CSV with a
NUL byte or not UTF-8, a damaged best.json, a model_dir checkpoint of another network, and output
directories that cannot be created.
"""

import json
import os
import shutil

import pytest

from trainer.run import network_record

from helpers import config_from_args
from refusals import Row
from refusals import run_rows

# A tiny trainer run on synthetic data; every row is refused before it starts.
FAKE = ['--fake_data', '--model=cnn', '--image_size=28', '--num_classes=10',
        '--num_train_examples=64', '--num_eval_examples=16', '--train_batch_size=8',
        '--eval_batch_size=16', '--steps_per_eval=2', '--skip_host_call',
        '--model_dir={root}/model']
STEPS = ['--train_steps=2']
IMAGE_INFO = {'name': 'tiny', 'num_classes': 10, 'class_names': ['c%d' % i for i in range(10)],
              'label_offset': 0, 'num_train_examples': 64, 'num_eval_examples': 50,
              'image_height': 28, 'image_width': 28, 'image_channels': 1,
              'mean_rgb': [72.9] * 3, 'stddev_rgb': [90.0] * 3,
              'train_pattern': 'train-*', 'eval_pattern': 'validation-*',
              'preprocessing': {'train_crop': 'pad_and_crop', 'crop_padding': 2,
                                'eval_crop_fraction': 1.0, 'random_flip': False}}
TEXT_INFO = {'name': 'texts', 'modality': 'text', 'num_classes': 2, 'class_names': ['neg', 'pos'],
             'label_offset': 0, 'num_train_examples': 32, 'num_eval_examples': 8,
             'max_seq_length': 16, 'vocab_size': 100, 'vocab_file': 'vocab.txt',
             'train_pattern': 'train-*', 'eval_pattern': 'validation-*'}
ON_DATA = ['--data_dir={root}/data', '--model=cnn', '--model_dir={root}/model', '--train_steps=1',
           '--train_batch_size=8', '--eval_batch_size=10']
ON_TEXT = ['--data_dir={root}/data', '--model=bilstm', '--model_dir={root}/model',
           '--train_steps=1', '--train_batch_size=8', '--eval_batch_size=8',
           '--lstm_hidden_units=8', '--embedding_dim=8', '--mode=train']
PREDICT = ['--mode=predict', '--predict_input={root}/none/*.png',
           '--predict_output={root}/out/predictions.jsonl']


def _write(path, text):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, 'wb' if isinstance(text, bytes) else 'w') as f:
    f.write(text)


def _data(text=None, info=IMAGE_INFO, vocabulary=None, **fields):
  """setup(root): root/data with shard files and a dataset.json of `text`, else of `info` with
  `fields` replaced (a field set to ... is removed); for text data its vocab.txt lines."""
  def setup(root):
    values = {k: v for k, v in dict(info, **fields).items() if v is not Ellipsis}
    _write(os.path.join(root, 'data', 'dataset.json'),
           text if text is not None else json.dumps(values))
    for name in ('train-00000-of-00001', 'validation-00000-of-00001'):
      _write(os.path.join(root, 'data', name), b'')
    if vocabulary is not None:
      _write(os.path.join(root, 'data', 'vocab.txt'), ''.join(w + '\n' for w in vocabulary))
  return setup


def _files(contents):
  """setup(root): each relative path of the dict `contents` holding its text (str or bytes)."""
  def setup(root):
    for name, text in contents.items():
      _write(os.path.join(root, *name.split('/')), text)
  return setup


def _copy(source):
  return lambda root: shutil.copytree(source, os.path.join(root, 'model'))


def _dataset_rows():
  bad = [('not JSON', {'text': '{"num_classes": 10,'}, ['dataset.json', 'not valid JSON']),
         ('a JSON list', {'text': '[]'}, ['dataset.json', 'not a JSON object']),
         ('null', {'text': 'null'}, ['dataset.json', 'not a JSON object']),
         ('num_classes a string', {'num_classes': '10'}, ['"num_classes"', '"10"', 'integer']),
         ('num_classes 10.7', {'num_classes': 10.7}, ['"num_classes"', '10.7', 'integer']),
         ('num_classes 10**12', {'num_classes': 10**12}, ['"num_classes"', '1000000000000']),
         ('num_classes 1e400', {'text': json.dumps(IMAGE_INFO).replace('"num_classes": 10',
                                                                       '"num_classes": 1e400')},
          ['"num_classes"', 'Infinity']),
         ('image_height 0', {'image_height': 0}, ['"image_height"', 'is 0']),
         ('image_width negative', {'image_width': -28}, ['"image_width"', '-28']),
         ('image_size negative', {'image_size': -1}, ['"image_size"', '-1']),
         ('num_train_examples negative', {'num_train_examples': -5},
          ['"num_train_examples"', '-5']),
         ('num_eval_examples negative', {'num_eval_examples': -1}, ['"num_eval_examples"', '-1']),
         ('label_offset a string', {'label_offset': '1'}, ['"label_offset"', 'integer']),
         ('class_names a string', {'class_names': 'abc'}, ['"class_names"', 'list of strings']),
         ('class_names of another count', {'class_names': ['a', 'b']}, ['class_names', '2']),
         ('preprocessing a list', {'preprocessing': []}, ['"preprocessing"', 'JSON object']),
         ('preprocessing.random_flip a string', {'preprocessing': {'random_flip': 'yes'}},
          ['preprocessing.random_flip', 'true or false']),
         ('preprocessing.train_crop unknown', {'preprocessing': {'train_crop': 'zoom'}},
          ['preprocessing.train_crop', 'pad_and_crop']),
         ('mean_rgb of 2 values', {'mean_rgb': [1, 2]}, ['"mean_rgb"', '3 numbers']),
         ('modality unknown', {'modality': 'audio'}, ['"modality"', 'audio'])]
  rows = [Row('main: dataset.json ' + name, 'main', ON_DATA, expect + ['trainer.prepare'],
              _data(**kwargs)) for name, kwargs, expect in bad]
  text = [('max_seq_length 0', {'max_seq_length': 0}, ['"max_seq_length"', 'is 0']),
          ('vocab_size a string', {'vocab_size': 'big'}, ['"vocab_size"', '"big"']),
          ('vocab_size missing', {'vocab_size': ...}, ['"vocab_size"', 'text data needs'])]
  rows += [Row('main bilstm: dataset.json ' + name, 'main', ON_TEXT, expect + ['trainer.prepare'],
               _data(info=TEXT_INFO, vocabulary=['<pad>', '<unk>'], **kwargs))
           for name, kwargs, expect in text]
  return rows


def _cluster_rows():
  tf_configs = [
      ('not JSON', '{cluster', ['TF_CONFIG', 'not valid JSON']),
      ('a list', '[]', ['TF_CONFIG', 'not an object']),
      ('null', 'null', ['TF_CONFIG', 'not an object']),
      ('a list cluster', '{"cluster": ["a:1"], "task": {"type": "worker", "index": 0}}',
       ['TF_CONFIG', '"cluster"', 'task type']),
      ('a task list not a list', '{"cluster": {"chief": ["a:1"], "worker": "b:1"}, '
       '"task": {"type": "worker", "index": 0}}', ['TF_CONFIG', '"worker"', 'host:port']),
      ('a string index', '{"cluster": {"chief": ["a:1"], "worker": ["b:1"]}, '
       '"task": {"type": "worker", "index": "0"}}', ['TF_CONFIG', '"index"', 'integer']),
      ('a task type not in the cluster', '{"cluster": {"chief": ["a:1"], "worker": ["b:1"]}, '
       '"task": {"type": "ps", "index": 0}}', ['TF_CONFIG', '"type"', '"ps"', 'chief, worker']),
      ('an index out of range', '{"cluster": {"chief": ["a:1"], "worker": ["b:1"]}, '
       '"task": {"type": "worker", "index": 3}}', ['TF_CONFIG', '"index"', '3', '[0, 1)']),
      ('a cluster without a task', '{"cluster": {"chief": ["a:1"], "worker": ["b:1"]}}',
       ['TF_CONFIG', '"task"', 'null'])]
  rows = [Row('main: TF_CONFIG ' + name, 'main', FAKE + STEPS, expect, env={'TF_CONFIG': value})
          for name, value, expect in tf_configs]
  specs = [('a list', '[]', ['CLUSTER_SPEC', 'not an object']),
           ('a string index', '{"cluster": {"workerpool0": ["a:1"]}, '
            '"task": {"type": "workerpool0", "index": "0"}}', ['CLUSTER_SPEC', '"index"'])]
  rows += [Row('main: CLUSTER_SPEC ' + name, 'main', FAKE + STEPS, expect,
               env={'CLUSTER_SPEC': value}) for name, value, expect in specs]
  return rows


def _flag_rows():
  bad = [(['--train_steps=-5'], ['--train_steps', '-5', '> 0']),
         (['--train_steps=0'], ['--train_steps', '> 0']),
         (['--train_epochs=-1'], ['--train_epochs', '-1']),
         (['--train_epochs=inf'], ['--train_epochs', 'inf']),
         (['--train_epochs=1', '--num_train_examples=-5'], ['--num_train_examples', '-5']),
         (STEPS + ['--num_eval_examples=0'], ['--num_eval_examples', '0']),
         (STEPS + ['--train_batch_size=0'], ['--train_batch_size', '0']),
         (STEPS + ['--eval_batch_size=-16'], ['--eval_batch_size', '-16']),
         (STEPS + ['--steps_per_eval=-1'], ['--steps_per_eval', '-1']),
         (STEPS + ['--save_checkpoints_steps=0'], ['--save_checkpoints_steps', '0']),
         (STEPS + ['--keep_checkpoint_max=-1'], ['--keep_checkpoint_max', '-1']),
         (STEPS + ['--early_stopping_evals=-1'], ['--early_stopping_evals', '>= 0']),
         (STEPS + ['--mode=eval', '--eval_timeout=-1'], ['--eval_timeout', '>= 0']),
         (STEPS + ['--log_every_n_secs=0'], ['--log_every_n_secs', '0']),
         (STEPS + ['--num_gpus=-1'], ['--num_gpus', '-1']),
         (STEPS + ['--base_learning_rate=-0.1'], ['--base_learning_rate', '>= 0']),
         (STEPS + ['--image_size=0'], ['--image_size', '0'])]
  # FAKE's values come first: absl keeps the last of a repeated flag.
  return [Row('main: ' + ' '.join(args), 'main', FAKE + args, expect) for args, expect in bad]


def _text_rows():
  words = ['<pad>', '<unk>'] + ['w%d' % i for i in range(98)]
  return [
      Row('main bilstm: vocab.txt cut short', 'main', ON_TEXT,
          ['vocab.txt', '10 lines', 'vocab_size 100', 'trainer.prepare'],
          _data(info=TEXT_INFO, vocabulary=words[:10])),
      Row('main bilstm: vocab.txt without its <pad>/<unk> header', 'main', ON_TEXT,
          ['vocab.txt', '<pad>', 'trainer.prepare'], _data(info=TEXT_INFO, vocabulary=words[2:])),
      Row('main bilstm --mode=predict: vocab.txt cut short', 'main', ON_TEXT + PREDICT,
          ['vocab.txt', '10 lines', 'vocab_size 100'],
          _data(info=TEXT_INFO, vocabulary=words[:10]))]


def _model_dir_rows(checkpoint_10, resnet_record):
  common = ['logits/kernel', '[256, 10]', '[256, 5]', '--init_checkpoint', '--model_dir']
  five = [a.replace('--num_classes=10', '--num_classes=5') for a in FAKE]
  rows = [Row('main --mode=%s: model_dir checkpoint of 10 classes, --num_classes=5' % mode,
              'main', five + STEPS + ['--mode=' + mode] + extra, common, _copy(checkpoint_10))
          for mode, extra in (('train', []), ('train_and_eval', []), ('eval', []),
                              ('predict', PREDICT[1:]))]
  resnet = [a.replace('--model=cnn', '--model=resnet') for a in FAKE]
  rows.append(Row('main: model_dir trained with --resnet_depth=50, resumed with 18', 'main',
                  resnet + STEPS + ['--resnet_depth=18', '--mode=train'],
                  ['resnet_depth=50', '18', 'model_config.json', '--init_checkpoint'],
                  _copy(resnet_record)))
  truncated = '{"best": {"global_step": 2, "top_1_accu'
  rows += [Row('main: best/best.json %s' % name, 'main', FAKE + STEPS,
               ['best.json', 'delete it', 'restore'], _files({'model/best/best.json': text}))
           for name, text in (('truncated', truncated), ('a list', '[]'),
                              ('without evaluations', '{"best": null}'))]
  return rows


def _output_rows():
  model = [a for a in FAKE if not a.startswith('--model_dir')] + STEPS
  rows = [
      Row('main: --model_dir is a file', 'main', model + ['--model_dir={root}/f'],
          ['--model_dir', 'is a file'], _files({'f': 'x'})),
      Row('main: --model_dir under a file', 'main', model + ['--model_dir={root}/f/run'],
          ['--model_dir', 'is a file'], _files({'f': 'x'})),
      Row('main: --job_dir is a file', 'main', model + ['--job_dir={root}/f'],
          ['--job_dir', 'is a file'], _files({'f': 'x'})),
      Row('main: --export_dir under a file', 'main', FAKE + STEPS + ['--export_dir={root}/f/e'],
          ['--export_dir', 'is a file'], _files({'f': 'x'}))]
  for name in ('AIP_MODEL_DIR', 'AIP_CHECKPOINT_DIR', 'AIP_TENSORBOARD_LOG_DIR'):
    rows.append(Row('main: $%s under a file' % name, 'main', FAKE + STEPS,
                    ['$' + name, 'is a file'], _files({'f': 'x'}), env={name: '{root}/f/sub/'}))
  rows.append(Row('main: $AIP_CHECKPOINT_DIR is a file', 'main', model,
                  ['$AIP_CHECKPOINT_DIR', 'is a file'], _files({'f': 'x'}),
                  env={'AIP_CHECKPOINT_DIR': '{root}/f'}))
  return rows


def _prepare_rows():
  text = ['text', '--input={root}/in.csv', '--output_dir={root}/out']
  return [
      Row('prepare text: a CSV with a NUL byte', 'prepare', text,
          ['in.csv', 'line 3', 'NUL'], _files({'in.csv': b'text,label\ngood,1\nba\0d,0\n'})),
      Row('prepare text: a CSV that is not UTF-8', 'prepare', text,
          ['in.csv', 'not UTF-8', 'line 3'],
          _files({'in.csv': b'text,label\ngood,1\ncaf\xe9,0\n'})),
      Row('prepare text: --output_dir is a file', 'prepare', text[:2] + ['--output_dir={root}/f'],
          ['--output_dir', 'is a file'], _files({'f': 'x', 'in.csv': 'text,label\na,1\n'})),
      Row('prepare text: --output_dir under a file', 'prepare',
          text[:2] + ['--output_dir={root}/f/out'], ['--output_dir', 'is a file'],
          _files({'f': 'x', 'in.csv': 'text,label\na,1\n'})),
      Row('prepare arrays: random training preprocessing', 'prepare',
          ['arrays', '--source_dir={root}/data', '--output_dir={root}/out'],
          ['training preprocessing', 'is random', 'crop_padding 2', '--crop_padding=0'],
          _data()),
      Row('prepare arrays: --output_dir is --source_dir, with --overwrite', 'prepare',
          ['arrays', '--source_dir={root}/data', '--output_dir={root}/data/', '--overwrite'],
          ['--output_dir=', 'is --source_dir', 'delete the TFRecords'], _data()),
      Row('prepare arrays: --source_dir without dataset.json', 'prepare',
          ['arrays', '--source_dir={root}/none', '--output_dir={root}/out'],
          ['none has no dataset.json', 'trainer.prepare'])]


def _arrays_rows():
  return [Row('main: --data_dir holds arrays', 'main', ON_DATA,
              ['holds NumPy arrays', 'trainer.train_keras', 'TFRecord directory', 'src'],
              _data(format='arrays', source='src'))]


@pytest.fixture(scope='module')
def model_dirs(tmp_path_factory):
  """(a model_dir holding a checkpoint whose cnn classifier has 10 classes, a model_dir holding a
  checkpoint and the model_config.json of a ResNet-50), made in this process in a second."""
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  cnn = str(tmp_path_factory.mktemp('cnn10'))
  resnet = str(tmp_path_factory.mktemp('resnet50'))
  for model_dir, variables in ((cnn, {'logits/kernel': [256, 10], 'logits/bias': [10]}),
                               (resnet, {'dense/kernel': [2048, 10], 'dense/bias': [10]})):
    with tf.Graph().as_default():
      for name, shape in variables.items():
        tf.get_variable(name, shape)
      tf.train.get_or_create_global_step()
      saver = tf.train.Saver(save_relative_paths=True)  # a copy of the dir stays whole
      with tf.Session() as session:
        session.run(tf.global_variables_initializer())
        saver.save(session, model_dir + '/model.ckpt', global_step=1)
  config = config_from_args('--fake_data', '--model=resnet', '--resnet_depth=50',
                            '--num_classes=10', '--image_size=28', '--num_train_examples=64',
                            '--num_eval_examples=16', '--train_steps=1', '--model_dir=' + resnet)
  network_record.write(resnet, config)
  return cnn, resnet


def test_every_input_is_checked_before_any_work(tmp_path, model_dirs):
  main_rows = (_dataset_rows() + _cluster_rows() + _flag_rows() + _text_rows() +
               _model_dir_rows(*model_dirs) + _output_rows() + _arrays_rows())
  failures = []
  for name, rows in (('main', main_rows), ('prepare', _prepare_rows())):
    os.makedirs(str(tmp_path / name))
    failures += run_rows(rows, str(tmp_path / name))
  assert not failures, '\n'.join(failures)


def test_photos_too_large_to_train_at_their_own_size_need_an_image_size(tmp_path):
  """dataset.json of phone photos (median 4032x3024, no training size): an unset --image_size
  is refused with the reason before any work; --image_size=128 trains at 128."""
  from trainer.data import dataset_json  # pylint: disable=g-import-not-at-top
  from trainer.errors import PipelineError  # pylint: disable=g-import-not-at-top

  from helpers import config_from_args  # pylint: disable=g-import-not-at-top
  info = {'name': 'photos', 'num_classes': 3, 'num_train_examples': 30, 'num_eval_examples': 9,
          'label_offset': 0, 'image_height': 3024, 'image_width': 4032}
  dataset_json.write(str(tmp_path), info)
  args = ['--data_dir=' + str(tmp_path), '--model_dir=' + str(tmp_path / 'm'), '--train_steps=1']
  with pytest.raises(PipelineError, match='median stored image is 4032x3024.*Pass --image_size'):
    config_from_args(*args)
  assert config_from_args('--image_size=128', *args).model.image_size == 128
