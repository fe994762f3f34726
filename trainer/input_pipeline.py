"""tf.data input_fns for image TFRecords in the ImageNet schema that Cloud TPU users already have,
and for the token-id TFRecords of `trainer.prepare text`.

Image records are tf.train.Examples with at least `image/encoded` (JPEG/PNG bytes) and
`image/class/label` (int64); the other keys (`image/format`, `image/height`, ...) are ignored here.
Text records hold `text/token_ids` (int64 list) and `text/class/label` (int64).
input_fns return (features, labels) with static shapes, as TPUs require:
  images: features['image']: uint8 (data.image_dtype) [params['batch_size'], image_size,
          image_size, 3], pixels on the 0-255 scale (the model_fn normalizes them)
  text:   features['token_ids']: int32 [params['batch_size'], max_seq_length], 0-padded;
          features['length']: int32 [params['batch_size']]
  features['mask']:  float32 [params['batch_size']], 0.0 marks eval padding
  labels:            int32 [params['batch_size']]
`params['batch_size']` is the per-shard batch size that TPUEstimator passes in.
"""

import tensorflow.compat.v1 as tf

from trainer import preprocessing
from trainer import text as text_lib

AUTOTUNE = tf.data.experimental.AUTOTUNE
_SHUFFLE_BUFFER_DECODED = 10000   # decoded small images: ~2.4 KB each at 28x28x3
_SHUFFLE_BUFFER_ENCODED = 1024    # encoded ImageNet photos: ~110 KB each
_FEATURES = {
    'image/encoded': tf.io.FixedLenFeature([], tf.string),
    'image/class/label': tf.io.FixedLenFeature([], tf.int64),
}
_TEXT_FEATURES = {
    'text/token_ids': tf.io.VarLenFeature(tf.int64),
    'text/class/label': tf.io.FixedLenFeature([], tf.int64),
}


def _checked_label(data, label, key):
  """int32 label minus label_offset, with a check that it lies in [0, num_classes)."""
  label = tf.cast(label, tf.int32) - data.label_offset
  in_range = tf.logical_and(label >= 0, label < data.num_classes)
  check = tf.debugging.Assert(in_range, [
      key + ' minus label_offset is outside [0, num_classes): label_offset =',
      data.label_offset, 'num_classes =', data.num_classes, 'label after offset =', label,
      '(ImageNet converters write 1..1000: use --label_offset=1 with --num_classes=1000)'])
  with tf.control_dependencies([check]):
    return tf.identity(label)


def _parse(data, serialized):
  """Parses one record; returns (encoded image bytes, int32 label in [0, num_classes))."""
  parsed = tf.io.parse_single_example(serialized, _FEATURES)
  return parsed['image/encoded'], _checked_label(data, parsed['image/class/label'],
                                                 'image/class/label')


def _parse_and_decode(data, serialized):
  """Parses one record; returns (uint8 [h, w, 3] image, int32 label in [0, num_classes))."""
  encoded, label = _parse(data, serialized)
  return preprocessing.decode_image(encoded), label


def _parse_text(data, serialized):
  """Parses one text record into fixed-shape features: the first max_seq_length ids, 0-padded."""
  parsed = tf.io.parse_single_example(serialized, _TEXT_FEATURES)
  ids = tf.cast(tf.sparse.to_dense(parsed['text/token_ids']), tf.int32)[:data.max_seq_length]
  in_vocabulary = tf.reduce_all(tf.logical_and(ids >= 0, ids < data.vocab_size))
  check = tf.debugging.Assert(in_vocabulary, [
      'text/token_ids holds ids outside [0, vocab_size), vocab_size =', data.vocab_size,
      'ids:', ids, '(the records and vocab.txt come from different prepare runs?)'], summarize=8)
  with tf.control_dependencies([check]):
    length = tf.size(ids)
  ids = tf.pad(ids, [[0, data.max_seq_length - length]], constant_values=text_lib.PAD_ID)
  features = {'token_ids': tf.reshape(ids, [data.max_seq_length]), 'length': length,
              'mask': tf.constant(1.0)}
  return features, _checked_label(data, parsed['text/class/label'], 'text/class/label')


def _preprocess(data, is_training, image, label):
  """image: decoded uint8 [h, w, 3] (cache_decoded) or the encoded bytes."""
  preprocess = (preprocessing.preprocess_image if image.dtype == tf.uint8
                else preprocessing.preprocess_encoded)
  image = preprocess(
      image, is_training, data.image_size, train_crop=data.train_crop,
      crop_padding=data.crop_padding, eval_crop_fraction=data.eval_crop_fraction,
      random_flip=data.random_flip, color_distortion=data.color_distortion)
  return {'image': image, 'mask': tf.constant(1.0)}, label


def _fake_dataset(data, is_training, num_examples):
  """Random uint8 images (or token ids of random lengths) with random labels; one fixed
  example set repeated (cheap)."""
  labels = tf.random.stateless_uniform([64], seed=[3, 4], maxval=data.num_classes, dtype=tf.int32)
  if data.modality == 'text':
    length = tf.random.stateless_uniform([64], seed=[5, 6], minval=1,
                                         maxval=data.max_seq_length + 1, dtype=tf.int32)
    ids = tf.random.stateless_uniform([64, data.max_seq_length], seed=[1, 2], minval=2,
                                      maxval=data.vocab_size, dtype=tf.int32)
    ids *= tf.sequence_mask(length, data.max_seq_length, dtype=tf.int32)
    features = {'token_ids': ids, 'length': length, 'mask': tf.ones([64])}
  else:
    pixels = tf.random.stateless_uniform([64, data.image_size, data.image_size, 3], seed=[1, 2],
                                         maxval=256, dtype=tf.int32)
    features = {'image': tf.cast(pixels, tf.uint8), 'mask': tf.ones([64])}
  dataset = tf.data.Dataset.from_tensor_slices((features, labels))
  dataset = dataset.repeat()
  return dataset if is_training else dataset.take(num_examples)


def _eval_padding(data, count):
  """`count` all-zero examples with mask 0: fixed-shape filler that the metrics ignore."""
  if data.modality == 'text':
    features = {'token_ids': tf.zeros([data.max_seq_length], tf.int32),
                'length': tf.constant(0, tf.int32), 'mask': tf.constant(0.0)}
  else:
    features = {'image': tf.zeros([data.image_size, data.image_size, 3], tf.uint8),
                'mask': tf.constant(0.0)}
  return tf.data.Dataset.from_tensors((features, tf.constant(0, tf.int32))).repeat(count)


def _record_dataset(pattern, is_training):
  """Interleaved TFRecord shards matching `pattern`; shuffled file order in training."""
  files = tf.data.Dataset.list_files(pattern, shuffle=is_training)
  return files.interleave(
      lambda f: tf.data.TFRecordDataset(f, buffer_size=8 * 1024 * 1024),
      cycle_length=16, num_parallel_calls=AUTOTUNE)


def _cast_images(features, dtype):
  features = dict(features)
  features['image'] = tf.cast(features['image'], dtype)
  return features


def with_host_options(dataset):
  """`dataset` with each op of its functions on one thread: the map already runs on every core,
  one example per thread, and splitting a single small image's decode or resize over the cores
  as well costs more in hand-offs than it gains (1.3x slower here; BENCHMARKS.md)."""
  options = tf.data.Options()
  # `threading` since TF 2.6; TF 1.15 has only `experimental_threading`.
  threading = getattr(options, 'threading', None) or options.experimental_threading
  threading.max_intra_op_parallelism = 1
  return dataset.with_options(options)


def input_fn_builder(data, is_training, global_batch_size=None):
  """Returns an input_fn(params) for TPUEstimator.

  Training repeats forever, shuffles and drops the last partial batch. Evaluation reads each
  example exactly once in file order and appends mask-0 padding up to a multiple of
  `global_batch_size`, so with `eval_steps = ceil(num_eval_examples / global_batch_size)` every
  example counts once and no batch is ragged (TPU evaluation needs fixed shapes).

  Args:
    data: `trainer.config.DataConfig`.
    is_training: Python bool.
    global_batch_size: eval batch size summed over shards (required when not training).

  Returns:
    input_fn(params) -> tf.data.Dataset of (features, labels) batches of params['batch_size'].
  """
  def input_fn(params):
    batch_size = params['batch_size']
    num_examples = data.num_train_examples if is_training else data.num_eval_examples
    if data.fake_data:
      dataset = _fake_dataset(data, is_training, num_examples)
    elif data.modality == 'text':
      dataset = _record_dataset(data.file_pattern(is_training), is_training)
      dataset = dataset.map(lambda r: _parse_text(data, r), num_parallel_calls=AUTOTUNE)
      # Token ids are small: keep them in memory after the first pass.
      dataset = dataset.cache()
      if is_training:
        dataset = dataset.shuffle(_SHUFFLE_BUFFER_DECODED).repeat()
    else:
      dataset = _record_dataset(data.file_pattern(is_training), is_training)
      if data.cache_decoded:
        # Decoded once, kept in host RAM: later epochs only crop and flip.
        dataset = dataset.map(lambda r: _parse_and_decode(data, r), num_parallel_calls=AUTOTUNE)
        dataset = dataset.cache()
      else:
        # Decoded in the preprocessing map, so a JPEG training crop decodes only its window.
        dataset = dataset.map(lambda r: _parse(data, r), num_parallel_calls=AUTOTUNE)
      if is_training:
        dataset = dataset.shuffle(
            _SHUFFLE_BUFFER_DECODED if data.cache_decoded else _SHUFFLE_BUFFER_ENCODED)
        dataset = dataset.repeat()
      dataset = dataset.map(lambda image, label: _preprocess(data, is_training, image, label),
                            num_parallel_calls=AUTOTUNE)
    if not is_training:
      padded_total = -(-num_examples // global_batch_size) * global_batch_size
      dataset = dataset.concatenate(_eval_padding(data, padded_total - num_examples))
    dataset = dataset.batch(batch_size, drop_remainder=True)
    if data.modality == 'image' and data.image_dtype != 'uint8':
      dataset = dataset.map(lambda features, labels: (_cast_images(features, data.image_dtype),
                                                      labels), num_parallel_calls=AUTOTUNE)
    return with_host_options(dataset.prefetch(AUTOTUNE))

  return input_fn


def serving_input_receiver_fn_builder(data):
  """Returns a serving_input_receiver_fn whose signature input is
    images: `image_bytes`, a string [batch] of encoded JPEG/PNG images, preprocessed exactly like
      evaluation images (uint8; the model normalizes them);
    text: `text`, a string [batch] of raw UTF-8 texts, tokenized in the graph by
      `trainer.text.texts_to_ids` with the data set's vocab.txt (embedded in the SavedModel).
  """
  if data.modality == 'text':
    vocabulary = text_lib.read_vocabulary(data.vocab_path)

    def text_serving_input_receiver_fn():
      texts = tf.placeholder(tf.string, [None], name='text')
      token_ids, length = text_lib.texts_to_ids(texts, vocabulary, data.max_seq_length)
      return tf.estimator.export.ServingInputReceiver(
          {'token_ids': token_ids, 'length': length}, {'text': texts})
    return text_serving_input_receiver_fn

  def serving_input_receiver_fn():
    image_bytes = tf.placeholder(tf.string, [None], name='image_bytes')
    images = tf.map_fn(
        lambda b: preprocessing.preprocess_image(
            preprocessing.decode_image(b), False, data.image_size,
            eval_crop_fraction=data.eval_crop_fraction),
        image_bytes, dtype=tf.uint8, back_prop=False)
    return tf.estimator.export.ServingInputReceiver({'image': images}, {'image_bytes': image_bytes})

  return serving_input_receiver_fn
