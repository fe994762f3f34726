"""tf.data input_fns for TPUEstimator: image TFRecords in the ImageNet schema and the token-id
TFRecords of `python -m trainer.prepare text` (`trainer.data.records`), turned into the features
of `models.features` with static shapes, as TPUs require.
"""

import hashlib

import tensorflow.compat.v1 as tf

from trainer.data import preprocessing
from trainer.data import records
from trainer.data import tokenizer
from trainer.host import threads as host_threads
from trainer.models import features as features_lib

AUTOTUNE = tf.data.experimental.AUTOTUNE
# Every function mapped here is TensorFlow ops under Python conditions on Python values: tf.data's
# AutoGraph pass would rewrite each for nothing, 1-2.5 s of every training or evaluation process
# (BENCHMARKS.md, "The suite").
_plain = tf.autograph.experimental.do_not_convert
_SHUFFLE_BUFFER_DECODED = 10000   # decoded small images: ~2.4 KB each at 28x28x3
_SHUFFLE_BUFFER_ENCODED = 1024    # encoded ImageNet photos: ~110 KB each


def _preprocess(data, is_training, image, label, seed=None):
  """image: decoded uint8 [h, w, 3] (cache_decoded) or the encoded bytes; seed: training: the
  example's int64 [2] seed."""
  preprocess = (preprocessing.preprocess_image if image.dtype == tf.uint8
                else preprocessing.preprocess_encoded)
  image = preprocess(
      image, is_training, data.image_size, train_crop=data.train_crop,
      crop_padding=data.crop_padding, eval_crop_fraction=data.eval_crop_fraction,
      random_flip=data.random_flip, color_distortion=data.color_distortion, seed=seed)
  return {features_lib.IMAGE: image, features_lib.MASK: tf.constant(1.0)}, label


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
    features = {features_lib.TOKEN_IDS: ids, features_lib.LENGTH: length,
                features_lib.MASK: tf.ones([64])}
  else:
    pixels = tf.random.stateless_uniform([64, data.image_size, data.image_size, 3], seed=[1, 2],
                                         maxval=256, dtype=tf.int32)
    features = {features_lib.IMAGE: tf.cast(pixels, tf.uint8), features_lib.MASK: tf.ones([64])}
  dataset = tf.data.Dataset.from_tensor_slices((features, labels))
  dataset = dataset.repeat()
  return dataset if is_training else dataset.take(num_examples)


def _eval_padding(data, count):
  """`count` all-zero examples with mask 0: fixed-shape filler that the metrics ignore."""
  if data.modality == 'text':
    features = {features_lib.TOKEN_IDS: tf.zeros([data.max_seq_length], tf.int32),
                features_lib.LENGTH: tf.constant(0, tf.int32), features_lib.MASK: tf.constant(0.0)}
  else:
    features = {features_lib.IMAGE: tf.zeros([data.image_size, data.image_size, 3], tf.uint8),
                features_lib.MASK: tf.constant(0.0)}
  return tf.data.Dataset.from_tensors(
      (features, tf.constant(0, features_lib.LABEL_DTYPE))).repeat(count)


def _cast_images(features, dtype):
  features = dict(features)
  features[features_lib.IMAGE] = tf.cast(features[features_lib.IMAGE], dtype)
  return features


# TF 1.15's tf.data autotuning model can crash the process with a segmentation fault after an
# input pipeline is torn down (a session closing, as Estimator's does after each train() and
# evaluate()): a parallel interleave's element, released later on a worker thread, removes its
# node from the model (Model::RemoveNode) and faults there. Under load that happened within a
# minute of reading and closing pipelines (BUILD.md, "Tests and CI").
_TF1 = tf.__version__.startswith('1.')


def with_host_options(dataset):
  """`dataset` with its functions on a private pool of one thread per usable CPU and each op of
  them on one thread: the map already runs on every core, one example per thread, and splitting
  a single small image's decode or resize over the cores as well costs more in hand-offs than it
  gains (BENCHMARKS.md, input pipeline).

  On TF 1.x the autotuning model is also off (it crashes there, see `_TF1`): an AUTOTUNE map
  then keeps the host's core count of parallel calls and an AUTOTUNE interleave its
  cycle_length, where TF 1.15 starts them, and AUTOTUNE prefetch buffers still grow as the
  consumer waits. Throughput did not change (BENCHMARKS.md).
  """
  options = tf.data.Options()
  # `threading` since TF 2.6; TF 1.15 has only `experimental_threading`.
  threading = getattr(options, 'threading', None) or options.experimental_threading
  threading.max_intra_op_parallelism = 1
  # The map's calls run on a pool of the input's own, one thread per usable CPU: the session's
  # inter-op pool, which they would share otherwise, is one thread on a small host
  # (trainer.host.threads), and the input must not wait behind the training step's ops.
  threading.private_threadpool_size = host_threads.current()[0].logical_cpus
  if _TF1:
    options.experimental_optimization.autotune = False
  return dataset.with_options(options)


def host_of(params):
  """(host_id, num_hosts) of this input_fn call: on a Cloud TPU, TPUEstimator calls the input_fn
  once per host (PER_HOST_V2) with params['context']; elsewhere (0, 1)."""
  context = params.get('context')
  if context is None:
    return 0, 1
  _, host_id, num_hosts, _ = context.current_input_fn_deployment()
  return host_id, num_hosts


def input_stream(params):
  """(stream, num_streams): which of the run's parallel input pipelines this input_fn call
  feeds: the TPU host (`host_of`), or the task of a TF_CONFIG cluster (params['worker'], set by
  `trainer.run.estimator.input_fns`). Each stream shuffles and augments with its own seed."""
  return params.get('worker') or host_of(params)


def stream_seed(seed, stream, start_step):
  """The int64 seed of one input stream: the run's --seed, the stream (`input_stream`) and the
  global step the training call starts from (so each `Estimator.train` call of a train_and_eval
  run, and a resumed run, continues with new shuffles and augmentation instead of replaying the
  first call's). A hash of the three, so different triples do not collide in practice."""
  digest = hashlib.sha256(('%d/%d/%d' % (seed, stream, start_step)).encode()).digest()
  return int.from_bytes(digest[:8], 'little') >> 1


def example_seed(seed, index):
  """int64 [2] seed of the example at position `index` (int64 scalar, counted across epochs) of
  an input stream seeded `seed`: its random numbers are fixed by its place in a deterministic
  stream, whatever the parallelism of the map that draws them."""
  return tf.stack([tf.constant(seed, tf.int64), index])


def input_fn_builder(data, is_training, global_batch_size=None, start_step=0):
  """Returns an input_fn(params) for TPUEstimator.

  Training repeats forever, shuffles and drops the last partial batch; its shuffles and each
  example's augmentation are keyed by `data.seed` and the input stream (`input_stream`), so the
  same seed gives the same batches. Evaluation reads each
  example exactly once in file order and appends mask-0 padding up to a multiple of
  `global_batch_size`, so with `eval_steps = ceil(num_eval_examples / global_batch_size)` every
  example counts once and no batch is ragged (TPU evaluation needs fixed shapes). On a pod slice
  each host reads its own part of the data (`records.record_dataset`) and pads its eval examples
  to its share of those steps.

  Args:
    data: `trainer.data.data_config.DataConfig`.
    is_training: Python bool.
    global_batch_size: eval batch size summed over shards (required when not training).
    start_step: training: the global step this training call starts from (part of the seed).

  Returns:
    input_fn(params) -> tf.data.Dataset of (features, labels) batches of params['batch_size'],
    shaped as `models.features.feature_spec` gives them.
  """
  def input_fn(params):
    batch_size = params['batch_size']
    host_id, num_hosts = host_of(params)
    seed = stream_seed(data.seed, input_stream(params)[0], start_step)
    num_examples = data.num_train_examples if is_training else records.host_shard(
        data.num_eval_examples, host_id, num_hosts)
    if data.fake_data:
      dataset = _fake_dataset(data, is_training, num_examples)
    elif data.modality == 'text':
      dataset = records.record_dataset(data.file_pattern(is_training), is_training, host_id,
                                       num_hosts, seed)
      dataset = dataset.map(_plain(lambda r: records.parse_text_record(data, r)),
                            num_parallel_calls=AUTOTUNE)
      # Token ids are small: keep them in memory after the first pass.
      dataset = dataset.cache()
      if is_training:
        dataset = dataset.shuffle(_SHUFFLE_BUFFER_DECODED, seed=seed).repeat()
    else:
      dataset = records.record_dataset(data.file_pattern(is_training), is_training, host_id,
                                       num_hosts, seed)
      if data.cache_decoded:
        # Decoded once, kept in host RAM: later epochs only crop and flip.
        dataset = dataset.map(_plain(lambda r: records.parse_and_decode_image_record(data, r)),
                              num_parallel_calls=AUTOTUNE)
        dataset = dataset.cache()

      def parse(element):
        """(image, label) of an element: the cached pair, or a record parsed in the
        preprocessing map (one parallel stage, not two; a JPEG crop decodes only its window)."""
        return element if data.cache_decoded else records.parse_image_record(data, element)

      if is_training:
        dataset = dataset.shuffle(
            _SHUFFLE_BUFFER_DECODED if data.cache_decoded else _SHUFFLE_BUFFER_ENCODED,
            seed=seed)
        dataset = dataset.repeat().enumerate().map(
            _plain(lambda index, element: _preprocess(data, True, *parse(element),
                                                      seed=example_seed(seed, index))),
            num_parallel_calls=AUTOTUNE)
      else:
        # map() passes a cached (image, label) pair as two arguments, a record as one.
        dataset = dataset.map(
            _plain(lambda *element: _preprocess(data, False, *parse(
                element if data.cache_decoded else element[0]))),
            num_parallel_calls=AUTOTUNE)
    if not is_training:
      # Every host runs the same eval_steps = ceil(num_eval_examples / global_batch_size).
      padded_total = (-(-data.num_eval_examples // global_batch_size) * global_batch_size //
                      num_hosts)
      dataset = dataset.concatenate(_eval_padding(data, padded_total - num_examples))
    dataset = dataset.batch(batch_size, drop_remainder=True)
    if data.modality == 'image' and data.image_dtype != 'uint8':
      dataset = dataset.map(_plain(lambda features, labels: (
          _cast_images(features, data.image_dtype), labels)), num_parallel_calls=AUTOTUNE)
    return with_host_options(dataset.prefetch(AUTOTUNE))

  return input_fn


def predict_input_fn_builder(data, source):
  """Returns an input_fn(params) for TPUEstimator.predict over the inputs of `source` (a
  `trainer.data.predict_input.PredictSource`), in its order, each read once and preprocessed as
  evaluation preprocesses it (images; token ids and raw texts as `trainer.prepare` and the
  serving signature tokenize them).

  The dataset yields batches of params['batch_size'] with the serving features of
  `models.features` (no mask, no labels); the last batch may be smaller: on a TPU,
  TPUEstimator.predict pads it to the full batch and drops the padding's predictions.

  Raises:
    ValueError: an unknown source kind.
  """
  def input_fn(params):
    paths = list(source.paths)
    if source.kind == 'images':
      dataset = tf.data.Dataset.from_tensor_slices(paths).map(tf.io.read_file)
    elif source.kind == 'records':
      dataset = tf.data.TFRecordDataset(paths, buffer_size=8 * 1024 * 1024)
    elif source.kind == 'lines':
      dataset = tf.data.TextLineDataset(paths)
    elif source.kind == 'csv':
      # A default value: an empty text cell is an empty text, as Python's csv module reads it.
      dataset = tf.data.experimental.CsvDataset(paths, [''], header=True,
                                                select_cols=[source.text_column])
    else:
      raise ValueError('unknown prediction input kind %r' % (source.kind,))
    if data.modality == 'image':
      encoded = records.parse_encoded_image if source.kind == 'records' else tf.identity
      dataset = dataset.map(
          _plain(lambda element: {features_lib.IMAGE: preprocessing.preprocess_encoded(
              encoded(element), False, data.image_size,
              eval_crop_fraction=data.eval_crop_fraction)}),
          num_parallel_calls=AUTOTUNE)
      dataset = dataset.batch(params['batch_size'])
      if data.image_dtype != 'uint8':
        dataset = dataset.map(_plain(lambda features: _cast_images(features, data.image_dtype)))
    elif source.kind == 'records':
      dataset = dataset.map(_plain(lambda r: records.parse_text_ids(data, r)),
                            num_parallel_calls=AUTOTUNE)
      dataset = dataset.batch(params['batch_size'])
    else:
      table = tokenizer.vocabulary_table(tokenizer.read_vocabulary(data.vocab_path))

      def tokenize(texts):
        token_ids, length = tokenizer.texts_to_ids(texts, table, data.max_seq_length)
        return {features_lib.TOKEN_IDS: token_ids, features_lib.LENGTH: length}

      dataset = dataset.batch(params['batch_size']).map(_plain(tokenize))
    return with_host_options(dataset.prefetch(AUTOTUNE))

  return input_fn

