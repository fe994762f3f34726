"""The Keras commands never replace what a user has without --overwrite, and refuse arrays they
cannot train on as given: the bad-input matrix's rows (tests/refusals.py) for
`trainer.export_keras` --output / --serving_dir that already exist, for `trainer.train_keras` on
arrays of `trainer.prepare arrays` with a crop offset, another image size, a missing file or
labels out of range, and for its settings that cannot run (flags/to_keras_config.py). Each is
refused before any work (no checkpoint or model is read, nothing written), exits 2 with one
`error:` line, and leaves every file as it was. The trainer's and converters' rows:
tests/test_refusals_outputs.py."""

import json
import os

import numpy as np
import pytest

keras = pytest.importorskip('keras', minversion='3', reason='the Keras 3 runtime (.venv-keras)')

# pylint: disable=g-import-not-at-top,wrong-import-position
from refusals import Row
from refusals import run_rows


def _files(*relative):
  def setup(root):
    for path in relative:
      full = os.path.join(root, path)
      os.makedirs(os.path.dirname(full), exist_ok=True)
      with open(full, 'w') as f:
        f.write('old')
  return setup


EXPORT_ROWS = [
    Row('export_keras: --output exists', 'export_keras',
        ['--model_dir={root}/run', '--output={root}/m.keras', '--serving_dir='],
        ['--output=', '/m.keras already exists', '--overwrite'], _files('m.keras')),
    Row('export_keras: --serving_dir holds an earlier export', 'export_keras',
        ['--model_dir={root}/run', '--output={root}/m.keras', '--serving_dir={root}/serving'],
        ['--serving_dir=', '/serving already holds', 'saved_model.pb', '--overwrite'],
        _files('serving/saved_model.pb')),
    Row('export_keras: the default serving directory next to --output holds something',
        'export_keras', ['--model_dir={root}/run', '--output={root}/m.keras'],
        ['--serving_dir=', '/m_serving already holds', '--overwrite'],
        _files('m_serving/variables/variables.index')),
]

ARRAYS_INFO = {'name': 'tiny', 'format': 'arrays', 'source': 'src', 'num_classes': 10,
               'label_offset': 0, 'num_train_examples': 8, 'num_eval_examples': 4,
               'image_size': 28, 'mean_rgb': [72.9] * 3, 'stddev_rgb': [90.0] * 3}


def _arrays(train_labels=None, files=('train.npz', 'validation.npz'), **info):
  """setup(root): root/data as `trainer.prepare arrays` writes it (8 + 4 grey 28 px images)."""
  def setup(root):
    data = os.path.join(root, 'data')
    os.makedirs(data)
    with open(os.path.join(data, 'dataset.json'), 'w') as f:
      json.dump(dict(ARRAYS_INFO, **info), f)
    rng = np.random.default_rng(0)
    for name, count in (('train.npz', 8), ('validation.npz', 4)):
      labels = np.arange(count, dtype=np.int32) % 10
      if name == 'train.npz' and train_labels is not None:
        labels = np.asarray(train_labels, np.int32)
      if name in files:
        np.savez_compressed(os.path.join(data, name), labels=labels,
                            inputs=rng.integers(0, 256, (count, 28, 28, 1), dtype=np.uint8))
  return setup


TRAIN = ['--data_dir={root}/data', '--model_dir={root}/run', '--model=cnn', '--train_steps=1',
         '--train_batch_size=4', '--eval_batch_size=4']
TRAIN_ROWS = [
    Row('train_keras: arrays with --crop_padding', 'train_keras', TRAIN + ['--crop_padding=2'],
        ['--crop_padding=2', 'holds arrays', 'TFRecords (src)'], _arrays()),
    Row('train_keras: arrays of another image size', 'train_keras', TRAIN + ['--image_size=32'],
        ['takes 32 px', 'are 28 px', '--image_size=32'], _arrays()),
    Row('train_keras: arrays without train.npz', 'train_keras', TRAIN,
        ['train.npz is missing', 'trainer.prepare arrays'], _arrays(files=('validation.npz',))),
    Row('train_keras: arrays with a label out of range', 'train_keras', TRAIN,
        ['train.npz does not match', 'labels run from 0 to 12', 'outside [0, 10)'],
        _arrays(train_labels=[0, 1, 2, 3, 4, 5, 6, 12])),
    Row('train_keras: arrays of another size than dataset.json says', 'train_keras', TRAIN,
        ['train.npz does not match', 'images are 28x28', 'image_size 32'],
        _arrays(image_size=32)),
    # The checks of flags/to_keras_config.py, before any work.
    Row('train_keras: --init_model that is not a .keras file', 'train_keras',
        TRAIN + ['--init_model={root}/m.h5'], ['--init_model=', 'm.h5: give a .keras file'],
        _arrays()),
    Row('train_keras: --lr_decay_epochs that are not numbers', 'train_keras',
        TRAIN + ['--lr_decay_epochs=30,sixty'],
        ['--lr_decay_epochs=30,sixty', 'give numbers of epochs'], _arrays()),
    Row('train_keras: --lr_decay_epochs out of order', 'train_keras',
        TRAIN + ['--lr_decay_epochs=60,30'], ['--lr_decay_epochs=60,30', 'increasing order'],
        _arrays()),
    Row('train_keras: --label_smoothing of 1 (flags/value_rules.py)', 'train_keras',
        TRAIN + ['--label_smoothing=1'], ['--label_smoothing must be', 'got 1'], _arrays()),
    Row('train_keras: --save_checkpoints_steps off the logged periods', 'train_keras',
        TRAIN + ['--log_every_steps=3', '--save_checkpoints_steps=4'],
        ['--save_checkpoints_steps=4 is not a multiple of --log_every_steps=3'], _arrays()),
]


def test_keras_commands_refuse_bad_inputs_and_outputs_that_exist(tmp_path, monkeypatch):
  monkeypatch.setenv('KERAS_BACKEND', 'tensorflow')  # the backend that writes --serving_dir
  failures = []
  for name, rows in (('export_keras', EXPORT_ROWS), ('train_keras', TRAIN_ROWS)):
    os.makedirs(str(tmp_path / name))
    failures += run_rows(rows, str(tmp_path / name))
  assert not failures, '\n'.join(failures)


def test_the_tf_data_input_refuses_arrays(tmp_path):
  """Every reader of keras_models.datasets: arrays are not
  TFRecords, said before tf.data looks for shards."""
  from trainer.errors import PipelineError  # pylint: disable=g-import-not-at-top
  from trainer.keras_models import datasets  # pylint: disable=g-import-not-at-top
  _arrays()(str(tmp_path))
  with pytest.raises(PipelineError, match=r'holds NumPy arrays .*TFRecord directory .*\(src\)'):
    datasets.data_config(str(tmp_path / 'data'), (28, 28, 3))
