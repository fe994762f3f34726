"""`python -m trainer.submit [flags] -- [trainer.main flags]`: submits the trainer to AI Platform
Training: builds the source distribution and runs (or, with --dry_run, prints) the
`gcloud ai-platform jobs submit training` command (`trainer.cloud.aiplatform_job`).

  python -m trainer.submit --job_dir=gs://BUCKET/jobs/r18 --scale_tier=BASIC_GPU \\
      -- --data_dir=gs://BUCKET/fashion_mnist --resnet_depth=18 --train_epochs=9

Everything after `--` goes to `python -m trainer.main` on AI Platform, which also passes
--job-dir (the trainer's default --model_dir).
"""

import datetime
import shlex
import shutil
import subprocess
import sys

from absl import app
from absl import flags as absl_flags
from absl import logging

from flags import submit_flags
from trainer.cloud import aiplatform_job
from trainer.errors import PipelineError

FLAGS = absl_flags.FLAGS


def main(argv):
  trainer_args = argv[1:]  # absl leaves what follows `--` here
  job_name = FLAGS.job_name or datetime.datetime.utcnow().strftime('tpu_pipeline_%Y%m%d_%H%M%S')
  try:
    # Validate before building anything.
    aiplatform_job.submit_command(job_name, 'package.tar.gz', FLAGS.job_dir, trainer_args,
                                  FLAGS.region, FLAGS.scale_tier, FLAGS.config)
    package = aiplatform_job.build_sdist(FLAGS.dist_dir)
    command = aiplatform_job.submit_command(
        job_name, package, FLAGS.job_dir, trainer_args, FLAGS.region, FLAGS.scale_tier,
        FLAGS.config, FLAGS.runtime_version, FLAGS.python_version, FLAGS.gcloud)
    if FLAGS.dry_run:
      print(' '.join(shlex.quote(c) for c in command))
      return
    if not shutil.which(FLAGS.gcloud):
      raise PipelineError('%s is not on PATH: install the Google Cloud SDK, or use --dry_run to '
                          'print the command.' % FLAGS.gcloud)
    logging.info('Running %s', ' '.join(shlex.quote(c) for c in command))
    sys.exit(subprocess.call(command))
  except PipelineError as e:
    print('error: %s' % e, file=sys.stderr)
    sys.exit(2)


def run():
  """The console entry point (`tpu-pipeline-submit`)."""
  submit_flags.define_submit_flags()
  logging.set_verbosity(logging.INFO)
  app.run(main)


if __name__ == '__main__':
  run()
