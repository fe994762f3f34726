"""`python -m trainer.benchmark SUB-COMMAND [flags]`: repeatable throughput measurements.

  model     the model_fn's training examples/sec through the Estimator path and in a bare
            session.run loop, and the pipeline's overhead between them  (model_bench.py)
            --windows pairs of windows of the two paths alternate in one Estimator session
            (--path=estimator or session times one path alone).
  input     the training input_fn alone on real TFRecords (--data_dir)  (input_bench.py)
  profile   the model_fn's training step traced per op: milliseconds per kernel (_MklConv2D,
            _MklToTf, Conv2DBackpropFilter, ...) and FLOPs per example  (profile_bench.py)
  conv      a 5x5 convolution's seconds per iteration and GFLOP/s       (conv_bench.py)
  overhead  per-call overhead of session.run, the TPU-style loop and the Estimator
                                                                        (overhead_bench.py)

`python -m trainer.prepare photos --output_dir=DIR` makes real-photo records for `input`.

Each sub-command prints a table and writes a JSON record: the runtime (Python, TensorFlow version
and build, MKL, CPU model and flags, usable cores, GPUs), the configuration, and for each
measurement every timed window, their median and their spread ((max - min) / median).
"""

import tempfile

from absl import app
from absl import flags as absl_flags
from absl import logging

from trainer.benchmark import conv_bench
from trainer.benchmark import input_bench
from trainer.benchmark import model_bench
from trainer.benchmark import overhead_bench
from trainer.benchmark import profile_bench
from trainer.benchmark import timing
from trainer.cli import help_text
from trainer.cli import outcome
from trainer.errors import PipelineError
from trainer.flags import benchmark_flags
from trainer.flags import run_flags
from trainer.flags import to_config
from trainer.storage import outputs

FLAGS = absl_flags.FLAGS
SUBCOMMANDS = ('model', 'profile', 'input', 'conv', 'overhead')


def _run_config(**overrides):
  """The trainer's run config from the parsed flags, with `overrides` (flag name -> value)."""
  return to_config.config_from_flags(dict(FLAGS.flag_values_dict(), **overrides))


def _model_config(model_dir, train_steps):
  return _run_config(fake_data=True, data_dir=None, model_dir=model_dir, job_dir=None,
                     export_dir=None, mode='train', train_steps=train_steps, train_epochs=None,
                     train_batch_size=FLAGS.batch_size, log_every_n_secs=3600.0)


def benchmark(subcommand):
  """Runs `subcommand` (one of SUBCOMMANDS) with the parsed flags; returns its record.

  Raises:
    PipelineError: a bad flag value or missing data; an --output that exists, without
      --overwrite (the default record path is replaced: a re-run re-measures the same thing).
  """
  if FLAGS.output:
    outputs.check_output_file(FLAGS.output, '--output', FLAGS.overwrite)
  for name in ('warmup_steps', 'steps_per_window', 'windows', 'batch_size', 'epochs'):
    if getattr(FLAGS, name) < 1:
      raise PipelineError('--%s must be >= 1, got %d.' % (name, getattr(FLAGS, name)))
  windows = timing.Windows(FLAGS.warmup_steps, FLAGS.windows, FLAGS.steps_per_window)
  if subcommand == 'model':
    return model_bench.bench_model(_model_config, windows, FLAGS.path, FLAGS.output)
  if subcommand == 'profile':
    return profile_bench.bench_profile(_model_config(tempfile.gettempdir(), windows.total_steps),
                                       windows, FLAGS.output)
  if subcommand == 'input':
    if not FLAGS.data_dir:
      raise PipelineError('input needs --data_dir: a directory of TFRecord shards with '
                          'dataset.json (e.g. `python -m trainer.prepare photos '
                          '--output_dir=DIR`).')
    config = _run_config(model_dir=tempfile.gettempdir(), job_dir=None, export_dir=None,
                         mode='train', train_steps=1, train_epochs=None,
                         train_batch_size=FLAGS.batch_size)
    return input_bench.bench_input(config.data, FLAGS.batch_size, windows, FLAGS.input_stages,
                                   FLAGS.output, FLAGS.reference)
  if subcommand == 'conv':
    return conv_bench.bench_conv(windows, FLAGS.output)
  return overhead_bench.bench_overhead(FLAGS.batch_size, FLAGS.epochs, FLAGS.windows,
                                       FLAGS.output)


def main(argv):
  if len(argv) != 2 or argv[1] not in SUBCOMMANDS:
    raise app.UsageError('usage: python -m trainer.benchmark {%s} [flags]; see the module '
                         'docstring or --helpfull' % ','.join(SUBCOMMANDS))
  try:
    benchmark(argv[1])
  except PipelineError as e:
    outcome.refuse(e)


def run():
  """Defines the flags and runs the command."""
  groups = run_flags.define_run_flags() + help_text.define_groups(
      [('Benchmark', benchmark_flags.define_benchmark_flags)])
  outcome.start(__doc__, groups, main, 'BENCHMARKS.md', logging.WARNING)


if __name__ == '__main__':
  run()
