"""TFRecords of this pipeline -> the NumPy arrays `trainer.train_keras` reads where TensorFlow is
not installed (trainer/data/arrays.py has the format): `python -m trainer.prepare arrays
--source_dir=DATA --output_dir=DIR [--image_size=N] [--crop_padding=0]`.

Each example goes through the pipeline's own preprocessing (trainer/data/preprocessing.py:
training's for the train split, evaluation's for the validation split) once, in the order the
pipeline's evaluation reads the shards. Arrays
hold one view of each image, so a data set whose training preprocessing is random (a
distorted-bbox crop, a crop offset, a flip, colour jitter) is refused: tf.data gives another view
at every epoch, which stored arrays cannot.
"""

import io
import os

import numpy as np
import tensorflow.compat.v1 as tf

from trainer.data import arrays
from trainer.data import data_config as data_config_lib
from trainer.data import dataset_json
from trainer.data import preprocessing
from trainer.data import records
from trainer.data import shards
from trainer.errors import PipelineError
from trainer.models.specs import features as feature_names
from trainer.storage import staged

_BATCH = 1000


def _random_parts(data):
  """What makes `data`'s training preprocessing random (list of str; empty: deterministic)."""
  parts = []
  if data.train_crop == 'distorted_bbox':
    parts.append('train_crop distorted_bbox (a random crop)')
  elif data.crop_padding:
    parts.append('crop_padding %d (a random crop offset)' % data.crop_padding)
  if data.random_flip:
    parts.append('random_flip true')
  if data.color_distortion:
    parts.append('color_distortion true')
  return parts


def _split_dataset(data, is_training):
  """(inputs, labels) examples of a split, once each, preprocessed, in the order the pipeline's
  evaluation reads a split (`trainer.data.records.record_dataset`'s interleave of the shards)."""
  dataset = records.record_dataset(data.file_pattern(is_training), False)
  if data.modality == 'text':
    def token_ids(serialized):
      features, label = records.parse_text_record(data, serialized)
      return features[feature_names.TOKEN_IDS], label
    return dataset.map(token_ids)

  def preprocess(serialized):
    image, label = records.parse_and_decode_image_record(data, serialized)
    image = preprocessing.preprocess_image(
        image, is_training, data.image_size, train_crop=data.train_crop,
        crop_padding=data.crop_padding, eval_crop_fraction=data.eval_crop_fraction,
        random_flip=data.random_flip, color_distortion=data.color_distortion,
        seed=tf.constant([0, 0], tf.int64) if is_training else None)
    return image, label
  return dataset.map(preprocess, num_parallel_calls=tf.data.experimental.AUTOTUNE)


def _read_split(data, is_training):
  """The split as numpy arrays (uint8 images or int32 token ids, int32 labels)."""
  graph = tf.Graph()
  with graph.as_default():
    batches = tf.data.make_one_shot_iterator(
        _split_dataset(data, is_training).batch(_BATCH)).get_next()
    inputs, labels = [], []
    with tf.Session(graph=graph) as session:
      while True:
        try:
          x, y = session.run(batches)
        except tf.errors.OutOfRangeError:
          break
        inputs.append(x)
        labels.append(y)
  return (np.concatenate(inputs).astype(np.int32 if data.modality == 'text' else np.uint8),
          np.concatenate(labels).astype(np.int32))


def _same_place(a, b):
  a, b = a.rstrip('/'), b.rstrip('/')
  if '://' in a or '://' in b:
    return a == b
  return os.path.realpath(a) == os.path.realpath(b)


def check_paths(source_dir, output_dir):
  """Refuses a missing --source_dir, and an --output_dir that is --source_dir (writing there
  would first delete the TFRecords to read). Run before any check of the output.

  Raises:
    PipelineError: naming the flag.
  """
  if not source_dir:
    raise PipelineError('arrays needs --source_dir: a data directory of trainer.prepare '
                        '(TFRecords and dataset.json).')
  if _same_place(source_dir, output_dir):
    raise PipelineError('--output_dir=%s is --source_dir: the arrays go into another directory '
                        '(writing them there would first delete the TFRecords they are read '
                        'from).' % output_dir)


def prepare(source_dir, output_dir, image_size=None, crop_padding=None, overwrite=False):
  """Writes the arrays of the TFRecord data directory `source_dir` into `output_dir`; returns the
  dataset.json dict written there.

  Args:
    source_dir: a data directory of `trainer.prepare` (TFRecords and dataset.json).
    output_dir: where train.npz, validation.npz and dataset.json go.
    image_size: images' height and width (default: dataset.json's, as the trainers choose it).
    crop_padding: replaces dataset.json's (0 freezes a pad_and_crop training crop, as make
      train's recipes train).
    overwrite: replace an earlier conversion in output_dir.

  Raises:
    PipelineError: no data or dataset.json, output_dir is source_dir, random training
      preprocessing, output_dir holds a conversion and not `overwrite`.
  """
  check_paths(source_dir, output_dir)
  info = dataset_json.read(source_dir)
  if not info:
    raise PipelineError('%s has no dataset.json: give a data directory that trainer.prepare '
                        'wrote.' % source_dir)
  if arrays.is_arrays(info):
    raise PipelineError('%s already holds arrays: give the TFRecord directory they came from.'
                        % source_dir)
  text = info.get('modality', 'image') == 'text'
  if not text:
    image_size = image_size or dataset_json.image_size(info)
    if not image_size:
      raise PipelineError('%s records no image size: give --image_size.' % source_dir)
  overrides = {} if crop_padding is None else {'crop_padding': crop_padding}
  data = data_config_lib.from_dataset_json(source_dir, info, 0 if text else image_size,
                                           **overrides)
  random_parts = [] if text else _random_parts(data)
  if random_parts:
    raise PipelineError(
        'the training preprocessing of %s is random (%s): arrays hold one view of each image, '
        'so they would train without that augmentation. Freeze it (--crop_padding=0 for a '
        'pad_and_crop data set whose dataset.json sets no flip or colour jitter), or train from '
        'the TFRecords with tf.data.' % (source_dir, ', '.join(random_parts)))
  shards.check_shards_exist(data, (True, False))  # before output_dir loses anything
  shards.prepare_output_dir(output_dir, overwrite)
  out = {k: v for k, v in info.items() if k not in ('train_pattern', 'eval_pattern')}
  out.update({'format': arrays.FORMAT, 'source': source_dir, 'label_offset': 0})
  for is_training in (True, False):
    inputs, labels = _read_split(data, is_training)
    count = 'num_train_examples' if is_training else 'num_eval_examples'
    if len(labels) != info[count]:
      raise PipelineError('%s holds %d %s examples, its dataset.json says %d.' % (
          source_dir, len(labels), 'training' if is_training else 'evaluation', info[count]))
    if not text and np.array_equal(inputs[..., :1].repeat(3, axis=-1), inputs):
      inputs = inputs[..., :1]  # grey images: one channel stored, a third of the bytes
    buffer = io.BytesIO()  # zipfile seeks back, which a gs:// file being written cannot
    np.savez_compressed(buffer, **{arrays.INPUTS: inputs, arrays.LABELS: labels})
    with staged.staged_file(arrays.path_of(output_dir, is_training), 'wb') as f:
      f.write(buffer.getvalue())
  if not text:
    out['image_size'] = image_size
    out['preprocessing'] = {k: getattr(data, k) for k in data_config_lib.PREPROCESSING_FIELDS}
  dataset_json.write(output_dir, out)
  return out
