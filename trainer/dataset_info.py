"""dataset.json: the metadata `trainer.prepare` writes next to the shards and the trainer reads, so
users never edit constants (class count, split sizes, image shape, label offset, preprocessing);
and the shard layout (`train-00000-of-00016`) both sides agree on."""

import json

from absl import logging
import numpy as np
import tensorflow.compat.v1 as tf

FILENAME = 'dataset.json'


def write(output_dir, info):
  """Writes `info` (a JSON-serialisable dict) to <output_dir>/dataset.json."""
  with tf.io.gfile.GFile('%s/%s' % (output_dir.rstrip('/'), FILENAME), 'w') as f:
    f.write(json.dumps(info, indent=2, sort_keys=True) + '\n')


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


def write_shards(output_dir, split, examples, num_shards):
  """Writes serialized `examples` (a list) as <split>-0000i-of-0000N, in order, contiguous."""
  num_shards = max(1, min(num_shards, len(examples)))
  bounds = np.linspace(0, len(examples), num_shards + 1).astype(int)
  for i in range(num_shards):
    path = '%s/%s-%05d-of-%05d' % (output_dir.rstrip('/'), split, i, num_shards)
    with tf.io.TFRecordWriter(path) as writer:
      for example in examples[bounds[i]:bounds[i + 1]]:
        writer.write(example)
  logging.info('wrote %d %s examples in %d shards to %s', len(examples), split, num_shards,
               output_dir)
