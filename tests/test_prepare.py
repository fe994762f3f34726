"""Dataset preparation: real Fashion-MNIST and a folder-per-class tree, in the ImageNet schema."""

import gzip
import os

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from trainer.data import dataset_json
from trainer.errors import PipelineError
from trainer.prepare import fashion_mnist

from helpers import ok
from helpers import read_records
from helpers import refused
from helpers import run_prepare


def test_the_training_image_size_is_dataset_jsons_else_the_larger_stored_side():
  imagenet = {'image_size': 224, 'image_height': 375, 'image_width': 500}
  assert dataset_json.image_size(imagenet) == 224
  assert dataset_json.image_size({'image_height': 375, 'image_width': 500}) == 500
  assert dataset_json.image_size({'modality': 'text', 'max_seq_length': 64}) is None


def _parse(record):
  return tf.train.Example.FromString(record).features.feature


def test_fashion_mnist_has_every_example_in_the_imagenet_schema(fashion_mnist_dir):
  info = dataset_json.read(fashion_mnist_dir)
  assert dataset_json.image_size(info) == 28  # the stored size, with no training size set
  assert (info['num_train_examples'], info['num_eval_examples'], info['num_classes']) == (
      60000, 10000, 10)
  assert info['label_offset'] == 0 and info['class_names'][9] == 'Ankle boot'
  assert len(tf.io.gfile.glob(os.path.join(fashion_mnist_dir, 'train-*-of-00016'))) == 16
  validation = read_records(os.path.join(fashion_mnist_dir, 'validation-*'))
  assert len(validation) == 10000
  labels = [_parse(r)['image/class/label'].int64_list.value[0] for r in validation]
  # The real test set is balanced: 1,000 images of each class.
  assert np.bincount(labels).tolist() == [1000] * 10
  first = _parse(validation[0])
  for key in ('image/encoded', 'image/format', 'image/height', 'image/width', 'image/channels',
              'image/colorspace', 'image/class/synset', 'image/filename'):
    assert key in first
  assert first['image/format'].bytes_list.value[0] == b'PNG'


def test_png_round_trip_matches_the_idx_pixels(fashion_mnist_dir):
  source = fashion_mnist.DEFAULT_SOURCE_DIR
  images = fashion_mnist.read_idx(os.path.join(source, 't10k-images-idx3-ubyte.gz'))
  record = read_records(os.path.join(fashion_mnist_dir, 'validation-*'), limit=1)[0]
  with tf.Graph().as_default(), tf.Session() as sess:
    decoded = sess.run(tf.image.decode_png(_parse(record)['image/encoded'].bytes_list.value[0]))
  np.testing.assert_array_equal(decoded[..., 0], images[0])


def test_missing_source_says_how_to_get_it(tmp_path):
  with pytest.raises(PipelineError, match='apt-get install dataset-fashion-mnist'):
    fashion_mnist.prepare(str(tmp_path / 'out'), source_dir=str(tmp_path / 'nothing'))


def test_truncated_idx_file_is_refused(tmp_path):
  path = tmp_path / 'bad-idx3-ubyte'
  path.write_bytes(bytes([0, 0, 8, 3]) + (10).to_bytes(4, 'big') * 3 + b'\x00' * 7)
  with pytest.raises(PipelineError, match='truncated'):
    fashion_mnist.read_idx(str(path))


def _write_idx(path, array):
  """A gzipped unsigned-byte IDX file (LeCun's format) of a uint8 array."""
  header = bytes([0, 0, 8, array.ndim]) + b''.join(d.to_bytes(4, 'big') for d in array.shape)
  with gzip.open(str(path), 'wb') as f:
    f.write(header + array.tobytes())


def test_a_held_out_conversion_splits_the_training_images_and_holds_no_test_image(tmp_path):
  """`--validation_fraction` on fashion_mnist: a tenth of the training images (the same ones in
  every conversion) becomes the validation split, the rest train, and no test image is written,
  so a recipe chosen on it never saw the test set."""
  source = fashion_mnist.DEFAULT_SOURCE_DIR
  real = {name: fashion_mnist.read_idx(os.path.join(source, name))
          for pair in fashion_mnist.FILES.values() for name in pair}
  small = tmp_path / 'source'
  small.mkdir()
  for name, array in real.items():
    _write_idx(small / name, array[:200] if name.startswith('train') else array[:50])
  out = [str(tmp_path / d) for d in ('a', 'b')]
  fashion_mnist.prepare(out[0], str(small), train_shards=2, validation_shards=1,
                        holdout_fraction=0.1)
  ok(run_prepare('fashion_mnist', '--source_dir=%s' % small, '--output_dir=' + out[1],
                 '--validation_fraction=0.1', '--train_shards=2', '--validation_shards=1'))
  info = dataset_json.read(out[0])
  assert (info['num_train_examples'], info['num_eval_examples']) == (180, 20)
  assert info['holdout_fraction'] == 0.1
  names = {}
  for split in ('train', 'validation'):
    records = [_parse(r) for r in read_records(os.path.join(out[0], split + '-*'))]
    names[split] = [r['image/filename'].bytes_list.value[0].decode() for r in records]
    for r, name in zip(records, names[split]):
      assert name.startswith('train/'), name  # no test image anywhere
      index = int(name[len('train/'):-len('.png')])
      assert r['image/class/label'].int64_list.value[0] == real['train-labels-idx1-ubyte.gz'][index]
  assert sorted(names['train'] + names['validation']) == ['train/%05d.png' % i for i in range(200)]
  again = [_parse(r)['image/filename'].bytes_list.value[0].decode()
           for r in read_records(os.path.join(out[1], 'validation-*'))]
  assert sorted(again) == sorted(names['validation'])
  with pytest.raises(PipelineError, match='above 0 and below 1'):
    fashion_mnist.prepare(str(tmp_path / 'c'), str(small), holdout_fraction=1.0)
  with pytest.raises(PipelineError, match='holds out 0 of the 200 training images'):
    fashion_mnist.prepare(str(tmp_path / 'd'), str(small), holdout_fraction=0.001)


def _write_tree(root, images, labels, corrupt=False):
  """A folder-per-class tree of real Fashion-MNIST images, PNG and JPEG mixed."""
  with tf.Graph().as_default(), tf.Session() as sess:
    image_in = tf.placeholder(tf.uint8, [28, 28, 1])
    png, jpeg = tf.image.encode_png(image_in), tf.image.encode_jpeg(image_in)
    for i, (image, label) in enumerate(zip(images, labels)):
      folder = root / fashion_mnist.CLASSES[label].replace('/', '_')
      folder.mkdir(parents=True, exist_ok=True)
      encoded = sess.run(png if i % 2 else jpeg, {image_in: image[..., None]})
      (folder / ('%03d.%s' % (i, 'png' if i % 2 else 'jpg'))).write_bytes(encoded)
  if corrupt:
    (root / 'Bag').mkdir(exist_ok=True)
    (root / 'Bag' / 'broken.jpg').write_bytes(b'not a jpeg at all')


def test_image_folder_converts_a_class_tree(tmp_path):
  source = fashion_mnist.DEFAULT_SOURCE_DIR
  images = fashion_mnist.read_idx(os.path.join(source, 't10k-images-idx3-ubyte.gz'))[:200]
  labels = fashion_mnist.read_idx(os.path.join(source, 't10k-labels-idx1-ubyte.gz'))[:200]
  _write_tree(tmp_path / 'tree', images, labels)
  ok(run_prepare('image_folder', '--source_dir=%s' % (tmp_path / 'tree'),
                 '--output_dir=%s' % (tmp_path / 'out'), '--validation_fraction=0.2'))
  info = dataset_json.read(str(tmp_path / 'out'))
  assert info['num_classes'] == 10
  assert info['num_train_examples'] + info['num_eval_examples'] == 200
  assert 20 <= info['num_eval_examples'] <= 60
  records = read_records(str(tmp_path / 'out' / 'train-*'))
  assert len(records) == info['num_train_examples']
  names = sorted(fashion_mnist.CLASSES[l].replace('/', '_') for l in set(labels))
  for record in records[:20]:
    features = _parse(record)
    label = features['image/class/label'].int64_list.value[0]
    assert features['image/class/synset'].bytes_list.value[0].decode() == names[label]
  assert dataset_json.read(str(tmp_path / 'out'))['class_names'] == names


def test_image_folder_names_an_undecodable_file(tmp_path):
  source = fashion_mnist.DEFAULT_SOURCE_DIR
  images = fashion_mnist.read_idx(os.path.join(source, 't10k-images-idx3-ubyte.gz'))[:30]
  labels = fashion_mnist.read_idx(os.path.join(source, 't10k-labels-idx1-ubyte.gz'))[:30]
  _write_tree(tmp_path / 'tree', images, labels, corrupt=True)
  # The multi-process DirectRunner: a worker's refusal reaches the launcher (beam_convert.py).
  refused(run_prepare('image_folder', '--source_dir=%s' % (tmp_path / 'tree'),
                      '--output_dir=%s' % (tmp_path / 'out')),
          'broken.jpg is not a readable')


def test_arrays_hold_the_pipelines_preprocessed_examples(tiny_dir, tmp_path):
  """`trainer.prepare arrays` at 32 px: the validation arrays are the evaluation input_fn's
  images and labels, in its order; the training arrays hold every record's label once; grey
  images are stored in one channel and read back as three."""
  from trainer.data import arrays  # pylint: disable=g-import-not-at-top
  from trainer.data import data_config  # pylint: disable=g-import-not-at-top
  from trainer.data import input_fn  # pylint: disable=g-import-not-at-top
  from trainer.prepare import arrays as prepare_arrays  # pylint: disable=g-import-not-at-top
  out = str(tmp_path / 'arrays')
  prepare_arrays.prepare(tiny_dir, out, image_size=32, crop_padding=0)
  info = dataset_json.read(out)
  assert info['format'] == 'arrays' and info['image_size'] == 32
  assert info['preprocessing']['crop_padding'] == 0
  with np.load(os.path.join(out, arrays.TRAIN_FILE)) as stored:
    assert stored[arrays.INPUTS].shape == (64, 32, 32, 1)
  train_inputs, train_labels = arrays.load(out, info, True)
  eval_inputs, eval_labels = arrays.load(out, info, False)
  assert train_inputs.shape == (64, 32, 32, 3) and eval_inputs.shape == (50, 32, 32, 3)
  records = read_records(os.path.join(tiny_dir, 'train-*'))
  assert sorted(train_labels) == sorted(
      _parse(r)['image/class/label'].int64_list.value[0] for r in records)
  data = data_config.from_dataset_json(tiny_dir, dataset_json.read(tiny_dir), 32)
  with tf.Graph().as_default():
    batches = tf.data.make_one_shot_iterator(
        input_fn.input_fn_builder(data, False, global_batch_size=25)({'batch_size': 25}))
    features, labels = batches.get_next()
    with tf.Session() as sess:
      expected = [sess.run((features['image'], labels)) for _ in range(2)]
  np.testing.assert_array_equal(eval_inputs, np.concatenate([e[0] for e in expected]))
  np.testing.assert_array_equal(eval_labels, np.concatenate([e[1] for e in expected]))
