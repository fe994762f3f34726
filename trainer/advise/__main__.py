"""`python -m trainer.advise [trainer.main flags]`: will a TPU or a GPU help this job? Before it
runs, the predicted step time, its bounds and what binds it on this CPU (measured) and on each
GPU and TPU of targets.json, with time and cost per epoch and to the run's end.

  python -m trainer.advise --data_dir=data/fashion_mnist --model=resnet --resnet_depth=18 \\
      --train_batch_size=128 --train_epochs=9

From the job's own training graph (job_cost.py: FLOPs and bytes per op, by TensorFlow's
profiler), this host's figures (host_probe.py, a few seconds), the job's input_fn timed here
(with --data_dir; or --input_rate) and the sourced targets table, by a roofline per op
(step_model.py). Prints a table and, with --output, writes the JSON record. docs/advise.md says
how to read it and how well it has predicted what ran.
"""

import os
import sys
import tempfile

from absl import app
from absl import flags as absl_flags
from absl import logging
import tensorflow.compat.v1 as tf

from trainer.advise import advisor
from trainer.advise import host_probe
from trainer.advise import job_cost
from trainer.advise import report
from trainer.advise import shape_probe
from trainer.advise import targets as targets_lib
from trainer.cli import help_text
from trainer.cli import log_noise
from trainer.errors import PipelineError
from trainer.flags import run_flags
from trainer.flags import to_config
from trainer.host import cpu
from trainer.run import estimator
from trainer.storage import json_files
from trainer.storage import outputs

FLAGS = absl_flags.FLAGS
# The model_dir a Config needs; nothing is written there (the graph is only built).
_SCRATCH = os.path.join(tempfile.gettempdir(), 'trainer-advise')


def _define_advise_flags():
  absl_flags.DEFINE_list('targets', ['all'], 'Targets to predict for (names of '
                         'trainer/advise/targets.json, e.g. "V100,TPU v3-8"), or all. This host '
                         'is always the first; --tpu_topology=v3-32 adds that slice (its '
                         'generation\'s 8-core entry scaled, the all-reduce not modelled).')
  absl_flags.DEFINE_float('input_rate', None, 'The job\'s input_fn on this host, examples/s on '
                          'all its cores (default: timed here with --data_dir for a few seconds; '
                          'without either, the input is left out of the prediction).')
  absl_flags.DEFINE_string('output', None, 'Also write the advice as JSON here (an existing '
                           'file is refused unless --overwrite).')
  absl_flags.DEFINE_boolean('time_shapes', True, 'Time each convolution and matmul shape of the '
                            'job on this host (once per host: the probe cache keeps them; '
                            'docs/advise.md). --notime_shapes prices them at one probe '
                            'convolution\'s and matmul\'s rate: faster the first time, but '
                            '1.7-2.6x optimistic for ResNet-18 and InceptionV3 on a 2-vCPU Zen 5.')
  absl_flags.DEFINE_enum('road', 'estimator', targets_lib.ROADS[:3],
                         'estimator: this job as trainer.main runs it (TPU v2-v4, GPUs through '
                         'TensorFlow\'s executor). keras: as trainer.train_keras runs its Keras '
                         'twin on JAX (one XLA program per step on GPUs; TPU v5e and v6e too). '
                         'torch_xla: as trainer.train_torch --device=xla runs the PyTorch export '
                         '(one XLA device: the TPUs, each at one of its devices; no GPU, no '
                         'input timing).')


def _configs():
  """(the job's config with its real data, or None; the config of its graph on synthetic input
  of the same shapes)."""
  given = {n for n in FLAGS if FLAGS[n].present} - {'tpu_topology'}  # a target here (main)
  values = dict(FLAGS.flag_values_dict(), model_dir=_SCRATCH, job_dir=None, export_dir=None,
                mode='train', tpu_topology=None)
  if not ({'train_steps', 'train_epochs'} & given):
    values['train_steps'] = 1
  real = None
  if FLAGS.model_fn or FLAGS.input_fn:  # a legacy job builds its graph from its own input_fn
    return real, to_config.config_from_flags(values, given=given)
  if FLAGS.data_dir:
    real = to_config.config_from_flags(values, given=given)
    values.update(image_size=real.data.image_size, num_classes=real.data.num_classes,
                  train_steps=real.train_steps, train_epochs=None)
    if real.data.max_seq_length:
      values.update(max_seq_length=real.data.max_seq_length, vocab_size=real.data.vocab_size)
  values.update(fake_data=True, data_dir=None)
  return real, to_config.config_from_flags(values, given=given | {'fake_data'})


def _slice_target(accelerator_type):
  target = targets_lib.tpu_slice(accelerator_type, FLAGS.road)
  if target is None:
    raise PipelineError('--tpu_topology=%s: trainer/advise/targets.json has no %s entry to '
                        'scale; known: TPU v2, v3 and v4 slices.'
                        % (accelerator_type, accelerator_type.split('-')[0]))
  return target


def _input_rate(real):
  if FLAGS.input_rate:
    return FLAGS.input_rate
  if real is None or FLAGS.road == 'torch_xla':  # train_torch reads arrays, not the input_fn
    return None
  from trainer.benchmark import input_bench  # pylint: disable=g-import-not-at-top
  from trainer.benchmark import timing  # pylint: disable=g-import-not-at-top
  rates = input_bench.input_rates(real.data, real.train_batch_size, timing.Windows(3, 3, 5))
  return sorted(rates)[len(rates) // 2]


def main(argv):
  if len(argv) > 1:
    raise app.UsageError('unexpected arguments: %s' % ' '.join(argv[1:]))
  try:
    targets_lib.check_names(FLAGS.targets)
    if FLAGS.tpu_topology and FLAGS.road == 'torch_xla':
      raise PipelineError('--tpu_topology with --road=torch_xla: trainer.train_torch runs one '
                          'process on one device; drop --tpu_topology (the table\'s TPUs are '
                          'priced at one device on this road).')
    slice_target = _slice_target(FLAGS.tpu_topology) if FLAGS.tpu_topology else None
    if FLAGS.input_rate is not None and FLAGS.input_rate <= 0:
      raise PipelineError('--input_rate=%s: give the input_fn\'s examples/s on this host, > 0.'
                          % FLAGS.input_rate)
    if FLAGS.output:  # before any work: an existing file is kept unless --overwrite
      outputs.check_output_file(FLAGS.output, '--output', FLAGS.overwrite)
    if FLAGS.train_epochs is not None and not FLAGS.data_dir:
      raise PipelineError('--train_epochs needs --data_dir (the epoch\'s size is in its '
                          'dataset.json); without data give --train_steps.')
    real, config = _configs()
    name = report.job_name(config)
    cost = job_cost.from_config(config, name)
    # This CPU at its float32 rates, for a --precision=bfloat16 job too (own_device.py says why),
    # with the threads trainer.main would give the job.
    session_config = estimator.host_session_config(config.model.model)
    figures = host_probe.measure_cached(session_config)
    shapes = (shape_probe.measure(cost, figures['conv_flops'], session_config)
              if FLAGS.time_shapes else dict(shape_probe.NOT_TIMED))
    here = host_probe.target(figures, shapes['seconds'])
    targets = targets_lib.select(FLAGS.targets, here, FLAGS.road,
                                 tf32=targets_lib.uses_tf32(FLAGS.road, tf.__version__))
    if slice_target and slice_target['name'] not in [t['name'] for t in targets]:
      targets.append(slice_target)
    here_rate = _input_rate(real)
    cores = cpu.read_cpu().logical_cpus
    steps_per_epoch = (real.data.num_train_examples / float(real.train_batch_size)
                       if real else None)
    length_given = FLAGS['train_steps'].present or FLAGS['train_epochs'].present
    train_steps = (real.train_steps if real else config.train_steps) if length_given else None
    advice = advisor.advise(cost, targets, here_rate / cores if here_rate else None, here_rate,
                            steps_per_epoch, train_steps, config.iterations_per_loop)
    record = report.record(cost, figures, here_rate, advice, targets, shapes)
  except PipelineError as e:
    print('error: %s' % e, file=sys.stderr)
    sys.exit(2)
  print(report.table(record))
  if FLAGS.output:
    json_files.write(FLAGS.output, record)


def run():
  groups = run_flags.define_run_flags() + help_text.define_groups(
      [('Advise', _define_advise_flags)])
  help_text.exit_if_help_asked(sys.argv, __doc__, groups, 'docs/advise.md')
  logging.set_verbosity(logging.WARNING)
  log_noise.quiet_unless_verbose(0)
  app.run(main)


if __name__ == '__main__':
  run()
