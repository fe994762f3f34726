"""The input_fns on real Fashion-MNIST: static shapes, per-shard batches, exact eval coverage."""

import os

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from trainer.data import input_fn as input_fn_lib
from trainer.data import preprocessing
from trainer.data.data_config import DataConfig
from trainer.host import cpu as host_cpu
from trainer.models import features as features_lib

from helpers import read_records
from helpers import write_subset


def _data_config(data_dir, **overrides):
  from trainer.data import dataset_json
  info = dataset_json.read(data_dir)
  values = dict(data_dir=data_dir, num_classes=info['num_classes'],
                num_train_examples=info['num_train_examples'],
                num_eval_examples=info['num_eval_examples'], image_size=28,
                label_offset=info['label_offset'], train_crop='pad_and_crop',
                eval_crop_fraction=1.0)
  values.update(overrides)
  return DataConfig(**values)


def _batches(input_fn, batch_size, limit=None):
  """Runs the input_fn like TPUEstimator does (params['batch_size'] per shard); returns the
  dataset and its first `limit` batches (all of them when limit is None).

  The first `limit` are read as a take(limit) to its end.
  """
  with tf.Graph().as_default():
    dataset = input_fn({'batch_size': batch_size})
    read = dataset if limit is None else dataset.take(limit)
    features, labels = tf.data.make_one_shot_iterator(read).get_next()
    out = []
    with tf.Session() as sess:
      while True:
        try:
          out.append(sess.run((features, labels)))
        except tf.errors.OutOfRangeError:
          break
    return dataset, out


@pytest.mark.parametrize('cache_decoded', [False, True])
def test_eval_covers_all_10000_test_images_once(fashion_mnist_dir, cache_decoded):
  data = _data_config(fashion_mnist_dir, cache_decoded=cache_decoded)
  # 10,000 is not a multiple of 1,024: the last batch is padded and the padding masked out.
  dataset, batches = _batches(
      input_fn_lib.input_fn_builder(data, is_training=False, global_batch_size=1024), 1024)
  assert len(batches) == 10  # ceil(10000 / 1024)
  masks = np.concatenate([f['mask'] for f, _ in batches])
  labels = np.concatenate([l for _, l in batches])
  assert masks.sum() == 10000 and masks[:10000].all() and not masks[10000:].any()
  assert np.bincount(labels[:10000]).tolist() == [1000] * 10
  images = np.concatenate([f['image'] for f, _ in batches])[:10000]
  # Every real image is distinct (none read twice): compare exact pixel hashes.
  assert len({img.tobytes() for img in images}) > 9900
  image_shape = tf.data.get_output_shapes(dataset)[0]['image']
  assert image_shape.as_list() == [1024, 28, 28, 3]  # static: TPU-compatible
  # A 28x28 -> 28x28 resize keeps every pixel: the eval images are the records' own pixels
  # (grayscale repeated over RGB) as uint8, 0-255, not normalized (the model_fn does that).
  assert images.dtype == np.uint8
  encoded = [tf.train.Example.FromString(r).features.feature['image/encoded'].bytes_list.value[0]
             for r in read_records(os.path.join(fashion_mnist_dir, 'validation-*'), limit=50)]
  with tf.Graph().as_default(), tf.Session() as sess:
    placeholder = tf.placeholder(tf.string, [])
    decoded = preprocessing.decode_image(placeholder)
    originals = [sess.run(decoded, {placeholder: e}) for e in encoded]
  assert {o.tobytes() for o in originals} <= {img.tobytes() for img in images}


def test_train_batches_are_static_per_shard_and_labels_in_range(fashion_mnist_dir):
  data = _data_config(fashion_mnist_dir, image_size=32, cache_decoded=True)
  # TPUEstimator passes the per-shard batch, e.g. 256 global on 8 cores -> 32.
  dataset, batches = _batches(input_fn_lib.input_fn_builder(data, is_training=True), 32, 3)
  shapes = tf.data.get_output_shapes(dataset)
  assert shapes[0]['image'].as_list() == [32, 32, 32, 3]
  assert shapes[1].as_list() == [32]
  for features, labels in batches:
    assert features['mask'].tolist() == [1.0] * 32
    assert labels.min() >= 0 and labels.max() < 10
    assert features['image'].dtype == np.uint8 and features['image'].max() > 128


def test_label_out_of_range_is_reported(fashion_mnist_dir):
  data = _data_config(fashion_mnist_dir, label_offset=1)  # label 0 -> -1
  with pytest.raises(tf.errors.InvalidArgumentError, match='label_offset'):
    _batches(input_fn_lib.input_fn_builder(data, is_training=False, global_batch_size=100), 100)


def test_fake_data_has_the_real_shapes():
  data = DataConfig(data_dir=None, fake_data=True, num_classes=10, num_train_examples=1000,
                    num_eval_examples=100, image_size=24)
  _, batches = _batches(
      input_fn_lib.input_fn_builder(data, is_training=False, global_batch_size=64), 64)
  assert [f['image'].shape for f, _ in batches] == [(64, 24, 24, 3)] * 2
  assert sum(f['mask'].sum() for f, _ in batches) == 100


def test_subset_helper_keeps_real_records(fashion_mnist_dir, tmp_path):
  out = write_subset(fashion_mnist_dir, str(tmp_path), 50, 20)
  data = _data_config(out)
  _, batches = _batches(
      input_fn_lib.input_fn_builder(data, is_training=False, global_batch_size=8), 8)
  assert sum(f['mask'].sum() for f, _ in batches) == 20
  assert len(tf.io.gfile.glob(os.path.join(out, 'validation-*'))) == 2


def test_color_distortion_changes_training_images_only_within_range():
  pixels = np.random.RandomState(0).randint(0, 256, [28, 28, 3]).astype(np.uint8)
  kwargs = dict(image_size=28, train_crop='pad_and_crop', crop_padding=0, random_flip=False,
                eval_crop_fraction=1.0)
  with tf.Graph().as_default():
    image = tf.constant(pixels)
    seed = tf.placeholder(tf.int64, [2])
    plain = preprocessing.preprocess_image(image, True, seed=seed, **kwargs)
    distorted = preprocessing.preprocess_image(image, True, color_distortion=True, seed=seed,
                                               **kwargs)
    evaluated = preprocessing.preprocess_image(image, False, color_distortion=True, **kwargs)
    with tf.Session() as sess:
      plain, evaluated = sess.run([plain, evaluated], {seed: [0, 0]})
      samples = [sess.run(distorted, {seed: [7, i]}).astype(np.float64) for i in range(4)]
      again = sess.run(distorted, {seed: [7, 0]})
  # Evaluation is never distorted, and without distortion a 28x28 image keeps its pixels.
  np.testing.assert_array_equal(evaluated, pixels)
  np.testing.assert_array_equal(plain, pixels)
  plain = plain.astype(np.float64)
  for sample in samples:
    assert 0.0 <= sample.min() and sample.max() <= 255.0
    assert np.abs(sample - plain).mean() > 1.0
  assert np.abs(samples[0] - samples[1]).mean() > 0.1  # random per example seed
  np.testing.assert_array_equal(again, samples[0])  # fixed by it


def test_a_jpeg_training_crop_decodes_only_its_window_to_the_same_pixels(monkeypatch):
  """decode_and_crop_jpeg on the sampled window gives what decoding the whole JPEG and cutting
  the same box gives (the path other formats take), so the fast path changes no image."""
  # A smooth photo-like image (JPEG artefacts of noise would dominate the comparison).
  y, x = np.mgrid[0:180, 0:240]
  pixels = np.stack([x, y, (x + y) // 2], axis=-1).astype(np.uint8)
  box = ([30, 44, 0], [96, 128, -1])
  monkeypatch.setattr(preprocessing, 'distorted_bbox',
                      lambda shape, seed: (tf.constant(box[0]), tf.constant(box[1])))
  with tf.Graph().as_default():
    jpeg = tf.image.encode_jpeg(tf.constant(pixels), quality=95)
    # The same decoded pixels as a PNG: decoded whole, then cropped.
    png = tf.image.encode_png(tf.io.decode_jpeg(jpeg, channels=3))
    seed = tf.constant([0, 0], tf.int64)
    from_jpeg = preprocessing.decode_distorted_bbox_crop(jpeg, 64, seed)
    from_png = preprocessing.decode_distorted_bbox_crop(png, 64, seed)
    # The training example: that crop rounded to uint8 (the flip off).
    example = preprocessing.preprocess_encoded(jpeg, True, 64, random_flip=False, seed=seed)
    with tf.Session() as sess:
      from_jpeg, from_png, example = sess.run([from_jpeg, from_png, example])
  assert from_jpeg.shape == (64, 64, 3)
  np.testing.assert_allclose(from_jpeg, from_png, atol=2.0)
  assert example.dtype == np.uint8
  np.testing.assert_array_equal(example, np.floor(from_jpeg + 0.5))
  assert np.abs(from_jpeg - from_png).mean() < 0.5


@pytest.mark.parametrize('is_training', [True, False])
@pytest.mark.parametrize('image_dtype', ['uint8', 'float32', 'bfloat16'])
def test_image_batches_follow_the_features_contract(fashion_mnist_dir, is_training, image_dtype):
  """What the input_fn builds is exactly what models.features promises the model_fn: the same
  keys, static shapes and dtypes (float32 or bfloat16 images are what a Cloud TPU's infeed
  gets)."""
  data = _data_config(fashion_mnist_dir, image_size=32, image_dtype=image_dtype)
  dataset, batches = _batches(input_fn_lib.input_fn_builder(
      data, is_training=is_training, global_batch_size=16), 16, 1)
  shapes, dtypes = tf.data.get_output_shapes(dataset), tf.data.get_output_types(dataset)
  spec = features_lib.feature_spec('image', 16, image_size=32, image_dtype=image_dtype)
  assert {k: (shapes[0][k].as_list(), dtypes[0][k]) for k in shapes[0]} == spec
  assert (shapes[1].as_list(), dtypes[1]) == ([16], features_lib.LABEL_DTYPE)
  (features, _), = batches
  images = features[features_lib.IMAGE]
  assert tf.as_dtype(images.dtype) == tf.as_dtype(image_dtype)
  pixels = np.asarray(images, np.float32)
  assert pixels.max() > 128 and (pixels == np.round(pixels)).all()  # 0-255 integers, exact


@pytest.mark.parametrize('is_training', [True, False])
def test_the_input_runs_with_the_host_options(fashion_mnist_dir, is_training):
  """The input's functions run on a pool of their own, one thread per usable CPU (not on the
  session's inter-op pool, one thread on a small host), each op of them on one thread, and on
  TF 1.x without the autotuning model, whose teardown crashes TF 1.15 with a segmentation fault
  (trainer/data/input_fn.py)."""
  data = _data_config(fashion_mnist_dir, image_size=32)
  with tf.Graph().as_default():
    options = input_fn_lib.input_fn_builder(data, is_training=is_training, global_batch_size=16)(
        {'batch_size': 16}).options()
  threading = getattr(options, 'threading', None) or options.experimental_threading
  assert threading.max_intra_op_parallelism == 1
  assert threading.private_threadpool_size == host_cpu.read_cpu().logical_cpus
  if tf.__version__.startswith('1.'):
    assert options.experimental_optimization.autotune is False
  else:
    assert options.autotune.enabled is not False  # TF 2.15's autotuning: no such crash


def test_the_features_contract_refuses_unknown_kinds():
  with pytest.raises(ValueError, match='modality'):
    features_lib.feature_spec('audio', 8)
  with pytest.raises(ValueError, match='image_dtype'):
    features_lib.feature_spec('image', 8, image_size=32, image_dtype='float16')
