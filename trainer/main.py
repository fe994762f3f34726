"""Trains, evaluates, predicts with or dry-runs (--mode) one of the pipeline's networks, on the
CPU/GPU or, with --use_tpu, on a Cloud TPU.

  python -m trainer.main --data_dir=DIR --model_dir=DIR --model=resnet --train_epochs=N
  python -m trainer.main ... --use_tpu --tpu=NAME      (--tpu=local on a TPU VM)

Flags not given take the --model recipe or the dataset.json of --data_dir.
"""

import json
import logging as std_logging
import sys

from absl import app
from absl import flags as absl_flags
from absl import logging
import tensorflow.compat.v1 as tf

from trainer.advise import own_device
from trainer.cli import help_text
from trainer.cli import log_noise
from trainer.cloud import aiplatform_env
from trainer.errors import EXIT_RESUMABLE
from trainer.errors import PipelineError
from trainer.flags import run_flags
from trainer.flags import to_config
from trainer.run import driver
from trainer.run import preemption
from trainer.run import run_errors

FLAGS = absl_flags.FLAGS


def main(argv):
  if len(argv) > 1:
    raise app.UsageError('unexpected arguments: %s' % ' '.join(argv[1:]))
  log_noise.quiet_unless_verbose(FLAGS.verbosity)
  try:
    aiplatform_env.check_hypertune_trial()
    config = to_config.config_from_flags(FLAGS.flag_values_dict(),
                                         given={n for n in FLAGS if FLAGS[n].present})
    results = driver.run(config, step_time=own_device)
    aiplatform_env.report_hypertune_metric(results)
  except PipelineError as e:
    print('error: %s' % e, file=sys.stderr)
    sys.exit(2)
  except preemption.Preempted as e:
    print(str(e), file=sys.stderr)
    sys.exit(EXIT_RESUMABLE)
  except (tf.errors.UnavailableError, tf.errors.AbortedError) as e:
    message = run_errors.storage_outage_message(e)
    if not message:
      raise
    print('error: %s' % message, file=sys.stderr)
    sys.exit(EXIT_RESUMABLE)
  print(json.dumps(results, indent=2, sort_keys=True))


def _job_dir_spelling(argv):
  """AI Platform passes `--job-dir`; absl flag names use underscores."""
  return [('--job_dir' + arg[len('--job-dir'):]) if arg.split('=')[0] == '--job-dir' else arg
          for arg in argv]


def run():
  """The console entry point (`tpu-pipeline-train`)."""
  groups = run_flags.define_run_flags()
  if help_text.wants_help(sys.argv):  # ours, grouped; absl's --helpfull keeps everything
    sys.stdout.write(help_text.render(__doc__, groups))
    sys.exit(0)
  sys.argv = _job_dir_spelling(sys.argv)
  logging.set_verbosity(logging.INFO)
  # TF 1.15 gives its logger a stderr handler of its own; absl's handler already prints its
  # records, so drop TF's to avoid every line appearing twice.
  std_logging.getLogger('tensorflow').handlers = []
  app.run(main)


if __name__ == '__main__':
  run()
