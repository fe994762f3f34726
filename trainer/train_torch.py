"""`python -m trainer.train_torch`: fine-tunes a run exported to PyTorch (`trainer.export_keras
--output=model.pt`) with the run's recipe (its optimizer, schedule scaled per 256 examples,
label smoothing, coupled L2 weight decay, gradient clipping: trainer/torch_run/recipe.py) on the
arrays of `trainer.prepare arrays` (no TensorFlow needed), on the CPU, a CUDA GPU or PyTorch/XLA
(--device=xla; PJRT_DEVICE=CPU here, TPU on a TPU VM with torch_xla[tpu]). Checkpoints
every --save_checkpoints_steps; run the same command again to resume (after kill -9, or after
SIGTERM, which saves at the step in flight and exits with status 75). Writes model.pt (loadable as the
export is) and results.json (top-1 and loss on the validation arrays). Guide: docs/migration.md.
"""

import json
import sys

from absl import app
from absl import flags
from absl import logging

from trainer import errors
from trainer.cli import help_text
from trainer.errors import PipelineError
from trainer.errors import Preempted
from trainer.flags import torch_flags
from trainer.torch_run import job

FLAGS = flags.FLAGS


def main(argv):
  del argv
  try:
    print(json.dumps(job.train(torch_flags.config(FLAGS)), sort_keys=True))
  except PipelineError as e:
    print('error: %s' % ' '.join(str(e).split('\n')), file=sys.stderr)
    sys.exit(errors.EXIT_USAGE)
  except Preempted as e:
    print('stopped: %s' % e, file=sys.stderr)
    sys.exit(errors.EXIT_RESUMABLE)


def run():
  """The console entry point (`tpu-pipeline-train-torch`)."""
  groups = help_text.define_groups([('Fine-tuning', torch_flags.define_train_torch_flags)])
  help_text.exit_if_help_asked(sys.argv, __doc__, groups, 'docs/migration.md')
  logging.set_verbosity(logging.INFO)
  app.run(main)


if __name__ == '__main__':
  run()
