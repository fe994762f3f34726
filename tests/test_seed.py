"""--seed: the same seed gives the same data order, augmentation and (on the runtimes measured
deterministic) the same results; the stateless crop keeps the distribution of TensorFlow's
sample_distorted_bounding_box."""

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from trainer.data import dataset_json
from trainer.data import input_fn as input_fn_lib
from trainer.data import preprocessing
from trainer.data.data_config import DataConfig
from trainer.errors import PipelineError

from helpers import config_from_args
from helpers import ok
from helpers import results_of
from helpers import run_main


def _boxes(sample, count):
  """`count` boxes drawn by `sample(index)` -> (begin, size), read sequentially:
  [count, 4] (y, x, height, width)."""
  with tf.Graph().as_default():
    dataset = tf.data.Dataset.range(count).map(
        lambda i: tf.concat([b[:2] for b in sample(i)], 0))
    box = tf.data.make_one_shot_iterator(dataset.batch(count)).get_next()
    with tf.Session() as sess:
      return sess.run(box).astype(np.float64)


@pytest.mark.parametrize('height,width', [(180, 240), (28, 28), (500, 333)])
def test_the_stateless_crop_has_the_distribution_of_tensorflows_op(height, width):
  """Over 4,000 boxes each, the stateless crop and tf.image.sample_distorted_bounding_box (both
  seeded, so the comparison is fixed) agree on the mean and spread of area, aspect ratio and
  offsets, and on how often they fall back to the whole image, within a few standard errors."""
  count = 4000
  shape = [height, width, 3]
  ours = _boxes(lambda i: preprocessing.distorted_bbox(
      shape, input_fn_lib.example_seed(11, i)), count)
  bbox = [[[0.0, 0.0, 1.0, 1.0]]]
  theirs = _boxes(lambda i: tf.image.sample_distorted_bounding_box(
      shape, bbox, seed=1, seed2=2, min_object_covered=0.1, aspect_ratio_range=(0.75, 4 / 3),
      area_range=(0.08, 1.0), max_attempts=10, use_image_if_no_bounding_boxes=True)[:2], count)

  def stats(boxes):
    y, x, h, w = boxes.T
    return {'area': h * w / (height * width), 'aspect': w / h, 'y': y / height, 'x': x / width,
            'whole': (h == height) & (w == width)}

  ours, theirs = stats(ours), stats(theirs)
  for name in ours:
    a, b = ours[name].astype(np.float64), theirs[name].astype(np.float64)
    error = np.sqrt((a.var() + b.var()) / count) + 1e-3
    assert abs(a.mean() - b.mean()) < 4 * error, (name, a.mean(), b.mean())
    assert abs(a.std() - b.std()) < 0.1 * b.std() + 1e-3, (name, a.std(), b.std())
  assert (ours['area'][~ours['whole']] >= 0.1 - 1e-3).all()


def _data(data_dir, seed, **overrides):
  info = dataset_json.read(data_dir)
  values = dict(data_dir=data_dir, num_classes=info['num_classes'],
                num_train_examples=info['num_train_examples'],
                num_eval_examples=info['num_eval_examples'], image_size=24,
                label_offset=info['label_offset'], train_crop='distorted_bbox', random_flip=True,
                color_distortion=True, seed=seed)
  values.update(overrides)
  return DataConfig(**values)


def _first_batches(data, params, count=6, start_step=0):
  """The first `count` training batches of `data`'s input_fn (read as a take(count) to its end:
  TF 1.15 has crashed closing a session under a running parallel map)."""
  with tf.Graph().as_default():
    dataset = input_fn_lib.input_fn_builder(data, is_training=True, start_step=start_step)(
        params).take(count)
    batch = tf.data.make_one_shot_iterator(dataset).get_next()
    out = []
    with tf.Session() as sess:
      while True:
        try:
          out.append(sess.run(batch))
        except tf.errors.OutOfRangeError:
          return out


@pytest.mark.parametrize('cache_decoded', [False, True])
def test_the_same_seed_gives_the_same_batches(small_dir, cache_decoded):
  """Same seed: identical images (random crop, flip, colour jitter) and labels, in the same
  order, from a parallel map; another seed, or a later training call of the same run (which
  starts at a later global step), gets other ones."""
  data = _data(small_dir, seed=5, cache_decoded=cache_decoded)
  first = _first_batches(data, {'batch_size': 32})
  again = _first_batches(data, {'batch_size': 32})
  other = _first_batches(_data(small_dir, seed=6, cache_decoded=cache_decoded),
                         {'batch_size': 32})
  for (features, labels), (features2, labels2) in zip(first, again):
    np.testing.assert_array_equal(features['image'], features2['image'])
    np.testing.assert_array_equal(labels, labels2)
  later = _first_batches(data, {'batch_size': 32}, start_step=20)
  for changed in (other, later):
    assert not all(np.array_equal(a[1], b[1]) for a, b in zip(first, changed))
    assert not np.array_equal(first[0][0]['image'], changed[0][0]['image'])


def test_two_runs_with_the_same_seed_train_the_same_model(small_dir, tmp_path):
  """The CNN (dropout, Glorot initializers, random crops and flips) trained twice with --seed=3
  on real Fashion-MNIST ends with the same loss and accuracy, bit for bit, and results.json
  records the seed. Measured deterministic on this CPU with TF 1.15.5, intel-tensorflow 1.15.2
  and TF 2.15.1 (BENCHMARKS.md, reproducibility)."""
  args = ['--data_dir=' + small_dir, '--model=cnn', '--image_size=28', '--train_batch_size=32',
          '--eval_batch_size=64', '--train_steps=20', '--steps_per_eval=20', '--seed=3',
          '--train_crop=distorted_bbox', '--random_flip']
  results = []
  for run in ('first', 'second'):
    ok(run_main('--model_dir=' + str(tmp_path / run), *args))
    results.append(results_of(str(tmp_path / run)))
  assert results[0]['seed'] == results[1]['seed'] == 3
  assert results[0]['loss'] == results[1]['loss']
  assert results[0]['top_1_accuracy'] == results[1]['top_1_accuracy']


def test_without_a_seed_one_is_drawn_and_logged(small_dir, tmp_path, monkeypatch):
  """No --seed: each run draws its own seed, in range, and says how to repeat it."""
  from trainer.flags import to_config  # pylint: disable=g-import-not-at-top
  logged = []
  monkeypatch.setattr(to_config.logging, 'info', lambda fmt, *args: logged.append(fmt % args))
  seeds = [config_from_args('--data_dir=' + small_dir, '--model_dir=' + str(tmp_path),
                            '--train_steps=1').seed for _ in range(2)]
  assert seeds[0] != seeds[1] and all(0 <= s < 2**31 for s in seeds)
  assert any('--seed=%d' % seeds[1] in line for line in logged)
  config = config_from_args('--data_dir=' + small_dir, '--model_dir=' + str(tmp_path),
                            '--train_steps=1', '--seed=42')
  assert config.seed == config.data.seed == 42
  with pytest.raises(PipelineError, match='--seed must be in'):
    config_from_args('--data_dir=' + small_dir, '--model_dir=' + str(tmp_path),
                     '--train_steps=1', '--seed=-1')


class _Context(object):
  """params['context'] as TPUEstimator passes it to the input_fn of one host."""

  def __init__(self, host_id, num_hosts):
    self._deployment = (None, host_id, num_hosts, None)

  def current_input_fn_deployment(self):
    return self._deployment


def test_each_host_and_worker_gets_its_own_stream(small_dir):
  """The seed is per input stream: TPU hosts (params['context']) and the tasks of a TF_CONFIG
  cluster (params['worker']) shuffle and augment differently, each repeatably; without either
  there is one stream."""
  assert input_fn_lib.input_stream({}) == (0, 1)
  assert input_fn_lib.input_stream({'context': _Context(3, 4)}) == (3, 4)
  assert input_fn_lib.input_stream({'worker': (2, 5)}) == (2, 5)
  seeds = {input_fn_lib.stream_seed(5, stream, step) for stream in range(4) for step in (0, 100)}
  assert len(seeds) == 8 and all(0 <= s < 2**63 for s in seeds)
  data = _data(small_dir, seed=5)
  worker = [_first_batches(data, {'batch_size': 32, 'worker': (i, 2)}, count=2) for i in (0, 1)]
  assert not np.array_equal(worker[0][0][1], worker[1][0][1])
  again = _first_batches(data, {'batch_size': 32, 'worker': (1, 2)}, count=2)
  np.testing.assert_array_equal(again[0][0]['image'], worker[1][0][0]['image'])
