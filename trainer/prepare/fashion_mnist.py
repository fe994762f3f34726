"""Fashion-MNIST (Xiao et al. 2017; 60,000 train / 10,000 test, 28x28 grayscale, 10 classes) from
LeCun's IDX files, as PNG records in the ImageNet schema: `python -m trainer.prepare fashion_mnist`.
Debian's `dataset-fashion-mnist` package installs the files into DEFAULT_SOURCE_DIR.
"""

import gzip
import os

import numpy as np
import tensorflow.compat.v1 as tf

from trainer.data import dataset_json
from trainer.data import records
from trainer.data import shards
from trainer.errors import PipelineError

DEFAULT_SOURCE_DIR = '/usr/share/datasets/fashion-mnist'
FILES = {
    shards.TRAIN_SPLIT: ('train-images-idx3-ubyte.gz', 'train-labels-idx1-ubyte.gz'),
    shards.EVAL_SPLIT: ('t10k-images-idx3-ubyte.gz', 't10k-labels-idx1-ubyte.gz'),
}
CLASSES = ('T-shirt/top', 'Trouser', 'Pullover', 'Dress', 'Coat', 'Sandal', 'Shirt', 'Sneaker',
           'Bag', 'Ankle boot')


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
  candidates = [source_dir] if source_dir else [DEFAULT_SOURCE_DIR]
  needed = [name for pair in FILES.values() for name in pair]
  for directory in candidates:
    if all(os.path.exists(os.path.join(directory, name)) for name in needed):
      return directory
  raise PipelineError(
      'Fashion-MNIST not found: %s must hold %s. On Debian/Ubuntu install it with '
      '`sudo apt-get install dataset-fashion-mnist` (files land in %s), or download the four files '
      'from https://github.com/zalandoresearch/fashion-mnist and pass --source_dir.'
      % (candidates[0], ', '.join(needed), DEFAULT_SOURCE_DIR))


def held_out(count, fraction):
  """Which of `count` training images (by index) a `fraction` in (0, 1) holds out for recipe
  selection: the first round(count x fraction) of a fixed permutation (numpy's RandomState(0)),
  so the split is the same in every conversion.

  Returns:
    bool numpy array [count], True where held out.
  """
  order = np.random.RandomState(0).permutation(count)
  out = np.zeros(count, bool)
  out[order[:int(round(count * fraction))]] = True
  return out


def _split_arrays(source_dir, holdout_fraction):
  """{split: (images uint8 [n, 28, 28], labels uint8 [n], source indices int [n], file-name
  prefix)}: the test set as validation, or with `holdout_fraction` the held-out training images
  (and no test image).

  Raises:
    PipelineError: the files are inconsistent, or `holdout_fraction` holds out no image or all.
  """
  arrays = {}
  for split, (images_file, labels_file) in FILES.items():
    images = read_idx(os.path.join(source_dir, images_file))
    labels = read_idx(os.path.join(source_dir, labels_file))
    if images.ndim != 3 or len(images) != len(labels) or labels.max() >= 10:
      raise PipelineError('%s / %s are inconsistent: %s images, %s labels, max label %d.' % (
          images_file, labels_file, images.shape, labels.shape, labels.max()))
    arrays[split] = (images, labels, np.arange(len(labels)), split)
  if holdout_fraction:
    images, labels, index, _ = arrays[shards.TRAIN_SPLIT]
    out = held_out(len(labels), holdout_fraction)
    if not 0 < out.sum() < len(out):
      raise PipelineError('--validation_fraction=%s holds out %d of the %d training images: '
                          'give a fraction that leaves images in both splits (e.g. 0.1).'
                          % (holdout_fraction, out.sum(), len(out)))
    arrays = {shards.TRAIN_SPLIT: (images[~out], labels[~out], index[~out], shards.TRAIN_SPLIT),
              shards.EVAL_SPLIT: (images[out], labels[out], index[out], shards.TRAIN_SPLIT)}
  return arrays


def prepare(output_dir, source_dir=None, train_shards=16, validation_shards=4, overwrite=False,
            holdout_fraction=None):
  """Converts Fashion-MNIST (Xiao et al. 2017; 60,000 train / 10,000 test, 28x28 grayscale) into
  PNG TFRecords; the test set becomes the `validation` split. Returns the dataset.json dict.

  With `holdout_fraction` (a float in (0, 1), e.g. 0.1) the `validation` split is instead that
  share of the 60,000 training images (a fixed choice: `held_out`) and the rest is `train`; no
  test image is written. That conversion is for choosing a recipe without looking at the test
  set; its dataset.json says so ('holdout_fraction').

  Raises:
    PipelineError: the files are missing or damaged, `holdout_fraction` is outside (0, 1) or
      would leave a split empty, or output_dir holds a conversion and `overwrite` is False (with
      it, that conversion is deleted first, after every other check).
  """
  if holdout_fraction is not None and not 0 < holdout_fraction < 1:
    raise PipelineError('--validation_fraction=%s: fashion_mnist holds out that share of the '
                        'training images, so it must be above 0 and below 1 (e.g. 0.1).'
                        % holdout_fraction)
  shards.check_output_dir(output_dir, overwrite)
  source_dir = _find_fashion_mnist(source_dir)
  arrays = _split_arrays(source_dir, holdout_fraction)  # refuses before anything is deleted
  shards.prepare_output_dir(output_dir, overwrite)
  counts, mean, std = {}, None, None
  for split, (images, labels, index, prefix) in arrays.items():
    if split == shards.TRAIN_SPLIT:
      mean, std = float(images.mean()), float(images.std())
    pngs = encode_png(images[..., np.newaxis])
    examples = [
        records.image_example(png, 'PNG', 28, 28, 1, int(label), CLASSES[label],
                              '%s/%05d.png' % (prefix, i)).SerializeToString()
        for i, png, label in zip(index, pngs, labels)]
    shards.write_shards(output_dir, split, examples,
                        train_shards if split == shards.TRAIN_SPLIT else validation_shards)
    counts[split] = len(examples)
  info = {
      'name': 'fashion_mnist',
      'num_classes': 10,
      'class_names': list(CLASSES),
      'label_offset': 0,
      'num_train_examples': counts[shards.TRAIN_SPLIT],
      'num_eval_examples': counts[shards.EVAL_SPLIT],
      'image_height': 28, 'image_width': 28, 'image_channels': 1,
      'mean_rgb': [mean] * 3, 'stddev_rgb': [std] * 3,
      'train_pattern': shards.TRAIN_PATTERN, 'eval_pattern': shards.EVAL_PATTERN,
      # Shoes and bags all face one way in Fashion-MNIST: flipping adds unseen orientations.
      'preprocessing': {'train_crop': 'pad_and_crop', 'crop_padding': 2,
                        'eval_crop_fraction': 1.0, 'random_flip': False},
      'source': source_dir,
  }
  if holdout_fraction:
    info['holdout_fraction'] = holdout_fraction
  dataset_json.write(output_dir, info)
  return info
