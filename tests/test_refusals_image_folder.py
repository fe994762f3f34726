"""`prepare image_folder` says what it saw: hidden and system folders are skipped, an empty class
folder, images in formats it does not read and a name that is not UTF-8 are refused (rows of the
bad-input matrix, tests/refusals.py), and the class list it used is printed."""

import os

import pytest
import tensorflow.compat.v1 as tf

from trainer.data import dataset_json

from helpers import ok
from helpers import read_records
from helpers import run_prepare
from refusals import Row
from refusals import run_rows


def _pngs(tiny_dir, count=8):
  """Real Fashion-MNIST images as PNG bytes with their labels."""
  found = []
  for record in read_records(os.path.join(tiny_dir, 'train-*'), count):
    feature = tf.train.Example.FromString(record).features.feature
    found.append(feature['image/encoded'].bytes_list.value[0])
  return found


def _tree(tiny_dir, extra=None):
  """setup(root): root/tree/{cat,dog}/N.png of real images, then extra(tree)."""
  images = _pngs(tiny_dir)

  def setup(root):
    tree = os.path.join(root, 'tree')
    for i, data in enumerate(images):
      folder = os.path.join(tree, 'cat' if i % 2 else 'dog')
      os.makedirs(folder, exist_ok=True)
      with open(os.path.join(folder, '%d.png' % i), 'wb') as f:
        f.write(data)
    if extra:
      extra(tree)
  return setup


def _add(relative, data=b'x'):
  def extra(tree):
    path = os.path.join(os.fsencode(tree), relative if isinstance(relative, bytes) else
                        os.fsencode(relative))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if data is not None:
      with open(path, 'wb') as f:
        f.write(data)
  return extra


# One Beam worker: tests/test_prepare.py and test_prepare_imagenet.py run the multi-process one.
ARGS = ['image_folder', '--source_dir={root}/tree', '--output_dir={root}/out',
        '--validation_fraction=0.5', '--train_shards=1', '--validation_shards=1',
        '--direct_num_workers=1']


def test_image_folder_refuses_what_would_silently_change_the_labels(tiny_dir, tmp_path):
  rows = [
      Row('prepare image_folder: an empty class folder', 'prepare', ARGS,
          ['emu', 'no .jpg/.jpeg/.png image', 'shift every label'],
          _tree(tiny_dir, _add('emu/notes.txt'))),
      Row('prepare image_folder: .webp images among the classes', 'prepare', ARGS,
          ['2 .webp', '--skip_unreadable'],
          _tree(tiny_dir, lambda t: (_add('cat/a.webp')(t), _add('dog/b.WEBP')(t)))),
      Row('prepare image_folder: a class folder name in Latin-1', 'prepare', ARGS,
          ['not UTF-8', 'caf'], _tree(tiny_dir, _add(b'caf\xe9/0.png', _pngs(tiny_dir, 1)[0]))),
  ]
  failures = run_rows(rows, str(tmp_path))
  assert not failures, '\n'.join(failures)


@pytest.mark.one_runtime('the listing is the same on both runtimes; one Beam conversion')
def test_image_folder_skips_hidden_and_system_folders_and_prints_its_classes(tiny_dir, tmp_path):
  root = str(tmp_path)
  _tree(tiny_dir, lambda t: (_add('.ipynb_checkpoints/cat-checkpoint.png')(t),
                             _add('__MACOSX/cat/._0.png')(t), _add('cat/.DS_Store')(t),
                             _add('README.txt', b'about')(t)))(root)
  proc = run_prepare(*[a.replace('{root}', root) for a in ARGS])
  ok(proc)
  info = dataset_json.read(os.path.join(root, 'out'))
  assert info['class_names'] == ['cat', 'dog']
  assert info['num_train_examples'] + info['num_eval_examples'] == 8
  assert '2 classes (label: name, train/validation images): 0: cat' in proc.stderr
  assert 'Ignored files that are not images: 1 .txt' in proc.stderr
