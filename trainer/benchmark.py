"""Repeatable throughput measurements: `python -m trainer.benchmark SUB-COMMAND [flags]`.

  model     steady-state training examples/sec of the real model_fn through the real Estimator
            path (progress hook, summaries, checkpoints at start and end) on synthetic input, and
            of the same graph's train op in a bare `session.run` loop; their ratio is the
            pipeline's own overhead. --windows pairs of windows of the two paths alternate in
            one Estimator session (--path=estimator or session times one path alone).
  input     examples/sec of the training input_fn alone (read, decode, augment, batch) on real
            TFRecords (--data_dir), with no model.
  conv      the classic micro-benchmark: 128 random 256x256x3 images convolved with 256 5x5
            filters, stride 2, 'SAME'; seconds per iteration and achieved GFLOP/s.
  overhead  a 4-32-3 dense network on the 150 iris examples of scikit-learn: wall time of
            --epochs epochs with one session.run per step (iterations_per_loop 1), with 100 steps
            per session.run in a tf.while_loop (iterations_per_loop 100, the TPU training loop),
            and through the Estimator with one train() per epoch vs one train() over a repeated
            tf.data input: per-call overhead, quantified.

`python -m trainer.prepare photos --output_dir=DIR` makes real-photo records for `input`.

Each sub-command prints a table and writes a JSON record: the runtime (Python, TensorFlow version
and build, MKL, CPU model and flags, usable cores, GPUs), the configuration, and for each
measurement every timed window, their median and their spread ((max - min) / median).
"""

import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time

from absl import app
from absl import flags as absl_flags
from absl import logging
import numpy as np
import tensorflow.compat.v1 as tf

from flags import benchmark_flags  # noqa: F401  (defines the flags)
from flags import config as flags_config
from models import model_fn as model_fn_lib
from trainer import driver
from trainer import estimator as estimator_lib
from trainer import hooks as hooks_lib
from trainer import input_pipeline
from trainer import measure
from trainer import preprocessing
from trainer import stats
from trainer.config import PipelineError

FLAGS = absl_flags.FLAGS
SUBCOMMANDS = ('model', 'input', 'conv', 'overhead')
CONV_SHAPE = dict(images=(128, 256, 256, 3), filters=(5, 5, 3, 256), stride=2)


# --- records ---------------------------------------------------------------------------------

def runtime_tag(facts):
  return 'tf%s%s' % (facts['tensorflow_version'], '-mkl' if facts['mkl_enabled'] else '')


def write_record(name, config, measurements, rows, columns):
  """Prints the table, writes the JSON record and returns it."""
  facts = measure.runtime_facts()
  record = {'benchmark': name, 'runtime': facts, 'config': config, 'measurements': measurements}
  path = FLAGS.output or os.path.join(
      'runs', 'benchmarks', '%s-%s.json' % (_details(name, config), runtime_tag(facts)))
  tf.io.gfile.makedirs(os.path.dirname(path) or '.')
  with tf.io.gfile.GFile(path, 'w') as f:
    f.write(json.dumps(record, indent=2, sort_keys=True) + '\n')
  widths = [max(len(str(c)), *(len(str(r[i])) for r in rows)) for i, c in enumerate(columns)]
  print('%s on TF %s (%s, MKL %s), %s, %d cores' % (
      name, facts['tensorflow_version'], facts['tensorflow_build'],
      'on' if facts['mkl_enabled'] else 'off', facts['cpu_model'], facts['usable_cores']))
  for row in [columns] + rows:
    print('  '.join(str(v).rjust(w) for v, w in zip(row, widths)))
  print('record: %s' % path)
  return record


def _details(name, config):
  if name == 'model':
    depth = config['resnet_depth'] if config['model'] == 'resnet' else ''
    return 'model-%s%s-%d-b%d' % (config['model'], depth,
                                  config['image_size'] or config['max_seq_length'] or 0,
                                  config['batch_size'])
  if name == 'input':
    return 'input-%d-b%d' % (config['image_size'], config['batch_size'])
  return name


def _fmt(summary, scale=1.0, digits=1):
  return '%.*f (%.*f-%.*f)' % (digits, summary['median'] * scale, digits, summary['min'] * scale,
                               digits, summary['max'] * scale)


# --- timing ----------------------------------------------------------------------------------

def _total_steps():
  return FLAGS.warmup_steps + FLAGS.windows * FLAGS.steps_per_window


# --- model -----------------------------------------------------------------------------------

class _FlagOverrides(object):
  """The parsed flags with some values replaced (config_from_flags reads attributes)."""

  def __init__(self, flag_values, **overrides):
    self._flag_values = flag_values
    self._overrides = overrides

  def __getattr__(self, name):
    if name in self._overrides:
      return self._overrides[name]
    return getattr(self._flag_values, name)


def _model_config(model_dir, train_steps):
  return flags_config.config_from_flags(_FlagOverrides(
      FLAGS, fake_data=True, data_dir=None, model_dir=model_dir, job_dir=None, export_dir=None,
      mode='train', train_steps=train_steps, train_epochs=None,
      train_batch_size=FLAGS.batch_size, log_every_n_secs=3600.0))


def _train(config, hook):
  """Runs `estimator.train` as `trainer.driver` runs it (progress hook included), plus `hook`."""
  estimator = estimator_lib.build_estimator(config)
  progress = hooks_lib.ProgressHook(config.model, config.train_steps, config.log_every_n_secs)
  estimator.train(driver.input_fns(config, estimator)[0], max_steps=config.train_steps,
                  hooks=[progress, hook])


def interleaved_rates(config):
  """`estimator.train` as `trainer.driver` runs it, with windows of its steps alternating with
  windows of the same session's train op in a bare loop (see measure.BareWindows).

  Returns:
    (Estimator examples/sec per window, bare examples/sec per window, overhead in percent of
    each adjacent pair of windows).
  """
  hook = measure.BareWindows(FLAGS.warmup_steps, FLAGS.windows, FLAGS.steps_per_window)
  _train(config, hook)
  if len(hook.windows) < 2 * FLAGS.windows:
    raise PipelineError('training stopped after %d of %d windows.' % (
        len(hook.windows), 2 * FLAGS.windows))
  examples = FLAGS.steps_per_window * config.train_batch_size
  return ([examples / s for s in hook.seconds('estimator')],
          [examples / s for s in hook.seconds('bare')], hook.pair_overheads())


def estimator_rates(config):
  """Examples/sec per window of `estimator.train` as `trainer.driver` runs it."""
  timer = measure.StepTimes()
  _train(config, timer)
  return measure.window_rates(timer.times, FLAGS.warmup_steps, FLAGS.windows,
                              FLAGS.steps_per_window, config.train_batch_size)


def session_rates(config, session_config):
  """Examples/sec per window of the same model_fn's train op and input in a bare loop, in a
  graph and session of its own."""
  with tf.Graph().as_default():
    dataset = input_pipeline.input_fn_builder(config.data, is_training=True)(
        {'batch_size': config.train_batch_size})
    features, labels = tf.data.make_one_shot_iterator(dataset).get_next()
    spec = model_fn_lib.model_fn_builder(config.model)(
        features, labels, tf.estimator.ModeKeys.TRAIN, {'batch_size': config.train_batch_size})
    with tf.Session(config=session_config) as sess:
      sess.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
      times = []
      for _ in range(config.train_steps):
        sess.run(spec.train_op)
        times.append(time.perf_counter())
  return measure.window_rates(times, FLAGS.warmup_steps, FLAGS.windows, FLAGS.steps_per_window,
                      config.train_batch_size)


def bench_model():
  model_dir = tempfile.mkdtemp(prefix='benchmark-model-')
  try:
    if FLAGS.path == 'both':
      # Untimed and timed bare steps advance the global step as well.
      config = _model_config(model_dir, 2 * FLAGS.warmup_steps + 2 * FLAGS.windows *
                             FLAGS.steps_per_window)
      estimator, bare, pairs = interleaved_rates(config)
      measurements = {'estimator_examples_per_sec': measure.summarize(estimator),
                      'session_examples_per_sec': measure.summarize(bare),
                      'overhead_percent_per_pair': pairs}
    elif FLAGS.path == 'estimator':
      config = _model_config(model_dir, _total_steps())
      measurements = {'estimator_examples_per_sec': measure.summarize(estimator_rates(config))}
    else:
      config = _model_config(model_dir, _total_steps())
      session_config = estimator_lib.build_estimator(config).config.session_config
      measurements = {'session_examples_per_sec': measure.summarize(
          session_rates(config, session_config))}
    rows = []
    for key, label in (('estimator_examples_per_sec', 'Estimator path'),
                       ('session_examples_per_sec', 'bare session.run')):
      if key in measurements:
        rows.append([label, _fmt(measurements[key])])
    if FLAGS.path == 'both':
      # Adjacent windows see the same machine; the median pair is robust to a drift or a stall.
      measurements['overhead_percent'] = float(np.median(pairs))
      interval = stats.median_interval(pairs) if len(pairs) > 1 else None
      measurements['overhead_percent_interval_90'] = interval
      rows.append(['pipeline overhead (median pair)', '%.1f%%%s (pairs %.1f to %.1f%%)' % (
          measurements['overhead_percent'],
          ', 90%% interval %.1f to %.1f%%' % interval if interval else '', min(pairs),
          max(pairs))])
    model = config.model
    details = {
        'model': model.model, 'resnet_depth': model.resnet_depth if model.model == 'resnet' else None,
        'image_size': model.image_size if config.data.modality == 'image' else None,
        'max_seq_length': model.max_seq_length if config.data.modality == 'text' else None,
        'num_classes': model.num_classes, 'batch_size': config.train_batch_size,
        'optimizer': model.optimizer, 'moving_average_decay': model.moving_average_decay,
        'skip_host_call': model.skip_host_call, 'warmup_steps': FLAGS.warmup_steps,
        'windows': FLAGS.windows, 'steps_per_window': FLAGS.steps_per_window,
        'path': FLAGS.path,
        'window_order': measure.abba_order(FLAGS.windows) if FLAGS.path == 'both' else None,
        'paths': {'both': 'alternating windows in one Estimator session (measure.BareWindows)',
                  'estimator': 'the Estimator path alone',
                  'session': 'a bare loop in a graph and session of its own'}[FLAGS.path],
        'input': 'synthetic (--fake_data: a fixed set of 64 examples, repeated)'}
    return write_record('model', details, measurements, rows,
                        ['path', 'examples/sec median (min-max)'])
  finally:
    shutil.rmtree(model_dir, ignore_errors=True)


# --- input -----------------------------------------------------------------------------------

def _dataset_rates(dataset, batch_size):
  """Examples/sec per window of producing `dataset`'s batches in the graph (nothing is copied
  back to Python)."""
  with tf.Graph().as_default():
    produce = tf.group(tf.nest.flatten(tf.data.make_one_shot_iterator(dataset()).get_next()))
    with tf.Session() as sess:
      times = []
      for _ in range(_total_steps()):
        sess.run(produce)
        times.append(time.perf_counter())
  return measure.window_rates(times, FLAGS.warmup_steps, FLAGS.windows, FLAGS.steps_per_window,
                              batch_size)


def input_rates(data, batch_size):
  """Examples/sec per window of the training input_fn alone."""
  return _dataset_rates(
      lambda: input_pipeline.input_fn_builder(data, is_training=True)({'batch_size': batch_size}),
      batch_size)


def input_stage_rates(data, batch_size):
  """Where the input pipeline's time goes: the same records, shuffle and parallel map cut after
  each stage of a JPEG 'distorted_bbox' training example. Each stage's map returns a small value
  that needs the stage's work (one pixel of its output)."""
  autotune = tf.data.experimental.AUTOTUNE

  def records():
    # pylint: disable=protected-access
    dataset = input_pipeline._record_dataset(data.file_pattern(True), True)
    dataset = dataset.map(lambda r: input_pipeline._parse(data, r), num_parallel_calls=autotune)
    return dataset.shuffle(1024).repeat()

  def stage(fn):
    return lambda: input_pipeline.with_host_options(records().map(
        fn, num_parallel_calls=autotune).batch(batch_size, drop_remainder=True).prefetch(autotune))

  def window(encoded):
    begin, size = preprocessing._distorted_bbox(tf.image.extract_jpeg_shape(encoded))  # pylint: disable=protected-access
    return tf.stack([begin[0], begin[1], size[0], size[1]])

  stages = [
      ('read, parse, shuffle', stage(lambda encoded, label: label)),
      ('+ decode the whole JPEG', stage(
          lambda encoded, label: tf.io.decode_jpeg(encoded, channels=3)[0, 0, 0])),
      ('+ decode the crop window only', stage(
          lambda encoded, label: tf.image.decode_and_crop_jpeg(
              encoded, window(encoded), channels=3)[0, 0, 0])),
      ('+ resize the crop to %d (float32)' % data.image_size, stage(
          lambda encoded, label: preprocessing.decode_distorted_bbox_crop(
              encoded, data.image_size)[0, 0, 0])),
      ('whole input_fn (+ round to uint8, flip, batch)',
       lambda: input_pipeline.input_fn_builder(data, is_training=True)(
           {'batch_size': batch_size})),
  ]
  return [(name, _dataset_rates(make, batch_size)) for name, make in stages]


def bench_input():
  if not FLAGS.data_dir:
    raise PipelineError('input needs --data_dir: a directory of TFRecord shards with dataset.json '
                        '(e.g. `python -m trainer.prepare photos --output_dir=DIR`).')
  config = flags_config.config_from_flags(_FlagOverrides(
      FLAGS, model_dir=tempfile.gettempdir(), job_dir=None, export_dir=None, mode='train',
      train_steps=1, train_epochs=None, train_batch_size=FLAGS.batch_size))
  rates = input_rates(config.data, FLAGS.batch_size)
  facts_cores = measure.runtime_facts()['usable_cores']
  measurements = {'examples_per_sec': measure.summarize(rates),
                  'examples_per_sec_per_core': measure.summarize([r / facts_cores for r in rates])}
  data = config.data
  details = {'data_dir': data.data_dir, 'image_size': data.image_size,
             'batch_size': FLAGS.batch_size, 'train_crop': data.train_crop,
             'random_flip': data.random_flip, 'color_distortion': data.color_distortion,
             'cache_decoded': data.cache_decoded, 'num_train_examples': data.num_train_examples,
             'warmup_steps': FLAGS.warmup_steps, 'windows': FLAGS.windows,
             'steps_per_window': FLAGS.steps_per_window}
  rows = [['training input_fn', _fmt(measurements['examples_per_sec']),
           _fmt(measurements['examples_per_sec_per_core'])]]
  if FLAGS.input_stages:
    measurements['stages'] = []
    for name, stage_rates in input_stage_rates(data, FLAGS.batch_size):
      summary = measure.summarize(stage_rates)
      # Core-microseconds per example: what each stage adds is the difference to the one above.
      summary.update(stage=name,
                     core_microseconds_per_example=1e6 * facts_cores / summary['median'])
      measurements['stages'].append(summary)
      rows.append([name, _fmt(summary), '%.0f core-us/example'
                   % summary['core_microseconds_per_example']])
  return write_record('input', details, measurements, rows,
                      ['what', 'examples/sec median (min-max)', 'per core'])


# --- conv ------------------------------------------------------------------------------------

def conv_flops():
  """Multiply-adds x 2 of the conv: N x H_out x W_out x C_out x (K x K x C_in)."""
  n, h, w, c_in = CONV_SHAPE['images']
  k, _, _, c_out = CONV_SHAPE['filters']
  s = CONV_SHAPE['stride']
  return 2 * n * (-(-h // s)) * (-(-w // s)) * c_out * k * k * c_in


def bench_conv():
  with tf.Graph().as_default():
    # Variables, so the convolution cannot be constant-folded away.
    images = tf.Variable(tf.random.normal(CONV_SHAPE['images']), name='images')
    filters = tf.Variable(tf.random.normal(CONV_SHAPE['filters']), name='filters')
    s = CONV_SHAPE['stride']
    conv = tf.nn.conv2d(images, filters, strides=[1, s, s, 1], padding='SAME')
    # Fetch one value of the output: grappler prunes ops reached only through control edges,
    # and fetching all 2 GiB of it would time the copy.
    run_conv = conv[0, 0, 0, 0]
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      times = []
      for _ in range(_total_steps()):
        sess.run(run_conv)
        times.append(time.perf_counter())
  per_sec = measure.window_rates(times, FLAGS.warmup_steps, FLAGS.windows, FLAGS.steps_per_window, 1)
  flops = conv_flops()
  measurements = {'seconds_per_iteration': measure.summarize([1.0 / r for r in per_sec]),
                  'gflops_per_sec': measure.summarize([r * flops / 1e9 for r in per_sec])}
  details = dict(CONV_SHAPE, padding='SAME', flops_per_iteration=flops,
                 warmup_steps=FLAGS.warmup_steps, windows=FLAGS.windows,
                 steps_per_window=FLAGS.steps_per_window)
  rows = [['conv 5x5/2, 128x256x256x3 -> 256', _fmt(measurements['seconds_per_iteration'],
                                                    digits=3),
           _fmt(measurements['gflops_per_sec'])]]
  return write_record('conv', details, measurements, rows,
                      ['op', 's/iteration median (min-max)', 'GFLOP/s'])


# --- overhead --------------------------------------------------------------------------------

def iris():
  """The 150 iris examples (4 float features, labels 0-2) from scikit-learn's bundled CSV, read
  by path (importing sklearn would need SciPy)."""
  spec = importlib.util.find_spec('sklearn')
  if spec is None:
    raise PipelineError('overhead reads the iris data shipped with scikit-learn: '
                        '`pip install --no-deps scikit-learn` (make test installs it).')
  path = os.path.join(spec.submodule_search_locations[0], 'datasets', 'data', 'iris.csv')
  rows = np.loadtxt(path, delimiter=',', skiprows=1)
  return rows[:, :4].astype(np.float32), rows[:, 4].astype(np.int32)


def _dense_logits(features):
  hidden = tf.layers.dense(features, 32, activation=tf.nn.relu, name='hidden')
  return tf.layers.dense(hidden, 3, name='logits')


def _iris_dataset(x, y, batch_size, repeat):
  dataset = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(150, seed=1)
  if repeat:
    dataset = dataset.repeat()
  return dataset.batch(batch_size, drop_remainder=True)


def _session_loop_seconds(x, y, batch_size, steps, iterations_per_loop):
  """Wall time of `steps` SGD steps run `iterations_per_loop` per session.run (a tf.while_loop
  around the step, as TPUEstimator's training loop does on a TPU)."""
  with tf.Graph().as_default():
    iterator = tf.data.make_one_shot_iterator(_iris_dataset(x, y, batch_size, repeat=True))
    with tf.variable_scope('net'):
      _dense_logits(tf.zeros([1, 4]))  # creates the variables outside the loop
    weights = tf.trainable_variables()

    def step(_):
      features, labels = iterator.get_next()
      with tf.variable_scope('net', reuse=True):
        logits = _dense_logits(features)
      loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
      grads = tf.gradients(loss, weights)
      with tf.control_dependencies([w.assign_sub(0.1 * g) for w, g in zip(weights, grads)]):
        return tf.identity(loss)

    loop = tf.while_loop(lambda i, _: i < iterations_per_loop,
                         lambda i, _: (i + 1, step(None)), (0, 0.0))
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(loop)  # warm-up call, not timed
      start = time.perf_counter()
      for _ in range(-(-steps // iterations_per_loop)):
        sess.run(loop)
      return time.perf_counter() - start


def _iris_model_fn(features, labels, mode, params):
  del params
  logits = _dense_logits(features)
  loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
  train_op = tf.train.GradientDescentOptimizer(0.1).minimize(
      loss, global_step=tf.train.get_or_create_global_step())
  return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op)


def _estimator_seconds(x, y, batch_size, epochs, per_epoch_calls):
  """Wall time of `epochs` epochs through TPUEstimator (use_tpu=False): one train() per epoch on
  a fresh one-epoch input, or one train() over a repeated input."""
  model_dir = tempfile.mkdtemp(prefix='benchmark-overhead-')
  try:
    estimator = tf.estimator.tpu.TPUEstimator(
        model_fn=_iris_model_fn, use_tpu=False, train_batch_size=batch_size,
        config=tf.estimator.tpu.RunConfig(model_dir=model_dir, log_step_count_steps=None,
                                          save_summary_steps=None))
    steps_per_epoch = len(y) // batch_size
    start = time.perf_counter()
    if per_epoch_calls:
      for _ in range(epochs):
        estimator.train(lambda params: _iris_dataset(x, y, params['batch_size'], repeat=False))
    else:
      estimator.train(lambda params: _iris_dataset(x, y, params['batch_size'], repeat=True),
                      max_steps=epochs * steps_per_epoch)
    return time.perf_counter() - start
  finally:
    shutil.rmtree(model_dir, ignore_errors=True)


def bench_overhead():
  x, y = iris()
  batch_size, epochs = FLAGS.batch_size, FLAGS.epochs
  steps = epochs * (len(y) // batch_size)
  cases = [
      ('session.run per step (iterations_per_loop=1)',
       lambda: _session_loop_seconds(x, y, batch_size, steps, 1)),
      ('100 steps per session.run (iterations_per_loop=100)',
       lambda: _session_loop_seconds(x, y, batch_size, steps, 100)),
      ('Estimator, one train() over a repeated tf.data input',
       lambda: _estimator_seconds(x, y, batch_size, epochs, per_epoch_calls=False)),
      ('Estimator, one train() per epoch',
       lambda: _estimator_seconds(x, y, batch_size, epochs, per_epoch_calls=True)),
  ]
  measurements, rows = {}, []
  for label, run in cases:
    seconds = [run() for _ in range(FLAGS.windows)]
    summary = measure.summarize(seconds)
    measurements[label] = dict(summary, microseconds_per_step=1e6 * summary['median'] / steps)
    rows.append([label, _fmt(summary, digits=2), '%.0f' % (1e6 * summary['median'] / steps)])
  details = {'network': 'dense 4-32-3, ReLU, SGD 0.1', 'examples': len(y),
             'batch_size': batch_size, 'epochs': epochs, 'steps': steps,
             'repeats': FLAGS.windows}
  return write_record('overhead', details, measurements, rows,
                      ['how', 'wall seconds median (min-max)', 'us/step'])


# --- entry point -----------------------------------------------------------------------------

def main(argv):
  if len(argv) != 2 or argv[1] not in SUBCOMMANDS:
    raise app.UsageError('usage: python -m trainer.benchmark {%s} [flags]; see the module '
                         'docstring or --helpfull' % ','.join(SUBCOMMANDS))
  try:
    for name in ('warmup_steps', 'steps_per_window', 'windows', 'batch_size', 'epochs'):
      if getattr(FLAGS, name) < 1:
        raise PipelineError('--%s must be >= 1, got %d.' % (name, getattr(FLAGS, name)))
    {'model': bench_model, 'input': bench_input, 'conv': bench_conv,
     'overhead': bench_overhead}[argv[1]]()
  except PipelineError as e:
    print('error: %s' % e, file=sys.stderr)
    sys.exit(2)


def run():
  logging.set_verbosity(logging.WARNING)
  app.run(main)


if __name__ == '__main__':
  run()
