"""The TFRecord schemas, written by `trainer.prepare` and parsed by the input_fns.

Image records are tf.train.Examples in the ImageNet schema that Cloud TPU users already have:
`image/encoded` (JPEG/PNG bytes), `image/format`, `image/height`, `image/width`,
`image/channels`, `image/colorspace`, `image/class/label` (int64), `image/class/synset` (the
class name) and `image/filename`. The input_fns read only `image/encoded` and `image/class/label`.

Text records hold `text/token_ids` (int64 list: ids of the first max_seq_length tokens, no
padding stored), `text/class/label` (int64) and `text/raw` (the original UTF-8 text).
"""

import tensorflow.compat.v1 as tf

from trainer.data import preprocessing
from trainer.data import tokenizer
from trainer.models import features as features_lib

IMAGE_ENCODED = 'image/encoded'
IMAGE_LABEL = 'image/class/label'
IMAGE_FILENAME = 'image/filename'
TEXT_TOKEN_IDS = 'text/token_ids'
TEXT_LABEL = 'text/class/label'
TEXT_RAW = 'text/raw'
_IMAGE_FEATURES = {
    IMAGE_ENCODED: tf.io.FixedLenFeature([], tf.string),
    IMAGE_LABEL: tf.io.FixedLenFeature([], tf.int64),
}
_TEXT_FEATURES = {
    TEXT_TOKEN_IDS: tf.io.VarLenFeature(tf.int64),
    TEXT_LABEL: tf.io.FixedLenFeature([], tf.int64),
}


def _bytes_feature(value):
  return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))


def _int_feature(values):
  return tf.train.Feature(int64_list=tf.train.Int64List(value=values))


def image_example(encoded, image_format, height, width, channels, label, class_name, filename):
  """One tf.train.Example in the ImageNet schema.

  Args:
    encoded: bytes of the encoded image.
    image_format: 'JPEG' or 'PNG'.
    height, width, channels: the decoded image's shape (channels 1 or 3).
    label: int, written as given (this project's converters write 0-based labels and record
      label_offset 0 in dataset.json).
    class_name, filename: str.
  """
  return tf.train.Example(features=tf.train.Features(feature={
      IMAGE_ENCODED: _bytes_feature(encoded),
      'image/format': _bytes_feature(image_format.encode()),
      'image/height': _int_feature([height]),
      'image/width': _int_feature([width]),
      'image/channels': _int_feature([channels]),
      'image/colorspace': _bytes_feature(b'RGB' if channels == 3 else b'Grayscale'),
      IMAGE_LABEL: _int_feature([label]),
      'image/class/synset': _bytes_feature(class_name.encode()),
      IMAGE_FILENAME: _bytes_feature(filename.encode()),
  }))


def text_example(token_ids, label, text):
  """One text tf.train.Example: token ids (list of int), 0-based label (int), raw text (str)."""
  return tf.train.Example(features=tf.train.Features(feature={
      TEXT_TOKEN_IDS: _int_feature(token_ids),
      TEXT_LABEL: _int_feature([label]),
      TEXT_RAW: _bytes_feature(text.encode('utf-8')),
  }))


def host_shard(num_items, host_id, num_hosts):
  """How many of `num_items` items, dealt round-robin (item i to host i % num_hosts), host
  `host_id` gets."""
  return num_items // num_hosts + (1 if host_id < num_items % num_hosts else 0)


def host_files(pattern, host_id, num_hosts, is_training=True):
  """What host `host_id` of `num_hosts` reads of the shards matching `pattern`.

  Training shards are split by file when they divide evenly between the hosts (every
  num_hosts-th file in sorted order from the host_id-th), so each host reads only its files and
  every host's share is the same; otherwise, and always for evaluation, each host reads every
  file in sorted order and keeps every num_hosts-th record from the host_id-th, so the hosts
  together read each record exactly once and `host_shard` gives each host's count.

  Returns:
    (sorted list of file paths, 'files' or 'records': how the host's part is cut).
  """
  paths = sorted(tf.io.gfile.glob(pattern))
  if num_hosts == 1:
    return paths, 'files'
  if is_training and len(paths) % num_hosts == 0:
    return paths[host_id::num_hosts], 'files'
  return paths, 'records'


def record_dataset(pattern, is_training, host_id=0, num_hosts=1, seed=None):
  """Interleaved TFRecord shards matching `pattern` (serialized records): this host's part
  (`host_files`); in training, when the host reads whole files, their order shuffled with `seed`
  (None: unseeded), else file order. The interleave is deterministic: the same files in the
  same order give the same records in the same order."""
  interleave = dict(cycle_length=16, num_parallel_calls=tf.data.experimental.AUTOTUNE)
  # Plain ops: no AutoGraph rewrite (trainer.data.input_fn says why).
  read = tf.autograph.experimental.do_not_convert(
      lambda f: tf.data.TFRecordDataset(f, buffer_size=8 * 1024 * 1024))
  if num_hosts == 1:
    return tf.data.Dataset.list_files(pattern, shuffle=is_training, seed=seed).interleave(
        read, **interleave)
  paths, split = host_files(pattern, host_id, num_hosts, is_training)
  files = tf.data.Dataset.from_tensor_slices(paths)
  if split == 'records':
    # The same record order on every host (no file shuffle), so that the shards partition it;
    # training shuffles the records after the shard.
    return files.interleave(read, **interleave).shard(num_hosts, host_id)
  if is_training:
    files = files.shuffle(len(paths), seed=seed)
  return files.interleave(read, **interleave)


def _checked_label(data, label, key):
  """int32 label minus label_offset, with a check that it lies in [0, num_classes)."""
  label = tf.cast(label, features_lib.LABEL_DTYPE) - data.label_offset
  in_range = tf.logical_and(label >= 0, label < data.num_classes)
  check = tf.debugging.Assert(in_range, [
      key + ' minus label_offset is outside [0, num_classes): label_offset =',
      data.label_offset, 'num_classes =', data.num_classes, 'label after offset =', label,
      '(ImageNet converters write 1..1000: use --label_offset=1 with --num_classes=1000)'])
  with tf.control_dependencies([check]):
    return tf.identity(label)


def parse_image_record(data, serialized):
  """Parses one image record.

  Args:
    data: `trainer.data.data_config.DataConfig`.
    serialized: string scalar.

  Returns:
    (encoded image bytes: string scalar, label: int32 scalar in [0, num_classes)); the label
    check fails at run time with InvalidArgumentError.
  """
  parsed = tf.io.parse_single_example(serialized, _IMAGE_FEATURES)
  return parsed[IMAGE_ENCODED], _checked_label(data, parsed[IMAGE_LABEL], IMAGE_LABEL)


def parse_and_decode_image_record(data, serialized):
  """`parse_image_record` with the image decoded: (uint8 [h, w, 3], int32 label)."""
  encoded, label = parse_image_record(data, serialized)
  return preprocessing.decode_image(encoded), label


def parse_encoded_image(serialized):
  """The encoded image bytes (string scalar) of one image record; its label is not read (records
  to predict may have none)."""
  return tf.io.parse_single_example(
      serialized, {IMAGE_ENCODED: _IMAGE_FEATURES[IMAGE_ENCODED]})[IMAGE_ENCODED]


def parse_text_record(data, serialized):
  """Parses one text record into the text features of `models.features` (one example): the first
  max_seq_length ids padded with tokenizer.PAD_ID, their count and mask 1.

  Returns:
    (features dict, int32 label scalar); ids outside [0, vocab_size) or a label out of range fail
    at run time with InvalidArgumentError.
  """
  parsed = tf.io.parse_single_example(serialized, _TEXT_FEATURES)
  features = dict(text_features(data, parsed[TEXT_TOKEN_IDS]),
                  **{features_lib.MASK: tf.constant(1.0)})
  return features, _checked_label(data, parsed[TEXT_LABEL], TEXT_LABEL)


def parse_text_ids(data, serialized):
  """`parse_text_record`'s features without mask and label (records to predict may have no
  label)."""
  parsed = tf.io.parse_single_example(serialized, {TEXT_TOKEN_IDS: _TEXT_FEATURES[TEXT_TOKEN_IDS]})
  return text_features(data, parsed[TEXT_TOKEN_IDS])


def text_features(data, token_ids):
  """The token ids and length of one example (the serving features) from its stored ids (int64
  SparseTensor [n]), checked to lie in [0, vocab_size)."""
  ids = tf.cast(tf.sparse.to_dense(token_ids), tf.int32)[:data.max_seq_length]
  in_vocabulary = tf.reduce_all(tf.logical_and(ids >= 0, ids < data.vocab_size))
  check = tf.debugging.Assert(in_vocabulary, [
      TEXT_TOKEN_IDS + ' holds ids outside [0, vocab_size), vocab_size =', data.vocab_size,
      'ids:', ids, '(the records and vocab.txt come from different prepare runs?)'], summarize=8)
  with tf.control_dependencies([check]):
    length = tf.size(ids)
  ids = tf.pad(ids, [[0, data.max_seq_length - length]], constant_values=tokenizer.PAD_ID)
  return {features_lib.TOKEN_IDS: tf.reshape(ids, [data.max_seq_length]),
          features_lib.LENGTH: length}


def describe_record(serialized, label_offset=0):
  """(name, label or None, raw text or None) of one serialized record, read in Python: the name is
  image/filename (None when absent); the label is the stored class minus label_offset."""
  feature = tf.train.Example.FromString(serialized).features.feature
  name = text = label = None
  if IMAGE_FILENAME in feature:
    name = feature[IMAGE_FILENAME].bytes_list.value[0].decode('utf-8', 'replace')
  if TEXT_RAW in feature:
    text = feature[TEXT_RAW].bytes_list.value[0].decode('utf-8', 'replace')
  for key in (IMAGE_LABEL, TEXT_LABEL):
    if key in feature and feature[key].int64_list.value:
      label = int(feature[key].int64_list.value[0]) - label_offset
  return name, label, text
