"""`python -m trainer.benchmark model`: steady-state training examples/sec of the real model_fn
through the real Estimator path (progress hook, host_call summaries, checkpoints at start and
end) on synthetic input, and of the same graph's train op in a bare `session.run` loop; their
ratio is the pipeline's own overhead. The bare loop's rate (the Estimator path's when only that
ran) in FLOP/s (the graph's registered ops, `step_flops`) is set against the CPU's peak in the
run's precision (`trainer.host.cpu_peak`)."""

import shutil
import tempfile
import time

import numpy as np
import tensorflow.compat.v1 as tf

from trainer.benchmark import report
from trainer.benchmark import stats
from trainer.benchmark import timing
from trainer.data import input_fn as input_fn_lib
from trainer.errors import PipelineError
from trainer.host import cpu_peak
from trainer.run import estimator as estimator_lib
from trainer.run import hooks as hooks_lib
from trainer.run import user_model_fn

PATHS = {'both': 'alternating windows in one Estimator session (timing.BareWindows)',
         'estimator': 'the Estimator path alone',
         'session': 'a bare loop in a graph and session of its own'}


def _train(config, hook):
  """Runs `estimator.train` as `trainer.run.driver` runs it (progress hook included), plus
  `hook`."""
  estimator = estimator_lib.build_estimator(config)
  progress = hooks_lib.ProgressHook(config.model, config.train_steps, config.log_every_n_secs)
  estimator.train(estimator_lib.input_fns(config, estimator)[0], max_steps=config.train_steps,
                  hooks=[progress, hook])


def interleaved_rates(config, windows):
  """`estimator.train` as `trainer.run.driver` runs it, with windows of its steps alternating with
  windows of the same session's train op in a bare loop (see timing.BareWindows).

  Returns:
    (Estimator examples/sec per window, bare examples/sec per window, overhead in percent of
    each adjacent pair of windows).
  """
  hook = timing.BareWindows(windows.warmup_steps, windows.windows, windows.steps_per_window)
  _train(config, hook)
  if len(hook.windows) < 2 * windows.windows:
    raise PipelineError('training stopped after %d of %d windows.' % (
        len(hook.windows), 2 * windows.windows))
  examples = windows.steps_per_window * config.train_batch_size
  return ([examples / s for s in hook.seconds('estimator')],
          [examples / s for s in hook.seconds('bare')], hook.pair_overheads())


def estimator_rates(config, windows):
  """Examples/sec per window of `estimator.train` as `trainer.run.driver` runs it."""
  timer = timing.StepTimes()
  _train(config, timer)
  return windows.rates(timer.times, config.train_batch_size)


def build_train_op(config):
  """The model_fn's train op on `config`'s training input, built in the default graph (no
  Estimator, no hooks): what the bare loops of `model --path=session` and `profile` run.

  Returns:
    the train op; run `tf.global_variables_initializer()` and
    `tf.local_variables_initializer()` first.
  """
  batch_size = config.train_batch_size
  params = {'batch_size': batch_size}
  if config.model.is_model_fn:  # a legacy job: its own input_fn and model_fn
    input_fn = user_model_fn.input_fns_of(config.model, config.data.data_dir)[0]
    model_fn = user_model_fn.model_fn_of(config.model, use_tpu=False)
  else:
    input_fn = input_fn_lib.input_fn_builder(config.data, is_training=True)
    model_fn = estimator_lib.model_fn_of(config)
  features, labels = tf.data.make_one_shot_iterator(input_fn(dict(params))).get_next()
  return model_fn(features, labels, tf.estimator.ModeKeys.TRAIN, params, None).train_op


def step_flops(graph, batch_size):
  """Floating-point operations per training example of the ops in `graph` that register a FLOP
  count (`tf.profiler` 'float_ops'), or None where the profiler is unavailable.

  The per-example figure divides the whole graph's count by `batch_size`. Ops without a
  registered count (batch norm's fused kernels, ReLU and ELU among them) are left out, and
  ops that no step runs are counted (e.g. the full convolutions `models/resnet.py` replaces by
  their centre tap on 1x1 maps: 14.2 M of ResNet-18's count at 32 px): an estimate dominated by
  the convolutions and matmuls.
  """
  try:
    options = tf.profiler.ProfileOptionBuilder.float_operation()
    options['output'] = 'none'
    total = tf.profiler.profile(graph, cmd='op', options=options).total_float_ops
  except (AttributeError, ValueError, tf.errors.OpError):
    return None
  return total / float(batch_size)


def model_details(config, windows):
  """The network, batch and windows of a model or profile record (`report.write_record`)."""
  model = config.model
  return dict(
      windows.as_record(), model=model.model,
      resnet_depth=model.resnet_depth if model.model == 'resnet' else None,
      image_size=model.image_size if config.data.modality == 'image' else None,
      max_seq_length=model.max_seq_length if config.data.modality == 'text' else None,
      num_classes=model.num_classes, batch_size=config.train_batch_size,
      precision=model.precision)


def session_rates(config, session_config, windows):
  """Examples/sec per window of the same model_fn's train op and input in a bare loop, in a
  graph and session of its own."""
  with tf.Graph().as_default():
    train_op = build_train_op(config)
    with tf.Session(config=session_config) as sess:
      sess.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
      times = []
      for _ in range(config.train_steps):
        sess.run(train_op)
        times.append(time.perf_counter())
  return windows.rates(times, config.train_batch_size)


def _measure(path, make_config, model_dir, windows):
  """(config, measurements) of the timed path(s)."""
  if path == 'both':
    # Untimed and timed bare steps advance the global step as well.
    config = make_config(model_dir, 2 * windows.total_steps)
    estimator, bare, pairs = interleaved_rates(config, windows)
    return config, {'estimator_examples_per_sec': timing.summarize(estimator),
                    'session_examples_per_sec': timing.summarize(bare),
                    'overhead_percent_per_pair': pairs}
  config = make_config(model_dir, windows.total_steps)
  if path == 'estimator':
    return config, {'estimator_examples_per_sec': timing.summarize(
        estimator_rates(config, windows))}
  session_config = estimator_lib.build_estimator(config).config.session_config
  return config, {'session_examples_per_sec': timing.summarize(
      session_rates(config, session_config, windows))}


def _flop_rate(config, measurements):
  """Adds the bare loop's rate (else the Estimator path's) in FLOP/s and the CPU's peak in the
  run's precision to `measurements` (flops_per_example, gflops_per_sec, peak_gflops_per_sec and
  peak_basis, None where unknown); returns the table's rows."""
  with tf.Graph().as_default() as graph:
    build_train_op(config)
    flops = step_flops(graph, config.train_batch_size)
  rates = [measurements[k]['median'] for k in ('session_examples_per_sec',
                                               'estimator_examples_per_sec') if k in measurements]
  peak = cpu_peak.host_peak(config.model.precision)
  measurements.update(flops_per_example=flops,
                      gflops_per_sec=flops * rates[0] / 1e9 if flops else None,
                      peak_gflops_per_sec=peak.flops_per_sec / 1e9 if peak else None,
                      peak_basis=peak.basis if peak else None)
  if not flops:
    return []
  rate = '%.1f GFLOP/s (%.1f MFLOPs an example)' % (measurements['gflops_per_sec'], flops / 1e6)
  if peak:
    rate += ', %.0f%% of the %s peak %.0f GFLOP/s: %s' % (
        100 * measurements['gflops_per_sec'] / measurements['peak_gflops_per_sec'],
        config.model.precision, measurements['peak_gflops_per_sec'], peak.basis)
  else:
    rate += '; no %s peak known for this CPU (trainer/host/cpu_peak.py)' % config.model.precision
  return [['FLOP rate (registered ops, median)', rate]]


def bench_model(make_config, windows, path='both', output=None):
  """Runs the model benchmark and writes its record.

  Args:
    make_config: make_config(model_dir, train_steps) -> the `trainer.run.run_config.Config` of the
      run to time (fake data, mode train).
    windows: `timing.Windows`.
    path: a key of PATHS.
    output: the JSON record's path (None: report's default).

  Returns:
    the record (dict).
  """
  model_dir = tempfile.mkdtemp(prefix='benchmark-model-')
  try:
    config, measurements = _measure(path, make_config, model_dir, windows)
    rows = []
    for key, label in (('estimator_examples_per_sec', 'Estimator path'),
                       ('session_examples_per_sec', 'bare session.run')):
      if key in measurements:
        rows.append([label, report.fmt(measurements[key])])
    if path == 'both':
      # Adjacent windows see the same machine; the median pair is robust to a drift or a stall.
      pairs = measurements['overhead_percent_per_pair']
      measurements['overhead_percent'] = float(np.median(pairs))
      interval = stats.median_interval(pairs) if len(pairs) > 1 else None
      measurements['overhead_percent_interval_90'] = interval
      rows.append(['pipeline overhead (median pair)', '%.1f%%%s (pairs %.1f to %.1f%%)' % (
          measurements['overhead_percent'],
          ', 90%% interval %.1f to %.1f%%' % interval if interval else '', min(pairs),
          max(pairs))])
    rows += _flop_rate(config, measurements)
    model = config.model
    details = dict(
        model_details(config, windows),
        optimizer=model.optimizer, moving_average_decay=model.moving_average_decay,
        skip_host_call=model.skip_host_call, path=path,
        window_order=timing.abba_order(windows.windows) if path == 'both' else None,
        paths=PATHS[path], input='synthetic (--fake_data: a fixed set of 64 examples, repeated)')
    return report.write_record('model', details, measurements, rows,
                               ['path', 'examples/sec median (min-max)'], output)
  finally:
    shutil.rmtree(model_dir, ignore_errors=True)
