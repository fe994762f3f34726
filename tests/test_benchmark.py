"""`python -m trainer.benchmark`: each sub-command runs on a tiny configuration and writes a
well-formed record (no timing assertions: speed targets live in BENCHMARKS.md), `trainer.prepare
photos`, and the trainer's --profile_steps traces."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from trainer.benchmark import stats
from trainer.benchmark import timing
from trainer.data import dataset_json
from trainer.errors import PipelineError
from trainer.host import cpu as host_cpu
from trainer.host import cpu_peak
from trainer.host import threads

from helpers import ok
from helpers import refused
from helpers import REPO
from helpers import run_main
from helpers import run_prepare

TINY_WINDOWS = ['--warmup_steps=1', '--steps_per_window=1', '--windows=2']


def _bench(*args):
  return subprocess.run([sys.executable, '-m', 'trainer.benchmark'] + list(args), cwd=REPO,
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                        timeout=600)


def _record(path, name):
  with open(path) as f:
    record = json.load(f)
  assert record['benchmark'] == name
  runtime = record['runtime']
  for key in ('python', 'tensorflow_version', 'tensorflow_build', 'mkl_enabled', 'cpu_flags',
              'usable_cores', 'gpus'):
    assert key in runtime
  assert runtime['usable_cores'] >= 1
  return record


def _check_summary(summary, windows):
  assert len(summary['windows']) == windows
  assert summary['min'] <= summary['median'] <= summary['max']
  assert summary['median'] > 0
  assert summary['spread'] == pytest.approx((summary['max'] - summary['min']) / summary['median'])


def test_window_rates_time_each_window_after_the_warmup():
  times = [0.0, 1.0, 1.5, 2.0, 4.0, 6.0]  # after steps 1..6
  # warmup 2: windows of 2 steps start at t=1.0 -> 2.0 and 2.0 -> 6.0
  assert timing.window_rates(times, 2, 2, 2, per_step=10) == [20.0, 5.0]
  with pytest.raises(PipelineError):
    timing.window_rates(times, 2, 3, 2, per_step=10)
  summary = timing.summarize([3.0, 1.0, 2.0])
  assert (summary['median'], summary['min'], summary['max'], summary['spread']) == (2, 1, 3, 1)


def test_model_times_the_estimator_path_and_the_bare_loop(tmp_path):
  out = str(tmp_path / 'model.json')
  proc = ok(_bench('model', '--model=cnn', '--image_size=28', '--num_classes=10',
                   '--batch_size=8', '--output=' + out, *TINY_WINDOWS))
  assert 'pipeline overhead' in proc.stdout
  record = _record(out, 'model')
  assert record['config']['model'] == 'cnn' and record['config']['batch_size'] == 8
  assert record['config']['path'] == 'both'
  for key in ('estimator_examples_per_sec', 'session_examples_per_sec'):
    _check_summary(record['measurements'][key], 2)
  pairs = record['measurements']['overhead_percent_per_pair']
  assert len(pairs) == 2 and record['config']['window_order'] == [
      'estimator', 'bare', 'bare', 'estimator']
  assert record['measurements']['overhead_percent'] == pytest.approx((pairs[0] + pairs[1]) / 2)
  low, high = record['measurements']['overhead_percent_interval_90']
  assert min(pairs) <= low <= high <= max(pairs)
  # The bare loop's FLOP rate, and the CPU's fp32 peak beside it where the table knows the CPU.
  measurements = record['measurements']
  assert record['config']['precision'] == 'float32'
  assert measurements['flops_per_example'] > 2 * 28 * 28 * 64 * 5 * 5 * 3  # the first conv alone
  assert measurements['gflops_per_sec'] == pytest.approx(
      measurements['flops_per_example'] * measurements['session_examples_per_sec']['median'] / 1e9)
  assert (measurements['peak_basis'] is None) == (measurements['peak_gflops_per_sec'] is None)
  per_cycle = cpu_peak.fp32_flops_per_cycle(host_cpu.read_cpu())
  if measurements['peak_basis']:  # a CPU in trainer/host/cpu_peak.py's table
    assert ' x %d fp32 FLOPs a cycle (%s)' % per_cycle in measurements['peak_basis']
    assert '%% of the float32 peak %.0f GFLOP/s' % measurements['peak_gflops_per_sec'] in \
        proc.stdout
  else:
    assert 'no float32 peak known for this CPU' in proc.stdout


def test_median_interval_is_a_deterministic_bootstrap_interval_that_narrows_with_more_data():
  rng = np.random.RandomState(1)
  few, many = rng.normal(2.0, 10.0, 10), rng.normal(2.0, 10.0, 1000)
  low, high = stats.median_interval(few)
  assert (low, high) == stats.median_interval(few)  # same seed, same interval
  assert min(few) <= low < np.median(few) < high <= max(few)
  many_low, many_high = stats.median_interval(many)
  assert many_low < 2.0 < many_high and many_high - many_low < (high - low) / 3
  wide = stats.median_interval(many, confidence=0.99)
  assert wide[0] < many_low and wide[1] > many_high
  for bad in ([1.0], []):
    with pytest.raises(ValueError, match='at least 2 values'):
      stats.median_interval(bad)
  with pytest.raises(ValueError, match='confidence'):
    stats.median_interval(few, confidence=1.5)


def test_bare_windows_alternate_with_the_estimators_steps_in_one_session(tmp_path):
  """The hook runs the fetched train op itself between windows, in the order E B, B E, E B: the
  global step counts both paths' steps, and training stops after the last window."""
  import tensorflow.compat.v1 as tf

  def model_fn(features, labels, mode):
    w = tf.get_variable('w', [], initializer=tf.zeros_initializer())
    loss = tf.reduce_sum(features) * w
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=tf.assign_add(
        tf.train.get_or_create_global_step(), 1))

  def input_fn():
    return tf.data.Dataset.from_tensors((tf.ones([2]), tf.zeros([1]))).repeat()

  hook = timing.BareWindows(warmup=2, pairs=3, steps_per_window=4)
  estimator = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path))
  estimator.train(input_fn, max_steps=1000, hooks=[hook])
  assert [kind for kind, _ in hook.windows] == timing.abba_order(3) == [
      'estimator', 'bare', 'bare', 'estimator', 'estimator', 'bare']
  assert all(seconds > 0 for _, seconds in hook.windows)
  # 2 warm-up Estimator steps + 2 untimed bare steps + 3 pairs x (4 Estimator + 4 bare) steps
  assert estimator.get_variable_value('global_step') == 2 + 2 + 3 * 8
  e, b = hook.seconds('estimator'), hook.seconds('bare')
  assert hook.pair_overheads() == pytest.approx(
      [100 * (1 - b[0] / e[0]), 100 * (1 - b[1] / e[1]), 100 * (1 - b[2] / e[2])])


@pytest.fixture(scope='module')
def photos(tmp_path_factory):
  """40 real photos (`trainer.prepare photos`), prepared once for the input benchmarks, which
  only read them."""
  photos = str(tmp_path_factory.mktemp('photos'))
  ok(run_prepare('photos', '--output_dir=' + photos, '--num_images=40', '--direct_num_workers=1'))
  return photos


def test_input_times_the_training_input_fn_on_real_photos(photos, tmp_path):
  info = dataset_json.read(photos)
  assert info['num_classes'] == 10
  assert info['num_train_examples'] + info['num_eval_examples'] == 40
  assert (info['image_height'], info['image_width']) == (350, 400)
  out = str(tmp_path / 'input.json')
  ok(_bench('input', '--data_dir=' + photos, '--image_size=224', '--batch_size=4',
            '--input_stages', '--output=' + out, *TINY_WINDOWS))
  record = _record(out, 'input')
  assert record['config']['image_size'] == 224
  _check_summary(record['measurements']['examples_per_sec'], 2)
  stages = record['measurements']['stages']
  assert len(stages) == 5 and stages[-1]['stage'].startswith('whole input_fn')
  for summary in stages:
    _check_summary(summary, 2)
  cores = record['runtime']['usable_cores']
  assert record['measurements']['examples_per_sec_per_core']['median'] == pytest.approx(
      record['measurements']['examples_per_sec']['median'] / cores)


# A stand-in for tensorflow/tpu r1.15's models/official/resnet/imagenet_input.py (which cannot be
# fetched here): the same interface and the same TF 1.x idioms (`import tensorflow as tf`,
# tf.contrib.data, tf.parse_single_example), so the loader and its TF 2.x shim are exercised.
_STAND_IN_REFERENCE = """
import os
import tensorflow as tf


class ImageNetInput(object):

  def __init__(self, is_training, use_bfloat16, transpose_input, data_dir, image_size=224):
    self.data_dir, self.image_size = data_dir, image_size

  def parse(self, value):
    parsed = tf.parse_single_example(value, {
        'image/encoded': tf.FixedLenFeature((), tf.string, ''),
        'image/class/label': tf.FixedLenFeature([], tf.int64, -1)})
    image = tf.image.decode_jpeg(parsed['image/encoded'], channels=3)
    image = tf.image.resize_bicubic([image], [self.image_size, self.image_size])[0]
    return image, tf.cast(parsed['image/class/label'], tf.int32) - 1

  def input_fn(self, params):
    files = tf.data.Dataset.list_files(os.path.join(self.data_dir, 'train-*'))
    dataset = files.apply(tf.contrib.data.parallel_interleave(
        tf.data.TFRecordDataset, cycle_length=2, sloppy=True)).repeat()
    dataset = dataset.apply(tf.contrib.data.map_and_batch(
        self.parse, batch_size=params['batch_size'], num_parallel_batches=2,
        drop_remainder=True))
    return dataset.prefetch(tf.contrib.data.AUTOTUNE)
"""


def test_input_times_the_reference_beside_the_project(photos, tmp_path):
  """--reference=PATH loads the reference's ImageNetInput from a tensorflow/tpu checkout (here a
  stand-in with its interface, in TF 1.x style) on either runtime and records both pipelines'
  rates and their ratio per pair of windows; a folder without it is refused."""
  checkout = tmp_path / 'tpu'
  resnet = checkout / 'models' / 'official' / 'resnet'
  resnet.mkdir(parents=True)
  (checkout / 'models' / 'official' / '__init__.py').write_text('')
  (resnet / '__init__.py').write_text('')
  (resnet / 'imagenet_input.py').write_text(_STAND_IN_REFERENCE)
  out = str(tmp_path / 'input.json')
  proc = ok(_bench('input', '--data_dir=' + photos, '--image_size=64', '--batch_size=4',
                   '--reference=' + str(checkout), '--output=' + out, *TINY_WINDOWS))
  assert 'side by side: ratio' in proc.stdout
  record = _record(out, 'input')
  side_by_side = record['measurements']['side_by_side']
  for name in ('project', 'reference', 'ratio'):
    _check_summary(side_by_side[name], 2)
  assert side_by_side['ratio']['windows'] == pytest.approx(
      [a / b for a, b in zip(side_by_side['project']['windows'],
                             side_by_side['reference']['windows'])])
  refused(_bench('input', '--data_dir=' + photos, '--reference=' + str(tmp_path),
                 *TINY_WINDOWS), 'holds no models/official/resnet/imagenet_input.py')


def test_conv_reports_time_and_gflops_of_the_classic_convolution(tmp_path):
  out = str(tmp_path / 'conv.json')
  ok(_bench('conv', '--output=' + out, '--warmup_steps=1', '--steps_per_window=1', '--windows=1'))
  record = _record(out, 'conv')
  # 128 x 128 x 128 outputs x 256 filters x (5 x 5 x 3) multiply-adds x 2.
  assert record['config']['flops_per_iteration'] == 2 * 128 * 128 * 128 * 256 * 75
  seconds = record['measurements']['seconds_per_iteration']['median']
  gflops = record['measurements']['gflops_per_sec']['median']
  assert gflops == pytest.approx(record['config']['flops_per_iteration'] / seconds / 1e9)


def test_overhead_compares_the_four_ways_of_running_the_iris_network(tmp_path):
  out = str(tmp_path / 'overhead.json')
  proc = ok(_bench('overhead', '--epochs=2', '--batch_size=10', '--windows=1', '--output=' + out))
  record = _record(out, 'overhead')
  assert record['config']['examples'] == 150 and record['config']['steps'] == 30
  assert len(record['measurements']) == 4
  for label, summary in record['measurements'].items():
    assert label in proc.stdout
    _check_summary(summary, 1)
    assert summary['microseconds_per_step'] == pytest.approx(1e6 * summary['median'] / 30)


def test_bad_invocations_are_refused(tmp_path):
  proc = _bench('nonsense')
  assert proc.returncode == 1 and 'usage: python -m trainer.benchmark' in proc.stderr
  refused(_bench('input'), '--data_dir')
  refused(_bench('conv', '--windows=0'), '--windows must be >= 1')


def test_profile_steps_writes_a_trace_of_each_step(small_dir, tmp_path):
  model_dir = str(tmp_path / 'model')
  ok(run_main('--model=cnn', '--image_size=28', '--train_batch_size=16', '--train_steps=5',
              '--profile_steps=2,4', '--data_dir=' + small_dir, '--model_dir=' + model_dir,
              '--mode=train'))
  traces = sorted(os.listdir(os.path.join(model_dir, 'profile')))
  assert traces == ['timeline-2.json', 'timeline-3.json']
  with open(os.path.join(model_dir, 'profile', traces[0])) as f:
    events = json.load(f)['traceEvents']
  # Op events are named 'scope/op:Type'; the convolutions (or their gradients) must be there.
  assert any('Conv2D' in e.get('args', {}).get('name', '') for e in events)
  common = ['--data_dir=' + small_dir, '--model_dir=' + str(tmp_path / 'm'), '--train_steps=1']
  refused(run_main('--profile_steps=5,3', *common), 'START < END')
  refused(run_main('--profile_steps=0,50', *common), 'at most 20')


def test_profile_sums_a_traced_training_step_by_the_kernels_that_ran(tmp_path):
  out = str(tmp_path / 'profile.json')
  proc = ok(_bench('profile', '--model=cnn', '--image_size=28', '--num_classes=10',
                   '--batch_size=8', '--output=' + out, *TINY_WINDOWS))
  assert 'share of op time' in proc.stdout
  measurements = _record(out, 'profile')['measurements']
  assert measurements['traced_steps'] == 2
  kernels = {k['kernel']: k for k in measurements['kernels']}
  # The runtime's own kernel names: Conv2D (Eigen), _MklConv2D (intel-tensorflow's layout pass)
  # or _MklNativeConv2D / _FusedConv2D (TF 2.x with oneDNN); each backward pass as well.
  assert any('Conv2D' in name and 'Backprop' not in name for name in kernels), sorted(kernels)
  assert any('Conv2DBackpropFilter' in name for name in kernels), sorted(kernels)
  # The ops of a step run on the inter-op pool (one thread on a small host) and the caller's
  # thread: their summed time is bounded by the step's.
  assert 0 < measurements['op_ms_per_step'] <= 1e3 * measurements['seconds_per_step'] * (
      threads.current()[1].inter_op + 1)  # + the caller's thread, which runs ops too
  # The CNN's first 5x5 convolution alone, forward: 28x28x64 outputs of 5x5x3 multiply-adds,
  # 7.5 MFLOPs per example; the other convolutions, the dense layers and the backward pass add more.
  assert measurements['flops_per_example'] > 2 * 28 * 28 * 64 * 5 * 5 * 3
