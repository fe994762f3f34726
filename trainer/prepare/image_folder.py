"""A folder-per-class tree of JPEG/PNG files as records in the ImageNet schema, the encoded bytes
kept as they are: `python -m trainer.prepare image_folder --source_dir TREE`. The tree is either
TREE/<class>/<file> (validation split by a stable hash of the path) or
TREE/{train,validation}/<class>/<file>.
"""

import os
import zlib

import numpy as np
import tensorflow.compat.v1 as tf

from trainer.data import dataset_json
from trainer.data import records
from trainer.data import shards
from trainer.errors import PipelineError

IMAGE_EXTENSIONS = {'.jpg': 'JPEG', '.jpeg': 'JPEG', '.png': 'PNG'}


def _list_image_folder(source_dir, validation_fraction):
  """Returns ({'train': [(path, class_index)], 'validation': [...]}, class_names)."""
  def class_files(root):
    classes = sorted(d for d in tf.io.gfile.listdir(root)
                     if tf.io.gfile.isdir(os.path.join(root, d)))
    files = {}
    for c in classes:
      c = c.rstrip('/')
      files[c] = sorted(os.path.join(root, c, n) for n in tf.io.gfile.listdir(os.path.join(root, c))
                        if os.path.splitext(n)[1].lower() in IMAGE_EXTENSIONS)
    return files

  split_names = (shards.TRAIN_SPLIT, shards.EVAL_SPLIT)
  if all(tf.io.gfile.isdir(os.path.join(source_dir, s)) for s in split_names):
    train, validation = (class_files(os.path.join(source_dir, s)) for s in split_names)
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
            for name, files in zip(split_names, (train, validation))}
  if len(class_names) < 2 or not all(splits[name] for name in split_names):
    raise PipelineError(
        '%s needs at least two class folders of .jpg/.jpeg/.png files and images for both splits '
        '(found %d classes, %d train, %d validation images).'
        % (source_dir, len(class_names), len(splits[shards.TRAIN_SPLIT]),
           len(splits[shards.EVAL_SPLIT])))
  return splits, class_names


def prepare(source_dir, output_dir, validation_fraction=0.1, train_shards=16,
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
          if split == shards.TRAIN_SPLIT:
            sums += image.sum(axis=(0, 1))
            sq_sums += (image.astype(np.float64) ** 2).sum(axis=(0, 1))
            pixels += height * width
          fmt = IMAGE_EXTENSIONS[os.path.splitext(path)[1].lower()]
          examples.append(records.image_example(
              encoded, fmt, height, width, int(num_channels), label, class_names[label],
              os.path.relpath(path, source_dir)).SerializeToString())
        shards.write_shards(output_dir, split, examples,
                            train_shards if split == shards.TRAIN_SPLIT else validation_shards)
  mean = sums / pixels
  heights, widths = zip(*sizes)
  info = {
      'name': os.path.basename(os.path.normpath(source_dir)),
      'num_classes': len(class_names),
      'class_names': class_names,
      'label_offset': 0,
      'num_train_examples': len(splits[shards.TRAIN_SPLIT]),
      'num_eval_examples': len(splits[shards.EVAL_SPLIT]),
      'image_height': int(np.median(heights)), 'image_width': int(np.median(widths)),
      'image_channels': 3,
      'mean_rgb': mean.tolist(), 'stddev_rgb': np.sqrt(sq_sums / pixels - mean ** 2).tolist(),
      'train_pattern': shards.TRAIN_PATTERN, 'eval_pattern': shards.EVAL_PATTERN,
      'preprocessing': {'train_crop': 'distorted_bbox', 'eval_crop_fraction': 0.875},
      'source': source_dir,
  }
  dataset_json.write(output_dir, info)
  return info
