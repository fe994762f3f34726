"""A folder-per-class tree of JPEG/PNG files as records in the ImageNet schema, the encoded bytes
kept as they are, converted on the Beam engine (beam_convert):
`python -m trainer.prepare image_folder --source_dir TREE`. The tree is either
TREE/<class>/<file> (validation split by a stable hash of the path) or
TREE/{train,validation}/<class>/<file>.
"""

import os
import zlib

from absl import logging
import tensorflow.compat.v1 as tf

from trainer.data import shards
from trainer.errors import PipelineError
from trainer.prepare import beam_convert

IMAGE_EXTENSIONS = {'.jpg': 'JPEG', '.jpeg': 'JPEG', '.png': 'PNG'}
# Image formats this converter does not read (the trainer decodes JPEG and PNG only): a tree
# holding them is refused unless --skip_unreadable, so no class silently loses its pictures.
OTHER_IMAGE_EXTENSIONS = frozenset(['.webp', '.gif', '.bmp', '.tif', '.tiff', '.heic', '.heif',
                                    '.avif', '.jxl', '.jp2', '.ico', '.raw', '.cr2', '.nef'])
# Folders that tools and operating systems create inside a tree: never classes.
SYSTEM_FOLDERS = frozenset(['__MACOSX', 'lost+found', '$RECYCLE.BIN', 'System Volume Information',
                            '@eaDir', '__pycache__'])


def _is_hidden(name):
  return name.startswith('.') or name in SYSTEM_FOLDERS


def _listdir(directory):
  """The entries of `directory`, refusing a name that is not UTF-8 (it could not be a class
  name in dataset.json, nor be reported)."""
  try:
    names = [n.rstrip('/') for n in tf.io.gfile.listdir(directory)]
  except UnicodeDecodeError:
    names = None
  if names is None or any(_undecodable(n) for n in names):
    bad = [n for n in os.listdir(os.fsencode(directory)) if not _utf8(n)] if (
        os.path.isdir(directory)) else []
    raise PipelineError('%s holds a name that is not UTF-8 (%s): class and file names go into '
                        'dataset.json and the records as UTF-8. Rename it (e.g. with '
                        '`convmv -f latin1 -t utf8`) and convert again.'
                        % (directory, ', '.join(repr(b) for b in bad[:3]) or 'unknown'))
  return names


def _undecodable(name):
  # Python maps bytes that are not UTF-8 to lone surrogates U+DC80..U+DCFF (PEP 383).
  return any(0xdc80 <= ord(c) <= 0xdcff for c in name)


def _utf8(name):
  try:
    name.decode('utf-8')
    return True
  except UnicodeDecodeError:
    return False


class _Survey(object):
  """What the listing saw besides the images it keeps, for the report and the refusals."""

  def __init__(self):
    self.hidden = []       # hidden and system folders and files, skipped
    self.unsupported = {}  # extension -> count: images in formats not read
    self.other = {}        # extension -> count: files that are not images


def _class_files(root, survey):
  """{class name: sorted image paths} of the class folders directly under `root`."""
  files = {}
  for name in sorted(_listdir(root)):
    path = os.path.join(root, name)
    if _is_hidden(name):
      survey.hidden.append(path)
      continue
    if not tf.io.gfile.isdir(path):
      extension = os.path.splitext(name)[1].lower() or '(none)'
      survey.other[extension] = survey.other.get(extension, 0) + 1
      continue
    kept = []
    for file_name in _listdir(path):
      extension = os.path.splitext(file_name)[1].lower()
      if _is_hidden(file_name):
        survey.hidden.append(os.path.join(path, file_name))
      elif extension in IMAGE_EXTENSIONS:
        kept.append(os.path.join(path, file_name))
      elif extension in OTHER_IMAGE_EXTENSIONS:
        survey.unsupported[extension] = survey.unsupported.get(extension, 0) + 1
      else:
        survey.other[extension or '(none)'] = survey.other.get(extension or '(none)', 0) + 1
    files[name] = sorted(kept)
  return files


def _counts(by_extension):
  return ', '.join('%d %s' % (n, e) for e, n in sorted(by_extension.items()))


def _report(source_dir, survey, skip_unreadable, class_names, splits):
  """Refuses what would silently change the data set; logs what was skipped and the classes."""
  if survey.unsupported and not skip_unreadable:
    raise PipelineError(
        '%s holds images in formats this converter does not read (%s; it reads %s). Convert '
        'them to JPEG or PNG, or pass --skip_unreadable to leave them out.'
        % (source_dir, _counts(survey.unsupported), ' '.join(sorted(IMAGE_EXTENSIONS))))
  if survey.unsupported:
    logging.warning('Left out (--skip_unreadable) images in formats not read: %s.',
                    _counts(survey.unsupported))
  if survey.other:
    logging.warning('Ignored files that are not images: %s.', _counts(survey.other))
  if survey.hidden:
    logging.info('Skipped %d hidden or system entries (e.g. %s).', len(survey.hidden),
                 survey.hidden[0])
  logging.info('%d classes (label: name, train/validation images): %s', len(class_names),
               '; '.join('%d: %s %d/%d' % (i, c, sum(1 for _, l in splits[shards.TRAIN_SPLIT]
                                                      if l == i),
                                           sum(1 for _, l in splits[shards.EVAL_SPLIT] if l == i))
                         for i, c in enumerate(class_names)))


def _list_image_folder(source_dir, validation_fraction, skip_unreadable=False):
  """Returns ({'train': [(path, class_index)], 'validation': [...]}, class_names).

  Raises:
    PipelineError: no usable tree, an empty class folder, images in formats not read (without
      skip_unreadable), or a name that is not UTF-8.
  """
  survey = _Survey()
  split_names = (shards.TRAIN_SPLIT, shards.EVAL_SPLIT)
  if all(tf.io.gfile.isdir(os.path.join(source_dir, s)) for s in split_names):
    train, validation = (_class_files(os.path.join(source_dir, s), survey) for s in split_names)
    unknown = set(validation) - set(train)
    if unknown:
      raise PipelineError('validation classes %s have no train folder.' % sorted(unknown))
    class_names = sorted(train)
  else:
    train = _class_files(source_dir, survey)
    class_names = sorted(train)
    validation = {c: [] for c in class_names}
    for c in class_names:
      kept = []
      for path in train[c]:
        held_out = zlib.crc32(os.path.relpath(path, source_dir).encode()) % 1000 < (
            validation_fraction * 1000)
        (validation[c] if held_out else kept).append(path)
      train[c] = kept
  empty = [c for c in class_names if not train[c] and not validation.get(c)]
  if empty:
    raise PipelineError(
        'class folders %s under %s hold no .jpg/.jpeg/.png image: an empty class would shift '
        'every label after it. Add images, or move the folder out of the tree.'
        % (', '.join(empty[:10]), source_dir))
  index = {c: i for i, c in enumerate(class_names)}
  splits = {name: [(p, index[c]) for c in class_names for p in files.get(c, [])]
            for name, files in zip(split_names, (train, validation))}
  if len(class_names) < 2 or not all(splits[name] for name in split_names):
    raise PipelineError(
        '%s needs at least two class folders of .jpg/.jpeg/.png files and images for both splits '
        '(found %d classes, %d train, %d validation images).'
        % (source_dir, len(class_names), len(splits[shards.TRAIN_SPLIT]),
           len(splits[shards.EVAL_SPLIT])))
  _report(source_dir, survey, skip_unreadable, class_names, splits)
  return splits, class_names


def prepare(source_dir, output_dir, validation_fraction=0.1, train_shards=16,
            validation_shards=4, options=None, skip_unreadable=False, overwrite=False,
            shuffle_seed=0, lease=None):
  """Converts a folder-per-class tree of JPEG/PNG files (either SOURCE/class/x.jpg, split by a
  stable hash, or SOURCE/{train,validation}/class/x.jpg) on the Beam engine
  (trainer/prepare/beam_convert.py). JPEG and PNG bytes are kept as they are; labels are 0-based
  (label_offset 0); the training images' mean and stddev go into dataset.json.

  Args:
    options: Beam PipelineOptions (default: DirectRunner on every core).
    skip_unreadable, overwrite, shuffle_seed, lease: as in beam_convert.convert.

  Returns:
    The dataset.json dict.

  Raises:
    PipelineError: no usable tree, an existing conversion in output_dir, or a file that does
      not decode as an image (named).
  """
  if not source_dir or not tf.io.gfile.isdir(source_dir):
    raise PipelineError('image_folder needs --source_dir pointing at a folder-per-class tree.')
  splits, class_names = _list_image_folder(source_dir, validation_fraction, skip_unreadable)
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
      overwrite=overwrite, lease=lease)
