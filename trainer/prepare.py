"""Dataset preparation: writes TFRecord shards in the ImageNet schema plus dataset.json.

  python -m trainer.prepare fashion_mnist --output_dir DIR [--source_dir DIR]
  python -m trainer.prepare image_folder --source_dir TREE --output_dir DIR
  python -m trainer.prepare text --input FILE[,FILE] --output_dir DIR   (see trainer.prepare_text)
  python -m trainer.prepare rotten_tomatoes --output_dir DIR
  python -m trainer.prepare photos --output_dir DIR [--num_images N]   (see trainer.photos)

Records hold `image/encoded`, `image/format`, `image/height`, `image/width`, `image/channels`,
`image/colorspace`, `image/class/label` (0-based here; dataset.json says label_offset 0),
`image/class/synset` (the class name) and `image/filename`; shards are `train-00000-of-000NN` and
`validation-00000-of-000NN`, so the trainer reads them exactly like converted ImageNet.
"""

import gzip
import os
import shutil
import sys
import tempfile
import zlib

from absl import app
from absl import flags as absl_flags
from absl import logging
import numpy as np
import tensorflow.compat.v1 as tf

from flags import prepare_flags  # pylint: disable=unused-import  # defines the flags
from trainer import dataset_info
from trainer import photos
from trainer import prepare_text
from trainer import storage
from trainer.config import PipelineError

FLAGS = absl_flags.FLAGS
DATASETS = ('fashion_mnist', 'image_folder', 'text', 'rotten_tomatoes', 'photos')
FASHION_MNIST_DIR = '/usr/share/datasets/fashion-mnist'
FASHION_MNIST_FILES = {
    'train': ('train-images-idx3-ubyte.gz', 'train-labels-idx1-ubyte.gz'),
    'validation': ('t10k-images-idx3-ubyte.gz', 't10k-labels-idx1-ubyte.gz'),
}
FASHION_MNIST_CLASSES = ('T-shirt/top', 'Trouser', 'Pullover', 'Dress', 'Coat', 'Sandal', 'Shirt',
                         'Sneaker', 'Bag', 'Ankle boot')
IMAGE_EXTENSIONS = {'.jpg': 'JPEG', '.jpeg': 'JPEG', '.png': 'PNG'}


def read_idx(path):
  """Reads an IDX file (optionally gzipped) of unsigned bytes (LeCun's MNIST format).

  Returns:
    uint8 numpy array with the file's dimensions ([n] labels or [n, rows, cols] images).

  Raises:
    PipelineError: not an unsigned-byte IDX file or truncated.
  """
  opener = gzip.open if path.endswith('.gz') else open
  with opener(path, 'rb') as f:
    data = f.read()
  if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
    raise PipelineError('%s is not an unsigned-byte IDX file (bad magic number).' % path)
  ndim = data[3]
  dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], 'big') for i in range(ndim)]
  offset = 4 + 4 * ndim
  if len(data) - offset != int(np.prod(dims)):
    raise PipelineError('%s is truncated: header says %s, file holds %d bytes of data.'
                        % (path, dims, len(data) - offset))
  return np.frombuffer(data, dtype=np.uint8, offset=offset).reshape(dims)


def make_example(encoded, image_format, height, width, channels, label, class_name, filename):
  """One tf.train.Example in the ImageNet schema (label as written, no offset applied)."""
  def _bytes(value):
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))

  def _int(value):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))

  return tf.train.Example(features=tf.train.Features(feature={
      'image/encoded': _bytes(encoded),
      'image/format': _bytes(image_format.encode()),
      'image/height': _int(height),
      'image/width': _int(width),
      'image/channels': _int(channels),
      'image/colorspace': _bytes(b'RGB' if channels == 3 else b'Grayscale'),
      'image/class/label': _int(label),
      'image/class/synset': _bytes(class_name.encode()),
      'image/filename': _bytes(filename.encode()),
  }))


def encode_png(images):
  """PNG-encodes uint8 images [n, h, w, c] (c = 1 or 3) in batches; returns a list of bytes."""
  encoded = []
  with tf.Graph().as_default():
    batch = tf.placeholder(tf.uint8, [None] + list(images.shape[1:]))
    pngs = tf.map_fn(tf.image.encode_png, batch, dtype=tf.string, parallel_iterations=32,
                     back_prop=False)
    with tf.Session() as sess:
      for start in range(0, len(images), 2000):
        encoded.extend(sess.run(pngs, {batch: images[start:start + 2000]}))
  return encoded


def _find_fashion_mnist(source_dir):
  candidates = [source_dir] if source_dir else [FASHION_MNIST_DIR]
  needed = [name for pair in FASHION_MNIST_FILES.values() for name in pair]
  for directory in candidates:
    if all(os.path.exists(os.path.join(directory, name)) for name in needed):
      return directory
  raise PipelineError(
      'Fashion-MNIST not found: %s must hold %s. On Debian/Ubuntu install it with '
      '`sudo apt-get install dataset-fashion-mnist` (files land in %s), or download the four files '
      'from https://github.com/zalandoresearch/fashion-mnist and pass --source_dir.'
      % (candidates[0], ', '.join(needed), FASHION_MNIST_DIR))


def prepare_fashion_mnist(output_dir, source_dir=None, train_shards=16, validation_shards=4):
  """Converts Fashion-MNIST (Xiao et al. 2017; 60,000 train / 10,000 test, 28x28 grayscale) into
  PNG TFRecords; the test set becomes the `validation` split. Returns the dataset.json dict."""
  source_dir = _find_fashion_mnist(source_dir)
  tf.io.gfile.makedirs(output_dir)
  counts, mean, std = {}, None, None
  for split, (images_file, labels_file) in FASHION_MNIST_FILES.items():
    images = read_idx(os.path.join(source_dir, images_file))
    labels = read_idx(os.path.join(source_dir, labels_file))
    if images.ndim != 3 or len(images) != len(labels) or labels.max() >= 10:
      raise PipelineError('%s / %s are inconsistent: %s images, %s labels, max label %d.' % (
          images_file, labels_file, images.shape, labels.shape, labels.max()))
    if split == 'train':
      mean, std = float(images.mean()), float(images.std())
    pngs = encode_png(images[..., np.newaxis])
    examples = [
        make_example(png, 'PNG', 28, 28, 1, int(label), FASHION_MNIST_CLASSES[label],
                     '%s/%05d.png' % (split, i)).SerializeToString()
        for i, (png, label) in enumerate(zip(pngs, labels))]
    dataset_info.write_shards(output_dir, split, examples,
                 train_shards if split == 'train' else validation_shards)
    counts[split] = len(examples)
  info = {
      'name': 'fashion_mnist',
      'num_classes': 10,
      'class_names': list(FASHION_MNIST_CLASSES),
      'label_offset': 0,
      'num_train_examples': counts['train'],
      'num_eval_examples': counts['validation'],
      'image_height': 28, 'image_width': 28, 'image_channels': 1,
      'mean_rgb': [mean] * 3, 'stddev_rgb': [std] * 3,
      'train_pattern': 'train-*', 'eval_pattern': 'validation-*',
      # Shoes and bags all face one way in Fashion-MNIST: flipping adds unseen orientations.
      'preprocessing': {'train_crop': 'pad_and_crop', 'crop_padding': 2,
                        'eval_crop_fraction': 1.0, 'random_flip': False},
      'source': source_dir,
  }
  dataset_info.write(output_dir, info)
  return info


def _list_image_folder(source_dir, validation_fraction):
  """Returns ({'train': [(path, class_index)], 'validation': [...]}, class_names)."""
  def class_files(root):
    classes = sorted(d for d in tf.io.gfile.listdir(root) if tf.io.gfile.isdir(os.path.join(root, d)))
    files = {}
    for c in classes:
      c = c.rstrip('/')
      files[c] = sorted(os.path.join(root, c, n) for n in tf.io.gfile.listdir(os.path.join(root, c))
                        if os.path.splitext(n)[1].lower() in IMAGE_EXTENSIONS)
    return files

  if all(tf.io.gfile.isdir(os.path.join(source_dir, s)) for s in ('train', 'validation')):
    train, validation = (class_files(os.path.join(source_dir, s)) for s in ('train', 'validation'))
    unknown = set(validation) - set(train)
    if unknown:
      raise PipelineError('validation classes %s have no train folder.' % sorted(unknown))
    class_names = sorted(train)
  else:
    train = class_files(source_dir)
    class_names = sorted(train)
    validation = {c: [] for c in class_names}
    for c in class_names:
      kept = []
      for path in train[c]:
        held_out = zlib.crc32(os.path.relpath(path, source_dir).encode()) % 1000 < (
            validation_fraction * 1000)
        (validation[c] if held_out else kept).append(path)
      train[c] = kept
  index = {c: i for i, c in enumerate(class_names)}
  splits = {name: [(p, index[c]) for c in class_names for p in files.get(c, [])]
            for name, files in (('train', train), ('validation', validation))}
  if len(class_names) < 2 or not splits['train'] or not splits['validation']:
    raise PipelineError(
        '%s needs at least two class folders of .jpg/.jpeg/.png files and images for both splits '
        '(found %d classes, %d train, %d validation images).'
        % (source_dir, len(class_names), len(splits['train']), len(splits['validation'])))
  return splits, class_names


def prepare_image_folder(source_dir, output_dir, validation_fraction=0.1, train_shards=16,
                         validation_shards=4):
  """Converts a folder-per-class tree of JPEG/PNG files (either SOURCE/class/x.jpg, split by a
  stable hash, or SOURCE/{train,validation}/class/x.jpg). Encoded bytes are kept as they are.
  Returns the dataset.json dict.

  Raises:
    PipelineError: no usable tree, or a file that does not decode as an image.
  """
  if not source_dir or not tf.io.gfile.isdir(source_dir):
    raise PipelineError('image_folder needs --source_dir pointing at a folder-per-class tree.')
  splits, class_names = _list_image_folder(source_dir, validation_fraction)
  tf.io.gfile.makedirs(output_dir)
  sizes, sums, sq_sums, pixels = [], np.zeros(3), np.zeros(3), 0
  with tf.Graph().as_default():
    encoded_in = tf.placeholder(tf.string, [])
    decoded = tf.io.decode_image(encoded_in, channels=3, expand_animations=False)
    channels = tf.shape(tf.io.decode_image(encoded_in, expand_animations=False))[-1]
    with tf.Session() as sess:
      for split, files in splits.items():
        examples = []
        for path, label in files:
          with tf.io.gfile.GFile(path, 'rb') as f:
            encoded = f.read()
          try:
            image, num_channels = sess.run([decoded, channels], {encoded_in: encoded})
          except tf.errors.InvalidArgumentError as e:
            raise PipelineError('%s is not a readable JPEG/PNG image (%s); remove or replace it.'
                                % (path, e.message.splitlines()[0]))
          height, width = image.shape[:2]
          sizes.append((height, width))
          if split == 'train':
            sums += image.sum(axis=(0, 1))
            sq_sums += (image.astype(np.float64) ** 2).sum(axis=(0, 1))
            pixels += height * width
          fmt = IMAGE_EXTENSIONS[os.path.splitext(path)[1].lower()]
          examples.append(make_example(
              encoded, fmt, height, width, int(num_channels), label, class_names[label],
              os.path.relpath(path, source_dir)).SerializeToString())
        dataset_info.write_shards(output_dir, split, examples,
                     train_shards if split == 'train' else validation_shards)
  mean = sums / pixels
  heights, widths = zip(*sizes)
  info = {
      'name': os.path.basename(os.path.normpath(source_dir)),
      'num_classes': len(class_names),
      'class_names': class_names,
      'label_offset': 0,
      'num_train_examples': len(splits['train']),
      'num_eval_examples': len(splits['validation']),
      'image_height': int(np.median(heights)), 'image_width': int(np.median(widths)),
      'image_channels': 3,
      'mean_rgb': mean.tolist(), 'stddev_rgb': np.sqrt(sq_sums / pixels - mean ** 2).tolist(),
      'train_pattern': 'train-*', 'eval_pattern': 'validation-*',
      'preprocessing': {'train_crop': 'distorted_bbox', 'eval_crop_fraction': 0.875},
      'source': source_dir,
  }
  dataset_info.write(output_dir, info)
  return info


def prepare_photos(output_dir, num_images, train_shards=8, validation_shards=2):
  """Real-photo records for the input benchmark: `num_images` JPEG crops of 400x350 cut from the
  scikit-image sample photos (`trainer.photos`), one class per photo, 10% held out by a stable
  hash. Returns the dataset.json dict.

  Raises:
    PipelineError: scikit-image missing, or fewer than two images per photo.
  """
  if num_images < 2 * len(photos.PHOTOS):
    raise PipelineError('--num_images=%d: photos needs at least %d (two per photo).'
                        % (num_images, 2 * len(photos.PHOTOS)))
  tree = tempfile.mkdtemp(prefix='photos-')
  try:
    photos.write_crops(tree, num_images)
    info = prepare_image_folder(tree, output_dir, 0.1, train_shards, validation_shards)
  finally:
    shutil.rmtree(tree, ignore_errors=True)
  info.update(name='photos', source='scikit-image sample photos: %s' % ', '.join(photos.PHOTOS))
  dataset_info.write(output_dir, info)
  return info


def _text_options():
  return dict(vocab_size=FLAGS.vocab_size, min_count=FLAGS.min_count,
              max_seq_length=FLAGS.max_seq_length, train_shards=FLAGS.train_shards,
              validation_shards=FLAGS.validation_shards)


def main(argv):
  if len(argv) != 2 or argv[1] not in DATASETS:
    raise app.UsageError('usage: python -m trainer.prepare {%s} --output_dir DIR [...]; see '
                         '--helpfull' % ','.join(DATASETS))
  try:
    storage.check_path_usable(FLAGS.output_dir, 'output_dir')
    if argv[1] == 'fashion_mnist':
      info = prepare_fashion_mnist(FLAGS.output_dir, FLAGS.source_dir, FLAGS.train_shards,
                                   FLAGS.validation_shards)
    elif argv[1] == 'image_folder':
      info = prepare_image_folder(FLAGS.source_dir, FLAGS.output_dir,
                                  FLAGS.validation_fraction or 0.1, FLAGS.train_shards,
                                  FLAGS.validation_shards)
    elif argv[1] == 'photos':
      info = prepare_photos(FLAGS.output_dir, FLAGS.num_images, FLAGS.train_shards,
                            FLAGS.validation_shards)
    elif argv[1] == 'text':
      info = prepare_text.prepare_text_files(
          FLAGS.input, FLAGS.output_dir, validation_input=FLAGS.validation_input,
          text_column=FLAGS.text_column, label_column=FLAGS.label_column,
          validation_fraction=FLAGS.validation_fraction or 0.2, seed=FLAGS.seed,
          **_text_options())
    else:
      if FLAGS.input and len(FLAGS.input) > 1:
        raise PipelineError('rotten_tomatoes takes at most one --input (the .csv.bz2 file).')
      info = prepare_text.prepare_rotten_tomatoes(
          FLAGS.output_dir, FLAGS.input[0] if FLAGS.input else None,
          validation_fraction=FLAGS.validation_fraction or 0.2, seed=FLAGS.seed,
          **_text_options())
  except PipelineError as e:
    print('error: %s' % e, file=sys.stderr)
    sys.exit(2)
  print('%s: %d train / %d validation examples, %d classes -> %s' % (
      info['name'], info['num_train_examples'], info['num_eval_examples'], info['num_classes'],
      FLAGS.output_dir))


def run():
  logging.set_verbosity(logging.INFO)
  app.run(main)


if __name__ == '__main__':
  run()
