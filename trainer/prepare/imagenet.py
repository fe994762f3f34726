"""ILSVRC-2012 (ImageNet) as TFRecords in the schema of the Cloud TPU converters, on the Beam
engine (beam_convert): `python -m trainer.prepare imagenet --source_dir DIR --output_dir DIR`.

The source is the extracted archive layout:
  DIR/train/<wnid>/*.JPEG
  DIR/val/<wnid>/*.JPEG, or DIR/val/*.JPEG with --validation_labels=FILE (one wnid per line, for
  the files in sorted name order; DIR/synset_labels.txt is used when present, the file the Cloud
  TPU converter reads). The folder may also be named validation/.
Labels are 1 + the wnid's index in sorted order (1..1000, label_offset 1 in dataset.json), as in
the Cloud TPU converters; every record is an RGB JPEG (CMYK, greyscale and PNG-in-.JPEG files are
re-encoded; image_coder).
"""

import os

from absl import logging
import tensorflow.compat.v1 as tf

from trainer.data import shards
from trainer.errors import PipelineError
from trainer.models import model_config
from trainer.prepare import beam_convert
from trainer.prepare.ilsvrc_layout import DEFAULT_TRAIN_SHARDS
from trainer.prepare.ilsvrc_layout import DEFAULT_VALIDATION_LABELS
from trainer.prepare.ilsvrc_layout import DEFAULT_VALIDATION_SHARDS
from trainer.prepare.ilsvrc_layout import IMAGE_EXTENSIONS
from trainer.prepare.ilsvrc_layout import LABEL_OFFSET
from trainer.prepare.ilsvrc_layout import TRAIN_DIR
from trainer.prepare.ilsvrc_layout import TRAIN_IMAGE_SIZE
from trainer.prepare.ilsvrc_layout import VALIDATION_DIRS


def _images_in(directory):
  return sorted(n for n in tf.io.gfile.listdir(directory)
                if os.path.splitext(n.rstrip('/'))[1].lower() in IMAGE_EXTENSIONS)


def _subdirs(directory):
  # GCS lists folders with a trailing '/': no request per entry (a flat val/ has 50,000).
  on_gcs = directory.startswith('gs://')
  return sorted(n.rstrip('/') for n in tf.io.gfile.listdir(directory)
                if n.endswith('/') or
                (not on_gcs and tf.io.gfile.isdir(os.path.join(directory, n))))


def _read_lines(path, what):
  if not tf.io.gfile.exists(path):
    raise PipelineError('%s %s does not exist.' % (what, path))
  with tf.io.gfile.GFile(path) as f:
    return [line.strip() for line in f.read().splitlines() if line.strip()]


def list_images(source_dir, validation_labels=None, synsets=None):
  """Lists the ILSVRC layout under `source_dir` (local or gs://).

  Args:
    validation_labels: file of one wnid per line for a flat validation folder (default:
      source_dir/synset_labels.txt when present).
    synsets: file of the class wnids, one per line (default: the train/ folders).

  Returns:
    ({'train': [Item], 'validation': [Item]}, sorted wnids).

  Raises:
    PipelineError: a missing folder, an empty split, a label count that does not match the
      validation files, or a wnid outside the class list.
  """
  train_root = os.path.join(source_dir, TRAIN_DIR)
  if not tf.io.gfile.isdir(train_root):
    raise PipelineError('%s has no %s/ folder: imagenet reads the extracted ILSVRC-2012 layout '
                        '(train/<wnid>/*.JPEG, val/<wnid>/*.JPEG or val/*.JPEG).'
                        % (source_dir, TRAIN_DIR))
  val_root = next((os.path.join(source_dir, d) for d in VALIDATION_DIRS
                   if tf.io.gfile.isdir(os.path.join(source_dir, d))), None)
  if val_root is None:
    raise PipelineError('%s has no validation folder (%s).'
                        % (source_dir, ' or '.join(d + '/' for d in VALIDATION_DIRS)))
  train_files = {w: _images_in(os.path.join(train_root, w)) for w in _subdirs(train_root)}
  empty = sorted(w for w, names in train_files.items() if not names)
  if empty:  # e.g. .ipynb_checkpoints: a class without images would shift every label
    logging.warning('ignoring train/ folders without .JPEG/.jpg images: %s', empty[:10])
  train_wnids = sorted(w for w, names in train_files.items() if names)
  if synsets:
    listed = _read_lines(synsets, '--synsets')
    duplicated = sorted(w for w in set(listed) if listed.count(w) > 1)
    if duplicated:
      raise PipelineError('--synsets %s lists %s more than once; list each class once.'
                          % (synsets, duplicated[:5]))
    wnids = sorted(listed)
  else:
    wnids = train_wnids
  unknown = sorted(set(train_wnids) - set(wnids))
  if unknown:
    raise PipelineError('train/ folders %s are not in --synsets %s: add them to it, or remove '
                        'the folders.' % (unknown[:5], synsets))
  label = {wnid: LABEL_OFFSET + i for i, wnid in enumerate(wnids)}

  def item(path, wnid):
    return beam_convert.Item(path, label[wnid], wnid, os.path.basename(path))

  train = [item(os.path.join(train_root, w, n), w) for w in train_wnids for n in train_files[w]]
  val_wnids = _subdirs(val_root)
  if val_wnids:
    unknown = sorted(set(val_wnids) - set(wnids))
    if unknown:
      raise PipelineError('validation folders %s are not classes of %s: every validation class '
                          'needs its train/ folder (or a line in --synsets).'
                          % (unknown[:5], synsets or 'train/'))
    validation = [item(os.path.join(val_root, w, n), w) for w in val_wnids
                  for n in _images_in(os.path.join(val_root, w))]
  else:
    labels_path = validation_labels or os.path.join(source_dir, DEFAULT_VALIDATION_LABELS)
    if not validation_labels and not tf.io.gfile.exists(labels_path):
      raise PipelineError('%s holds the validation images without class folders: pass '
                          '--validation_labels=FILE (one wnid per line, in sorted file-name '
                          'order).' % val_root)
    names = _images_in(val_root)
    val_labels = _read_lines(labels_path, '--validation_labels')
    if len(val_labels) != len(names):
      raise PipelineError('%s has %d lines but %s holds %d images: it needs one wnid per image, '
                          'in sorted file-name order.'
                          % (labels_path, len(val_labels), val_root, len(names)))
    unknown = sorted(set(val_labels) - set(wnids))
    if unknown:
      raise PipelineError('%s names wnids that are not classes of %s: %s. Check that it is the '
                          'label file of these images.' % (labels_path, synsets or 'train/',
                                                          unknown[:5]))
    validation = [item(os.path.join(val_root, n), w) for n, w in zip(names, val_labels)]
  if not train or not validation:
    raise PipelineError('%s: found %d training and %d validation images (.JPEG/.jpg).'
                        % (source_dir, len(train), len(validation)))
  return {shards.TRAIN_SPLIT: train, shards.EVAL_SPLIT: validation}, wnids


def prepare(source_dir, output_dir, options, validation_labels=None, synsets=None,
            train_shards=DEFAULT_TRAIN_SHARDS, validation_shards=DEFAULT_VALIDATION_SHARDS,
            skip_unreadable=False, overwrite=False, shuffle_seed=0, lease=None):
  """Converts the ILSVRC layout under `source_dir` into train-NNNNN-of-01024 and
  validation-NNNNN-of-00128 shards (by default) plus dataset.json in `output_dir`.

  Args:
    options: Beam PipelineOptions (beam_convert.pipeline_options_for).
    Others: see list_images and beam_convert.convert.

  Returns:
    The dataset.json dict.

  Raises:
    PipelineError: see list_images and beam_convert.convert.
  """
  if not source_dir or not tf.io.gfile.isdir(source_dir):
    raise PipelineError('imagenet needs --source_dir pointing at the extracted ILSVRC-2012 '
                        'folders (train/, val/).')
  splits, wnids = list_images(source_dir, validation_labels, synsets)
  info = {
      'name': 'imagenet',
      'num_classes': len(wnids),
      'class_names': wnids,
      'label_offset': LABEL_OFFSET,
      'image_channels': 3,
      'image_size': TRAIN_IMAGE_SIZE,
      # The published ImageNet statistics every ImageNet model is trained with.
      'mean_rgb': list(model_config.IMAGENET_MEAN_RGB),
      'stddev_rgb': list(model_config.IMAGENET_STDDEV_RGB),
      'train_pattern': shards.TRAIN_PATTERN, 'eval_pattern': shards.EVAL_PATTERN,
      'preprocessing': {'train_crop': 'distorted_bbox', 'eval_crop_fraction': 0.875},
      'source': source_dir,
  }
  return beam_convert.convert(
      splits, output_dir, info,
      {shards.TRAIN_SPLIT: train_shards, shards.EVAL_SPLIT: validation_shards}, options,
      jpeg_only=True, skip_unreadable=skip_unreadable, with_stats=False,
      shuffle_seed=shuffle_seed, overwrite=overwrite, lease=lease)
