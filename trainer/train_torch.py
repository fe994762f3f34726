"""`python -m trainer.train_torch`: fine-tunes a run exported to PyTorch (`trainer.export_keras
--output=model.pt`) with the run's recipe (its optimizer, schedule scaled per 256 examples,
label smoothing, coupled L2 weight decay, gradient clipping: trainer/torch_run/recipe.py) on the
arrays of `trainer.prepare arrays` (no TensorFlow needed), on the CPU, a CUDA GPU or PyTorch/XLA
(--device=xla; PJRT_DEVICE=CPU here, TPU on a TPU VM with torch_xla[tpu]). Checkpoints
every --save_checkpoints_steps; run the same command again to resume (after kill -9, or after
SIGTERM, which saves at the step in flight and exits with status 75). Writes model.pt (loadable as the
export is) and results.json (top-1 and loss on the validation arrays). Guide: docs/migration.md.
"""

from absl import flags

from trainer.cli import help_text
from trainer.cli import outcome
from trainer.flags import torch_flags
from trainer.torch_run import job

FLAGS = flags.FLAGS


def main(argv):
  del argv
  outcome.print_result(lambda: job.train(torch_flags.config(FLAGS)))


def run():
  """The console entry point (`tpu-pipeline-train-torch`)."""
  groups = help_text.define_groups([('Fine-tuning', torch_flags.define_train_torch_flags)])
  outcome.start(__doc__, groups, main, 'docs/migration.md')


if __name__ == '__main__':
  run()
