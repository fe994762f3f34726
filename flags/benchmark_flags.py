"""Flags of `python -m trainer.benchmark`, besides the trainer's own (`flags.run_flags`), which the
model and input sub-commands read to build the run they time."""

from absl import flags


def define_benchmark_flags():
  """Defines the benchmark's flags (once per process)."""
  flags.DEFINE_integer('batch_size', 32, 'model: training examples per step. input: images per '
                       'batch. overhead: examples per step.')
  flags.DEFINE_integer('warmup_steps', 5, 'Steps run before timing starts (graph optimisation, '
                       'input warm-up, allocator growth).')
  flags.DEFINE_integer('steps_per_window', 10, 'Steps (input: batches; conv: iterations) per '
                       'timed window.')
  flags.DEFINE_integer('windows', 5, 'Timed windows (model with --path=both: pairs of windows, '
                       'one of each path; overhead: repeats); the record gives their median and '
                       'spread.')
  flags.DEFINE_enum('path', 'both', ['both', 'estimator', 'session'],
                    'model: both: windows of Estimator steps alternate with windows of the same '
                    'train op in a bare session.run loop, in one session; estimator or session: '
                    'time one path alone (the bare loop in a graph and session of its own).')
  flags.DEFINE_integer('epochs', 20, 'overhead: epochs over the 150 iris examples.')
  flags.DEFINE_string('output', None, 'Where to write the JSON record (default: '
                      'runs/benchmarks/<sub-command>-<details>-<runtime>.json, which a re-run '
                      'replaces). A file given here that exists is refused before any timing, '
                      'unless --overwrite.')
  flags.DEFINE_string('reference', None, 'input: a checkout of tensorflow/tpu at branch r1.15 '
                      '(outside this repository): also time the Cloud TPU reference ResNet\'s '
                      'training input beside this project\'s, alternating windows, same records.')
  flags.DEFINE_bool('input_stages', False, 'input: also time the pipeline cut after each stage '
                    '(read, decode, crop window, resize) of JPEG records, to show where time goes.')
