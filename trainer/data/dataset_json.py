"""dataset.json: the metadata `trainer.prepare` writes next to the shards and the trainer reads, so
users never edit constants (class count, split sizes, image shape, label offset, preprocessing)."""

import json

import tensorflow.compat.v1 as tf

FILENAME = 'dataset.json'


def write(output_dir, info):
  """Writes `info` (a JSON-serialisable dict) to <output_dir>/dataset.json, through a temporary
  file and a rename, so a reader never sees half a file."""
  path = '%s/%s' % (output_dir.rstrip('/'), FILENAME)
  with tf.io.gfile.GFile(path + '.tmp', 'w') as f:
    f.write(json.dumps(info, indent=2, sort_keys=True) + '\n')
  tf.io.gfile.rename(path + '.tmp', path, overwrite=True)


def read(data_dir):
  """Returns the dict in <data_dir>/dataset.json, or None if there is no such file.

  Raises:
    ValueError: the file exists but is not valid JSON.
  """
  path = '%s/%s' % (data_dir.rstrip('/'), FILENAME)
  if not tf.io.gfile.exists(path):
    return None
  with tf.io.gfile.GFile(path) as f:
    try:
      return json.loads(f.read())
    except ValueError as e:
      raise ValueError('%s is not valid JSON: %s' % (path, e))


def image_size(info):
  """The square size images train at, from a dataset.json dict: its `image_size` (the training
  size, e.g. 224 for ImageNet) if set, else the larger side of the median stored image
  (`image_height`, `image_width`: Fashion-MNIST's 28).

  Returns:
    int pixels, or None when `info` says neither (text data, or no dataset.json).
  """
  if info.get('image_size'):
    return info['image_size']
  if 'image_height' in info:
    return max(info['image_height'], info['image_width'])
  return None
