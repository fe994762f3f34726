"""dataset.json: the metadata `trainer.prepare` writes next to the shards and the trainer reads, so
users never edit constants (class count, split sizes, image shape, label offset, preprocessing).

`read` checks every field the pipeline reads against `SCHEMA` (one table: type, range, and the
modality that requires it) before any work, so a damaged or hand-edited file is refused with the
file, the field, the value and the fix instead of failing later inside TensorFlow.
"""

import collections
import json
import math

from trainer.errors import PipelineError
from trainer.storage import json_files

FILENAME = 'dataset.json'
# "format": TFRecord shards (the default), or the NumPy arrays of `trainer.prepare arrays`
# (trainer/data/arrays.py).
TFRECORD_FORMAT = 'tfrecord'
ARRAYS_FORMAT = 'arrays'
FORMATS = (TFRECORD_FORMAT, ARRAYS_FORMAT)

# Upper bounds, each far above any real data set and far below what would overflow or exhaust
# memory, so a typo (10**12 classes) is refused before a graph is built:
# - classes: the largest public label sets have ~10**5 classes (ImageNet-21k 21841, iNaturalist
#   10**4); a ResNet-50 classifier for 10**6 classes is already 2048 x 10**6 float32 = 8 GB.
MAX_NUM_CLASSES = 10**6
# - examples per split: JFT-3B has 3 * 10**9; more would not fit a Python list of shards' counts.
MAX_EXAMPLES = 10**11
# - pixels per side: 2**14 is 800 MB per uint8 RGB image before any resize.
MAX_IMAGE_SIZE = 2**14
# - tokens per text and vocabulary entries: the embedding table of 10**7 x 256 float32 is 10 GB.
MAX_SEQ_LENGTH = 10**5
MAX_VOCAB_SIZE = 10**7

# How a field may look: `kind` int, number (int or float, finite), bool, str, list_of_str,
# rgb (3 finite numbers), dict, or choice (one of `choices`); [low, high] bounds numbers;
# `required` names the modality ('text', 'image') that needs it, None when a flag can stand in.
Field = collections.namedtuple('Field', ['kind', 'low', 'high', 'required', 'choices'])
Field.__new__.__defaults__ = (None, None, None, None)

SCHEMA = {
    'modality': Field('choice', choices=('image', 'text')),
    'format': Field('choice', choices=FORMATS),
    'num_classes': Field('int', 2, MAX_NUM_CLASSES),
    'label_offset': Field('int', 0, MAX_NUM_CLASSES),
    'num_train_examples': Field('int', 1, MAX_EXAMPLES),
    'num_eval_examples': Field('int', 1, MAX_EXAMPLES),
    'image_size': Field('int', 1, MAX_IMAGE_SIZE),
    'image_height': Field('int', 1, MAX_IMAGE_SIZE),
    'image_width': Field('int', 1, MAX_IMAGE_SIZE),
    'mean_rgb': Field('rgb', 0.0, 255.0),
    'stddev_rgb': Field('rgb', 0.0, 255.0),
    'class_names': Field('list_of_str'),
    'train_pattern': Field('str'),
    'eval_pattern': Field('str'),
    'max_seq_length': Field('int', 1, MAX_SEQ_LENGTH),
    'vocab_size': Field('int', 3, MAX_VOCAB_SIZE, required='text'),
    'vocab_file': Field('str'),
    'preprocessing': Field('dict'),
}
# The `preprocessing` object's fields (trainer.data.data_config.DataConfig's names).
PREPROCESSING_SCHEMA = {
    'train_crop': Field('choice', choices=('distorted_bbox', 'pad_and_crop')),
    'crop_padding': Field('int', 0, MAX_IMAGE_SIZE),
    'eval_crop_fraction': Field('number', 1e-6, 1.0),
    'random_flip': Field('bool'),
    'color_distortion': Field('bool'),
}
_KIND_TEXT = {'int': 'an integer', 'number': 'a number', 'bool': 'true or false',
              'str': 'a non-empty string', 'list_of_str': 'a list of strings',
              'rgb': 'a list of 3 numbers', 'dict': 'a JSON object'}


def path_of(data_dir):
  """<data_dir>/dataset.json (str), local or gs://."""
  return '%s/%s' % (data_dir.rstrip('/'), FILENAME)


def write(output_dir, info):
  """Writes `info` (a JSON-serialisable dict) to <output_dir>/dataset.json, through a temporary
  file and a rename (`trainer.storage.json_files`), so a reader never sees half a file."""
  json_files.write(path_of(output_dir), info)


def read(data_dir):
  """Returns the dict in <data_dir>/dataset.json, checked by `validate`, or None if there is no
  such file.

  Raises:
    PipelineError: the file is not JSON, not an object, or a field breaks `SCHEMA`.
  """
  path = path_of(data_dir)
  try:
    info = json_files.read(path)
  except ValueError as e:  # json's errors and UnicodeDecodeError
    raise PipelineError('%s is not valid JSON (%s). %s' % (path, e, _fix(path)))
  if info is json_files.MISSING:
    return None
  validate(info, path)
  return info


def _fix(path):
  return ('Re-run `python -m trainer.prepare SOURCE --output_dir %s --overwrite` to write it '
          'again, or fix it by hand.' % path.rpartition('/')[0])


def validate(info, path):
  """Checks a dataset.json dict against `SCHEMA` (fields absent are fine unless `required` for
  its modality; fields the pipeline does not read are ignored).

  Args:
    info: the parsed JSON.
    path: str, the file it came from, for the messages.

  Raises:
    PipelineError: naming the file, the field, its value, what it must be and the fix.
  """
  if not isinstance(info, dict):
    raise PipelineError('%s holds %s, not a JSON object of fields. %s'
                        % (path, json.dumps(info)[:40], _fix(path)))
  _check_fields(info, SCHEMA, '', path)
  preprocessing = info.get('preprocessing')
  if isinstance(preprocessing, dict):
    _check_fields(preprocessing, PREPROCESSING_SCHEMA, 'preprocessing.', path)
  modality = info.get('modality', 'image')
  for name, field in sorted(SCHEMA.items()):
    if field.required == modality and name not in info:
      raise PipelineError('%s has no "%s", which %s data needs. %s'
                          % (path, name, modality, _fix(path)))
  names, count = info.get('class_names'), info.get('num_classes')
  if names is not None and count is not None and len(names) != count:
    raise PipelineError('%s: "class_names" lists %d names but "num_classes" is %d. %s'
                        % (path, len(names), count, _fix(path)))


def _check_fields(info, schema, prefix, path):
  for name, field in sorted(schema.items()):
    if name in info and not _fits(info[name], field):
      raise PipelineError('%s: "%s%s" is %s; it must be %s. %s' % (
          path, prefix, name, json.dumps(info[name])[:80], _expected(field), _fix(path)))


def _fits(value, field):
  """Whether `value` is of `field`'s kind and within its bounds."""
  if field.kind == 'choice':
    return value in field.choices
  if field.kind == 'bool':
    return isinstance(value, bool)
  if field.kind in ('str', 'list_of_str', 'dict'):
    return ((field.kind == 'str' and isinstance(value, str) and bool(value)) or
            (field.kind == 'dict' and isinstance(value, dict)) or
            (field.kind == 'list_of_str' and isinstance(value, list) and
             all(isinstance(v, str) for v in value)))
  values = value if field.kind == 'rgb' else [value]
  if field.kind == 'rgb' and (not isinstance(value, list) or len(value) != 3):
    return False
  for v in values:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
      return False
    if field.kind == 'int' and not isinstance(v, int):
      return False
    if not math.isfinite(v) or not field.low <= v <= field.high:
      return False
  return True


def _expected(field):
  if field.kind == 'choice':
    return 'one of %s' % ', '.join('"%s"' % c for c in field.choices)
  text = _KIND_TEXT[field.kind]
  if field.low is not None:
    text += ' in [%s, %s]' % (field.low, field.high)
  return text


# The largest training size taken from the stored photos when neither --image_size nor
# dataset.json's image_size sets one: phone photos (~4000 px) would train at their full size,
# thousands of times the compute of ImageNet's 224 px, and exhaust memory at any useful batch.
MAX_DERIVED_IMAGE_SIZE = 512


def image_size(info, limit=MAX_DERIVED_IMAGE_SIZE):
  """The square size images train at, from a dataset.json dict: its `image_size` (the training
  size, e.g. 224 for ImageNet) if set, else the larger side of the median stored image
  (`image_height`, `image_width`: Fashion-MNIST's 28).

  Args:
    info: the dataset.json dict.
    limit: the largest size taken from the stored images (None: no limit, for a caller that
      has its size from a flag).

  Returns:
    int pixels, or None when `info` says neither (text data, or no dataset.json).

  Raises:
    PipelineError: the median stored image is larger than `limit` and nothing sets the size.
  """
  if info.get('image_size'):
    return info['image_size']
  if 'image_height' not in info:
    return None
  size = max(info['image_height'], info.get('image_width', 0))
  if limit and size > limit:
    raise PipelineError(
        'no --image_size given, and the median stored image is %dx%d: training at %d px would '
        'cost about %dx the compute of ImageNet\'s 224 px per image and exhaust memory at any '
        'useful batch. Pass --image_size (224 is the usual choice; 64-128 trains in minutes on a '
        'CPU), which resizes every image to it.'
        % (info['image_width'], info['image_height'], size, round((size / 224.0) ** 2)))
  return size
