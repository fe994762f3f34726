"""A folder-per-class tree of JPEG/PNG files as records in the ImageNet schema, the encoded bytes
kept as they are, converted on the Beam engine (beam_convert):
`python -m trainer.prepare image_folder --source_dir TREE`. The tree is either
TREE/<class>/<file> (validation split by a stable hash of the path) or
TREE/{train,validation}/<class>/<file>.
"""

import os
import zlib

import tensorflow.compat.v1 as tf

from trainer.data import shards
from trainer.errors import PipelineError
from trainer.prepare import beam_convert

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
            validation_shards=4, options=None, skip_unreadable=False, overwrite=False,
            shuffle_seed=0):
  """Converts a folder-per-class tree of JPEG/PNG files (either SOURCE/class/x.jpg, split by a
  stable hash, or SOURCE/{train,validation}/class/x.jpg) on the Beam engine
  (trainer/prepare/beam_convert.py). JPEG and PNG bytes are kept as they are; labels are 0-based
  (label_offset 0); the training images' mean and stddev go into dataset.json.

  Args:
    options: Beam PipelineOptions (default: DirectRunner on every core).
    skip_unreadable, overwrite, shuffle_seed: as in beam_convert.convert.

  Returns:
    The dataset.json dict.

  Raises:
    PipelineError: no usable tree, an existing conversion in output_dir, or a file that does
      not decode as an image (named).
  """
  if not source_dir or not tf.io.gfile.isdir(source_dir):
    raise PipelineError('image_folder needs --source_dir pointing at a folder-per-class tree.')
  splits, class_names = _list_image_folder(source_dir, validation_fraction)
  items = {split: [beam_convert.Item(path, label, class_names[label],
                                     os.path.relpath(path, source_dir))
                   for path, label in files]
           for split, files in splits.items()}
  info = {
      'name': os.path.basename(os.path.normpath(source_dir)),
      'num_classes': len(class_names),
      'class_names': class_names,
      'label_offset': 0,
      'image_channels': 3,
      'train_pattern': shards.TRAIN_PATTERN, 'eval_pattern': shards.EVAL_PATTERN,
      'preprocessing': {'train_crop': 'distorted_bbox', 'eval_crop_fraction': 0.875},
      'source': source_dir,
  }
  return beam_convert.convert(
      items, output_dir, info,
      {shards.TRAIN_SPLIT: train_shards, shards.EVAL_SPLIT: validation_shards},
      options or beam_convert.pipeline_options_for(), jpeg_only=False,
      skip_unreadable=skip_unreadable, with_stats=True, shuffle_seed=shuffle_seed,
      overwrite=overwrite)
