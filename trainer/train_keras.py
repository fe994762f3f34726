"""`python -m trainer.train_keras`: trains one of the pipeline's networks with Keras 3 on any
backend (KERAS_BACKEND=tensorflow, jax or torch), from scratch or, to fine-tune, from a converted
.keras model (--init_model, scored on the evaluation split before and after), on the
pipeline's TFRecords (`keras_models.datasets`), or on the NumPy arrays of `trainer.prepare
arrays` (JAX or torch need no TensorFlow then), with its recipes: the warmup and step or cosine
schedule scaled per 256 examples, coupled L2 weight decay, label smoothing, gradient clipping, an
optional mixed_bfloat16 policy (`trainer.keras_run`). The flags become one checked config first
(flags/to_keras_config.py).

Data-parallel over every local device: MirroredStrategy on TensorFlow, keras.distribution's
DataParallel on JAX (--multi_host: over every host of a slice), one device on torch. Checkpoints
every --save_checkpoints_steps into model_dir/checkpoints; run the same command again to resume
(after kill -9, or after SIGTERM, which saves at the step in flight and exits with status 75;
bit-exact on one device, under MirroredStrategy (tested on CPU devices) and on JAX:
docs/migration.md). Writes TensorBoard logs, results.json (accuracy and loss on the whole
evaluation split), model.keras and, on TensorFlow from TFRecords, model_serving/. Guide:
docs/migration.md.
"""

from absl import flags

from trainer.cli import help_text
from trainer.cli import outcome
from trainer.flags import keras_flags
from trainer.flags import to_keras_config
from trainer.keras_run import job

FLAGS = flags.FLAGS


def main(argv):
  del argv
  outcome.print_result(lambda: job.train(to_keras_config.keras_run_config(FLAGS)))


def run():
  """The console entry point (`tpu-pipeline-train-keras`)."""
  groups = help_text.define_groups([('Training', keras_flags.define_train_keras_flags)])
  outcome.start(__doc__, groups, main, 'docs/migration.md')


if __name__ == '__main__':
  run()
