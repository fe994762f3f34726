"""`python -m trainer.benchmark profile`: where a training step's time goes, per op type.

Runs the model_fn's train op on synthetic input in a bare `session.run` loop (the graph of
`model --path=session`), traces `--windows` x `--steps_per_window` steps after the warm-up with
TensorFlow's step stats (`RunOptions.FULL_TRACE`, the data behind its timeline), and sums each
op's wall time by the kernel that ran it. The kernel's name shows what the runtime did with the
graph: intel-tensorflow 1.15's layout pass runs `_MklConv2D` and inserts `_MklToTf` /
`_MklInputConversion` where a tensor leaves or enters its blocked layout; TF 2.15's oneDNN ops
are `_MklNativeConv2D` and the like, its Eigen ops plain `Conv2D`.

It also counts the step's floating-point operations with TensorFlow's profiler (the ops that
register a FLOP count: convolutions forward and backward, matmuls, some elementwise ops), so the
step's rate can be set against the host's peak.
"""

import collections
import re
import time

import tensorflow.compat.v1 as tf

from trainer.benchmark import model_bench
from trainer.benchmark import report
from trainer.run import cpu_bfloat16
from trainer.run import estimator as estimator_lib

# "node_name = OpType(inputs)": the timeline label of a node's execution.
_LABEL = re.compile(r'=\s*([A-Za-z0-9_>]+)\(')


def kernel_name(node_stats):
  """The op type a node ran as (e.g. '_MklConv2D'), from its timeline label.

  Args:
    node_stats: a `NodeExecStats` of a `StepStats`.

  Returns:
    str; the node's name when the label has no op type (e.g. '_SOURCE').
  """
  match = _LABEL.search(node_stats.timeline_label)
  return match.group(1) if match else node_stats.node_name


def op_type_micros(step_stats):
  """Microseconds of op execution per kernel name in one traced step.

  Args:
    step_stats: a `StepStats` proto (`RunMetadata.step_stats`).

  Returns:
    collections.Counter: kernel name -> microseconds (the sum of `all_end_rel_micros` of its
    nodes: each node's wall time, start to end of its compute).
  """
  micros = collections.Counter()
  for device in step_stats.dev_stats:
    if '/host:' in device.device or 'stream' in device.device:
      continue  # host-side copies and GPU stream views repeat the device's ops
    for node in device.node_stats:
      micros[kernel_name(node)] += node.all_end_rel_micros
  return micros


def profile_train_step(config, windows, top=12):
  """Traces training steps of `config`'s model and returns the profile record's measurements.

  Args:
    config: the run's `trainer.run.run_config.Config` (fake data, mode train).
    windows: `timing.Windows`; `windows.windows * windows.steps_per_window` steps are traced,
      after `windows.warmup_steps` untraced ones.
    top: how many kernel names the printed table shows.

  Returns:
    (measurements dict, printed rows): per kernel name its milliseconds per step and share of
    all op time; the traced steps' wall seconds; FLOPs per example.
  """
  batch_size = config.train_batch_size
  with tf.Graph().as_default() as graph:
    train_op = model_bench.build_train_op(config)
    flops = model_bench.step_flops(graph, batch_size)
    with tf.Session(config=cpu_bfloat16.apply(estimator_lib.host_session_config(
        config.model.model), config.model.precision, config.use_tpu)) as sess:
      sess.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
      for _ in range(windows.warmup_steps):
        sess.run(train_op)
      options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
      micros = collections.Counter()
      steps = windows.windows * windows.steps_per_window
      wall = 0.0
      for _ in range(steps):
        metadata = tf.RunMetadata()
        began = time.perf_counter()
        sess.run(train_op, options=options, run_metadata=metadata)
        wall += time.perf_counter() - began
        micros.update(op_type_micros(metadata.step_stats))
  total = float(sum(micros.values())) or 1.0
  kernels = [{'kernel': name, 'ms_per_step': us / 1e3 / steps, 'share': us / total}
             for name, us in micros.most_common()]
  measurements = {
      'traced_steps': steps,
      'seconds_per_step': wall / steps,
      'examples_per_sec_traced': batch_size * steps / wall,
      'op_ms_per_step': total / 1e3 / steps,
      'flops_per_example': flops,
      'gflops_per_sec': flops * batch_size * steps / wall / 1e9 if flops else None,
      'kernels': kernels,
  }
  rows = [[k['kernel'], '%.1f' % k['ms_per_step'], '%.1f%%' % (100 * k['share'])]
          for k in kernels[:top]]
  rows.append(['(all ops; step wall %.0f ms traced)' % (1e3 * wall / steps),
               '%.1f' % measurements['op_ms_per_step'], '100%'])
  if flops:
    rows.append(['FLOPs per example (registered ops)', '%.1f M' % (flops / 1e6),
                 '%.1f GFLOP/s' % measurements['gflops_per_sec']])
  return measurements, rows


def bench_profile(config, windows, output=None):
  """Runs the profile and writes its record (see `report.write_record`)."""
  measurements, rows = profile_train_step(config, windows)
  details = dict(
      model_bench.model_details(config, windows),
      input='synthetic (--fake_data), bare session.run with RunOptions.FULL_TRACE')
  return report.write_record('profile', details, measurements, rows,
                             ['kernel', 'ms per step', 'share of op time'], output)
