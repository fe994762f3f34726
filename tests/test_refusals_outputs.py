"""Nothing a user wrote is replaced or mixed without being asked: the bad-input matrix's rows for
every writer's output that already holds something (tests/refusals.py runs them; each must exit
2 with one `error:` line naming the flag, the path and --overwrite, and leave every file as it
was), and what --overwrite does instead: the old output is deleted first, no stale shard remains.
A run whose export fails keeps its results.json. The Keras commands' rows:
tests/test_keras_refusals.py.
"""

import gzip
import os
import struct

import numpy as np

from trainer.prepare import fashion_mnist

from helpers import ok
from helpers import refused
from helpers import results_of
from helpers import run_main
from helpers import run_prepare
from refusals import Row
from refusals import run_rows

# A tiny trainer run on synthetic data: seconds on either runtime.
FAKE = ['--fake_data', '--model=cnn', '--image_size=28', '--num_classes=10',
        '--num_train_examples=64', '--num_eval_examples=16', '--train_steps=2',
        '--train_batch_size=8', '--eval_batch_size=16', '--steps_per_eval=2', '--nokeep_best',
        '--skip_host_call', '--log_every_n_secs=60']
CONVERSION = ('dataset.json', 'train-00000-of-00002', 'train-00001-of-00002',
              'validation-00000-of-00001', 'vocab.txt')


def _write(path, text='old'):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, 'w') as f:
    f.write(text)


def _conversion(names=CONVERSION):
  """setup(root): root/out holds an earlier conversion (`names`) and a file of the user's."""
  def setup(root):
    for name in names + ('README.md',):
      _write(os.path.join(root, 'out', name), '{}' if name == 'dataset.json' else name)
  return setup


def _files(*relative):
  def setup(root):
    for path in relative:
      _write(os.path.join(root, path))
  return setup


def _texts(root):
  """A CSV of 40 labelled texts in root/texts.csv."""
  lines = ['text,label'] + ['%s movie number %d,%s' % ('good fun' if i % 2 else 'dull bad', i,
                                                        'pos' if i % 2 else 'neg')
                            for i in range(40)]
  _write(os.path.join(root, 'texts.csv'), '\n'.join(lines) + '\n')


def _both(*setups):
  return lambda root: [setup(root) for setup in setups]


PREPARE_ROWS = [
    Row('prepare text: --output_dir holds a converted dataset', 'prepare',
        ['text', '--input={root}/texts.csv', '--output_dir={root}/out'],
        ['--output_dir=', '/out already holds a converted dataset', '--overwrite'],
        _both(_conversion(), _texts)),
    Row('prepare text: --output_dir holds only a vocab.txt of a crashed conversion', 'prepare',
        ['text', '--input={root}/texts.csv', '--output_dir={root}/out'],
        ['--output_dir', 'incomplete conversion', 'vocab.txt', '--overwrite'],
        _both(_conversion(('vocab.txt',)), _texts)),
    Row('prepare fashion_mnist: --output_dir holds a converted dataset', 'prepare',
        ['fashion_mnist', '--source_dir={root}/nowhere', '--output_dir={root}/out'],
        ['--output_dir', 'already holds a converted dataset', '--overwrite'], _conversion()),
    Row('prepare rotten_tomatoes: --output_dir holds the shards of an incomplete conversion',
        'prepare', ['rotten_tomatoes', '--output_dir={root}/out'],
        ['--output_dir', 'incomplete conversion', 'train-00000-of-00002', '--overwrite'],
        _conversion(('train-00000-of-00002', 'train-00001-of-00002'))),
    Row('prepare image_folder: --output_dir holds a converted dataset', 'prepare',
        ['image_folder', '--source_dir={root}/nowhere', '--output_dir={root}/out'],
        ['--output_dir', 'already holds a converted dataset', '--overwrite'], _conversion()),
]

MAIN_ROWS = [
    Row('main --mode=predict: --predict_output exists', 'main',
        FAKE + ['--mode=predict', '--model_dir={root}/model', '--predict_input={root}/*.png',
                '--predict_output={root}/p.jsonl'],
        ['--predict_output=', '/p.jsonl already exists', '--overwrite'],
        _files('p.jsonl')),
    Row('main --mode=train: --export_dir holds an earlier export', 'main',
        FAKE + ['--mode=train', '--model_dir={root}/model', '--export_dir={root}/export'],
        ['--export_dir=', '/export already holds', '1699999999/', '--overwrite'],
        _files('export/1699999999/saved_model.pb')),
    Row('main --mode=train_and_eval: --export_dir holds a file of the user', 'main',
        FAKE + ['--model_dir={root}/model', '--export_dir={root}/export'],
        ['--export_dir', 'notes.txt', '--overwrite'], _files('export/notes.txt')),
    Row('main --mode=eval: --export_dir holds an earlier export', 'main',
        FAKE + ['--mode=eval', '--model_dir={root}/model', '--export_dir={root}/export'],
        ['--export_dir', 'already holds', '--overwrite'], _files('export/1/saved_model.pb')),
    Row('main in a Vertex AI job: $AIP_MODEL_DIR holds an earlier export', 'main',
        FAKE + ['--mode=train', '--model_dir={root}/model'],
        ['AIP_MODEL_DIR=', '/model_out already holds', '--overwrite'],
        _files('model_out/1699999999/saved_model.pb'), {'AIP_MODEL_DIR': '{root}/model_out/'}),
    Row('main: --export_dir is a file', 'main',
        FAKE + ['--mode=train', '--model_dir={root}/model', '--export_dir={root}/export'],
        ['--export_dir', 'is a file'], _files('export')),
    # Writable by its permission bits (root's view), but nothing can be created there: found by
    # trying, before training.
    Row('main: --export_dir under /proc', 'main',
        FAKE + ['--mode=train', '--model_dir={root}/model', '--export_dir=/proc/no/such'],
        ['--export_dir=/proc/no/such is not usable', '/proc does not let this user create']),
]

BENCHMARK_ROWS = [
    Row('benchmark conv: --output exists', 'benchmark',
        ['conv', '--output={root}/record.json', '--windows=1', '--steps_per_window=1'],
        ['--output=', '/record.json already exists', '--overwrite'],
        _files('record.json')),
]


def test_every_writer_refuses_an_output_that_holds_something(tmp_path):
  failures = []
  for name, rows in (('prepare', PREPARE_ROWS), ('main', MAIN_ROWS),
                     ('benchmark', BENCHMARK_ROWS)):
    os.makedirs(str(tmp_path / name))
    failures += run_rows(rows, str(tmp_path / name))
  assert not failures, '\n'.join(failures)


def test_prepare_text_overwrite_replaces_the_conversion_and_leaves_no_stale_shard(tmp_path):
  root, output = str(tmp_path), str(tmp_path / 'out')
  _texts(root)
  common = ['--input=' + os.path.join(root, 'texts.csv'), '--output_dir=' + output]
  ok(run_prepare('text', '--train_shards=4', '--validation_shards=2', *common))
  _write(os.path.join(output, 'README.md'), 'mine')
  refused(run_prepare('text', '--train_shards=1', '--validation_shards=1', *common),
          'already holds a converted dataset', '--overwrite')
  ok(run_prepare('text', '--train_shards=1', '--validation_shards=1', '--overwrite', *common))
  assert sorted(os.listdir(output)) == ['README.md', 'dataset.json', 'train-00000-of-00001',
                                        'validation-00000-of-00001', 'vocab.txt']
  with open(os.path.join(output, 'README.md')) as f:
    assert f.read() == 'mine'  # the user's file is not the conversion's: left alone


def _write_idx(path, array):
  """An unsigned-byte IDX file (gzipped), LeCun's MNIST format."""
  header = bytes([0, 0, 0x08, array.ndim]) + b''.join(struct.pack('>I', d) for d in array.shape)
  with gzip.open(path, 'wb') as f:
    f.write(header + array.astype(np.uint8).tobytes())


def test_fashion_mnist_overwrite_leaves_no_stale_shard(tmp_path):
  source, output = str(tmp_path / 'idx'), str(tmp_path / 'out')
  os.makedirs(source)
  rng = np.random.RandomState(0)
  for split, count in (('train', 12), ('t10k', 6)):
    _write_idx(os.path.join(source, '%s-images-idx3-ubyte.gz' % split),
               rng.randint(0, 256, (count, 28, 28)))
    _write_idx(os.path.join(source, '%s-labels-idx1-ubyte.gz' % split), np.arange(count) % 10)
  fashion_mnist.prepare(output, source, train_shards=4, validation_shards=2)
  assert len(os.listdir(output)) == 7
  info = fashion_mnist.prepare(output, source, train_shards=2, validation_shards=1,
                               overwrite=True)
  assert sorted(os.listdir(output)) == ['dataset.json', 'train-00000-of-00002',
                                        'train-00001-of-00002', 'validation-00000-of-00001']
  assert info['num_train_examples'] == 12


def test_export_overwrite_replaces_the_earlier_export(tmp_path):
  model_dir, export_dir = str(tmp_path / 'model'), str(tmp_path / 'export')
  _write(os.path.join(export_dir, '1699999999', 'saved_model.pb'))
  args = FAKE + ['--mode=train', '--model_dir=' + model_dir, '--export_dir=' + export_dir]
  refused(run_main(*args), 'already holds', '--overwrite')
  assert not os.path.exists(model_dir)  # refused before any work
  ok(run_main('--overwrite', *args))
  exported = results_of(model_dir)['export_path']
  assert os.listdir(export_dir) == [os.path.basename(exported)]
  assert os.path.exists(os.path.join(exported, 'saved_model.pb'))


def test_results_survive_a_failing_export(tmp_path):
  """The export directory becomes impossible to create during the run, for root too: it lies
  under model_dir/checkpoint, which training writes as a file after the start check."""
  model_dir = str(tmp_path / 'model')
  export_dir = os.path.join(model_dir, 'checkpoint', 'export')
  proc = run_main(*(FAKE + ['--mode=train', '--model_dir=' + model_dir,
                            '--export_dir=' + export_dir]))
  refused(proc, 'the SavedModel export to --export_dir=' + export_dir + ' failed',
          'results.json')
  assert len([l for l in proc.stderr.splitlines() if l.startswith('error:')]) == 1
  results = results_of(model_dir)
  assert results['global_step'] == 2 and 'export_path' not in results
  assert not os.path.exists(os.path.join(model_dir, 'results.json.partial'))
