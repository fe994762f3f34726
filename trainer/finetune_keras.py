"""`python -m trainer.finetune_keras`: training goes on after Estimator. Fine-tunes a converted
Keras model (`trainer.export_keras`) with `model.fit` on this pipeline's data and input, scores
the evaluation split before and after, and writes the model and its figures.

On the TensorFlow backend it trains under tf.distribute.MirroredStrategy (the GPUs, or
--cpu_replicas logical CPUs); on JAX on JAX's default device. Loss: softmax cross-entropy of the
logits (plus --aux_loss_weight x the auxiliary head's for InceptionV3), no weight decay. Guide
(also TPUStrategy and JAX on TPU): docs/migration.md.
"""

import contextlib
import json
import os
import sys
import time

from absl import app
from absl import flags
from absl import logging
import keras
import tensorflow as tf

from trainer.cli import help_text
from flags import keras_flags
from keras_models import build  # also registers the custom layers load_model needs
from keras_models import datasets
from trainer.errors import PipelineError
from trainer.keras_run.devices import strategy_of
from trainer.storage import json_files
from trainer.storage import outputs

FLAGS = flags.FLAGS
_EVAL_LOSS = 'xent'


def _compile(model, f):
  optimizer = (keras.optimizers.SGD(f.learning_rate, momentum=0.9) if f.optimizer == 'momentum'
               else keras.optimizers.Adam(f.learning_rate))
  xent = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
  # The evaluation's loss is the main head's cross-entropy, as the pipeline's eval_loss.
  metrics = ['accuracy', keras.metrics.SparseCategoricalCrossentropy(from_logits=True,
                                                                     name=_EVAL_LOSS)]
  if isinstance(model.output, dict):
    model.compile(optimizer=optimizer, loss={build.LOGITS: xent, build.AUX_LOGITS: xent},
                  loss_weights={build.LOGITS: 1.0, build.AUX_LOGITS: f.aux_loss_weight},
                  metrics={build.LOGITS: metrics})
  else:
    model.compile(optimizer=optimizer, loss=xent, metrics=metrics)


def _scores(model, eval_data):
  """(loss, accuracy) of the main head on the evaluation split."""
  scores = model.evaluate(eval_data, verbose=0, return_dict=True)
  def score(name):
    return float(scores[name] if name in scores else scores[build.LOGITS + '_' + name])
  return {'loss': score(_EVAL_LOSS), 'accuracy': score('accuracy')}


def _labels_for(model, dataset):
  """(inputs, labels) batches as the model's outputs want them: InceptionV3's two heads both
  learn the labels."""
  if not isinstance(model.output, dict):
    return dataset
  return dataset.map(lambda x, y: (x, {build.LOGITS: y, build.AUX_LOGITS: y}))


def results_path_of(output):
  """Where the figures of the model written to `output` (.keras) go."""
  return output[:-len('.keras')] + '.results.json'


def finetune(f):
  """Fine-tunes per the flag values `f`; returns the results dict."""
  if not f.output.endswith('.keras'):
    raise PipelineError('--output=%s: give a path ending in .keras.' % f.output)
  if f.steps % f.log_every_steps:
    raise PipelineError('--steps=%d is not a multiple of --log_every_steps=%d (the steps are run '
                        'in that many at a time): change one of them.'
                        % (f.steps, f.log_every_steps))
  results_path = results_path_of(f.output)
  outputs.check_output_file(f.output, '--output', f.overwrite)  # before any work
  outputs.check_file_usable(results_path, '--output')
  if tf.io.gfile.exists(results_path) and not f.overwrite:
    raise PipelineError('--output=%s: its results file %s already exists. Choose another '
                        '--output, or pass --overwrite to replace both.'
                        % (f.output, results_path))
  keras.utils.set_random_seed(f.seed)
  strategy = strategy_of(f.cpu_replicas)
  scope = strategy.scope() if strategy else contextlib.nullcontext()
  with scope:
    try:
      model = keras.saving.load_model(f.model)
    except (OSError, ValueError) as e:
      raise PipelineError('--model=%s cannot be loaded as a Keras model: %s' % (f.model, e))
    _compile(model, f)
  overrides = {} if f.crop_padding is None else {'crop_padding': f.crop_padding}
  data = datasets.data_config(f.data_dir, tuple(model.input.shape[1:]), f.seed, **overrides)
  width = build.logits_of(model.output).shape[-1]
  if width != data.num_classes:
    raise PipelineError('the model has %d classes, %s has %d: fine-tune on data of the same '
                        'classes.' % (width, f.data_dir, data.num_classes))
  train = _labels_for(model, datasets.train_dataset(data, f.batch_size))
  evaluation = _labels_for(model, datasets.eval_dataset(data, f.batch_size))
  before = _scores(model, evaluation)
  logging.info('before: eval loss %.4f, accuracy %.4f', before['loss'], before['accuracy'])
  epochs = f.steps // f.log_every_steps
  start = time.time()
  history = model.fit(train, epochs=epochs, steps_per_epoch=f.log_every_steps, verbose=2)
  seconds = time.time() - start
  after = _scores(model, evaluation)
  logging.info('after %d steps: eval loss %.4f, accuracy %.4f', epochs * f.log_every_steps,
               after['loss'], after['accuracy'])
  if os.path.dirname(f.output):
    tf.io.gfile.makedirs(os.path.dirname(f.output))
  with outputs.staged_path(f.output) as path:
    model.save(path)
  results = {
      'model': f.model, 'output': f.output, 'data_dir': f.data_dir, 'backend':
      keras.backend.backend(), 'replicas': strategy.num_replicas_in_sync if strategy else 1,
      'steps': epochs * f.log_every_steps, 'batch_size': f.batch_size, 'optimizer': f.optimizer,
      'learning_rate': f.learning_rate, 'seed': f.seed, 'before': before, 'after': after,
      'train_loss': [float(x) for x in history.history['loss']],
      'examples_per_sec': epochs * f.log_every_steps * f.batch_size / seconds,
      'tensorflow_version': tf.__version__, 'keras_version': keras.__version__,
  }
  json_files.write(results_path, results)
  return results


def main(argv):
  del argv
  try:
    print(json.dumps(finetune(FLAGS), sort_keys=True))
  except PipelineError as e:
    print('error: %s' % ' '.join(str(e).split('\n')), file=sys.stderr)
    sys.exit(2)


def run():
  """The console entry point (`tpu-pipeline-finetune-keras`)."""
  groups = help_text.define_groups([('Fine-tuning', keras_flags.define_finetune_keras_flags)])
  help_text.exit_if_help_asked(sys.argv, __doc__, groups, 'docs/migration.md')
  logging.set_verbosity(logging.INFO)
  app.run(main)


if __name__ == '__main__':
  run()
