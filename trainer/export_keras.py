"""`python -m trainer.export_keras`: a run of this pipeline as a Keras 3 model, or as a native
PyTorch module (--output=PATH.pt).

Reads a checkpoint (the run's newest, or --checkpoint; also the Cloud TPU reference ResNet's
layout), builds the network of the run's settings (its model_config.json; flags for runs that
recorded none) with `keras_models.build`, loads every weight through `keras_models.checkpoint_map`
and writes PATH.keras plus, on the TensorFlow backend, a serving SavedModel
(`keras_models.serving`). With --check_predictions it proves the conversion on real inputs: the
logits of `trainer.main --mode=predict --predict_logits` against the Keras model's.

With --output=PATH.pt the loaded Keras model's weights become a `torch.nn.Module`
(trainer.torch_models: torchvision's layout for ResNet and InceptionV3) written with torch.save;
--check_predictions then proves the PyTorch module's logits, not the Keras model's.

With --upgrade=OLD.keras it instead rewrites a .keras file that an earlier version wrote (layer
names with '.', which the torch backend cannot load) with the current names, weights unchanged.

Runs on current TensorFlow with Keras 3 (the `keras` extra; KERAS_BACKEND=tensorflow, jax or
torch), not on the TF 1.15 / 2.15 runtimes. Prints a JSON summary on stdout. Guide:
docs/migration.md.
"""

import dataclasses
import json
import os

from absl import flags
from absl import logging
import keras
import numpy as np
import tensorflow as tf

from trainer.cli import help_text
from trainer.cli import outcome
from trainer.data import dataset_json
from trainer.data import input_fn as input_fn_lib
from trainer.data import predict_input
from trainer.data import tokenizer
from trainer.data.data_config import DataConfig
from trainer.errors import PipelineError
from trainer.flags import keras_flags
from trainer.keras_models import build
from trainer.keras_models import checkpoint_map
from trainer.keras_models import serving
from trainer.keras_models import upgrade as upgrade_lib
from trainer.keras_models import user_twin
from trainer.models import features as features_lib
from trainer.models import warm_start
from trainer.models.model_config import ModelConfig
from trainer.models.model_config import TEXT_MODELS
from trainer.run import network_record
from trainer.storage import outputs
from trainer.storage import patterns
from trainer.storage import staged

FLAGS = flags.FLAGS
_CHECK_BATCH_SIZE = 64
_TORCH_SUFFIX = '.pt'


def _settings_from_flags(f):
  """(ModelConfig, DataConfig) of a checkpoint without a model_config.json."""
  if not f.model:
    raise PipelineError(
        '%s has no %s (runs of earlier versions of this pipeline did not record their network): '
        'pass --model and --data_dir, and the settings the run trained with (--resnet_depth, '
        '--image_size; for the BiLSTM --embedding_dim, --lstm_hidden_units, --lstm_layers, '
        '--lstm_pooling).' % (f.model_dir or f.checkpoint, network_record.FILE))
  info = (dataset_json.read(f.data_dir) if f.data_dir else None) or {}
  image_size = f.image_size or dataset_json.image_size(info)
  num_classes = f.num_classes or info.get('num_classes')
  if not num_classes:
    raise PipelineError('--num_classes not given and no dataset.json in --data_dir to read it '
                        'from: pass --num_classes (the width of the checkpoint\'s logits).')
  text = f.model in TEXT_MODELS
  if not text and not image_size:
    raise PipelineError('--image_size not given and no dataset.json in --data_dir to read it '
                        'from: pass the size the run trained at.')
  data = DataConfig(
      data_dir=f.data_dir, num_classes=num_classes, num_train_examples=0, num_eval_examples=0,
      image_size=image_size or 0, modality='text' if text else 'image',
      max_seq_length=info.get('max_seq_length', 0), vocab_size=info.get('vocab_size', 0),
      eval_crop_fraction=info.get('preprocessing', {}).get(
          'eval_crop_fraction', DataConfig.eval_crop_fraction))
  # trainer.main's default depth, not ModelConfig's.
  model = dict(model=f.model, num_classes=num_classes, image_size=data.image_size,
               vocab_size=data.vocab_size, max_seq_length=data.max_seq_length, resnet_depth=50)
  for name in ('mean_rgb', 'stddev_rgb'):
    if name in info:
      model[name] = tuple(info[name])
  return model, data


def run_settings(f):
  """The network's ModelConfig and the run's DataConfig: model_config.json of f.model_dir (a
  settings flag may repeat its value, not change it); from the flags and --data_dir without one.

  Raises:
    PipelineError: settings missing or invalid, with what to pass.
  """
  record = network_record.read(f.model_dir) if f.model_dir else None
  if record:
    model, data = dataclasses.asdict(record[0]), record[1]
  else:
    model, data = _settings_from_flags(f)
  for name in keras_flags.SETTINGS:
    value = getattr(f, name)
    if value is None:
      continue
    value = int(value) if name == 'resnet_depth' else value
    if record and value != model[name]:
      # The record's network is the one the checkpoint's weights fit (trainer.run.recorded_network).
      raise PipelineError(
          '--%s=%s disagrees with the network recorded in %s (%s=%s). Leave --%s out to convert '
          'the recorded network.' % (name, value, network_record.path(f.model_dir), name,
                                     model[name], name))
    model[name] = value
  if f.data_dir and record:
    data = dataclasses.replace(data, data_dir=f.data_dir)
  try:
    return ModelConfig(**model), data
  except (TypeError, ValueError) as e:
    raise PipelineError('the network settings cannot build a model: %s' % e)


def checkpoint_of(f):
  """The checkpoint prefix to convert.

  Raises:
    PipelineError: neither flag given, or nothing there is a checkpoint.
  """
  if not (f.checkpoint or f.model_dir):
    raise PipelineError('pass --model_dir (a run of this pipeline) or --checkpoint.')
  patterns.check_checkpoint_path(f.model_dir, '--model_dir')
  patterns.check_checkpoint_path(f.checkpoint, '--checkpoint')
  path = f.checkpoint or f.model_dir
  try:
    return warm_start.checkpoint_prefix(path)
  except ValueError as e:
    raise PipelineError(str(e).replace('init_checkpoint', 'checkpoint'))


def check_predictions(predict, data, predictions_path, input_pattern, tolerance,
                      name='the Keras model'):
  """Compares the model's logits with those of `trainer.main --mode=predict --predict_logits`.

  Args:
    predict: the converted model, a function of a batch's inputs (NumPy: images float
      [n, H, W, 3] on the 0-255 scale, or token ids int32 [n, max_seq_length]) to its logits
      (NumPy float [n, num_classes]).
    data: the run's DataConfig (preprocessing of the inputs, as --mode=predict does it).
    predictions_path: the JSON-lines output of that prediction.
    input_pattern: the --predict_input it read.
    tolerance: largest absolute logit difference accepted.
    name: what `predict` is, for the error ('the Keras model', 'the PyTorch module').

  Returns:
    dict: examples, max_abs_logit_difference, classes_equal (count), max_abs_logit (the
    largest logit of the pipeline's, for scale), tolerance.

  Raises:
    PipelineError: lines without logits, a different number of inputs, or a difference above
      the tolerance.
  """
  source = predict_input.resolve(input_pattern, data.modality)
  dataset = input_fn_lib.predict_input_fn_builder(data, source)({'batch_size': _CHECK_BATCH_SIZE})
  key = features_lib.TOKEN_IDS if data.modality == 'text' else features_lib.IMAGE
  worst, worst_input, count, same_class, largest = 0.0, None, 0, 0, 0.0
  with tf.io.gfile.GFile(predictions_path) as lines:
    for batch in dataset.as_numpy_iterator():
      logits = np.asarray(predict(batch[key]))
      for row in logits:
        line = lines.readline()
        if not line:
          raise PipelineError('%s has fewer lines than %s has inputs (%d): was it predicted from '
                              'another --predict_input?' % (predictions_path, input_pattern, count))
        line = json.loads(line)
        if 'logits' not in line:
          raise PipelineError('%s has no logits: predict with --predict_logits.'
                              % predictions_path)
        expected = np.asarray(line['logits'], np.float32)
        difference = float(np.abs(row - expected).max())
        if not np.isfinite(difference):  # NaN compares as no difference at all
          difference = float('inf')
        largest = max(largest, float(np.abs(expected).max()))
        if difference > worst:
          worst, worst_input = difference, line['input']
        same_class += int(np.argmax(row) == line['class'])
        count += 1
    if lines.readline():
      raise PipelineError('%s has more lines than %s has inputs (%d).'
                          % (predictions_path, input_pattern, count))
  result = {'examples': count, 'max_abs_logit_difference': worst, 'classes_equal': same_class,
            'max_abs_logit': largest, 'tolerance': tolerance}
  if worst > tolerance:
    raise PipelineError(
        '%s\'s logits differ from %s by up to %.3g on input %s (tolerance %g; %d of %d classes '
        'equal): %s' % (name, predictions_path, worst, worst_input, tolerance, same_class, count,
                        json.dumps(result)))
  return result


def serving_dir_of(f):
  """Where the serving SavedModel goes: --serving_dir, else next to --output; '' for none
  (--serving_dir='', or a backend other than TensorFlow, logged)."""
  serving_dir = f.serving_dir
  if f.output.endswith(_TORCH_SUFFIX):
    if serving_dir:
      raise PipelineError('--serving_dir is the Keras export\'s (TensorFlow SavedModel): drop it '
                          'with --output=%s, or export to PATH.keras.' % f.output)
    return ''
  if serving_dir is None:
    serving_dir = f.output[:-len('.keras')] + '_serving'
  if serving_dir and keras.backend.backend() != 'tensorflow':
    logging.warning('No serving export: it needs KERAS_BACKEND=tensorflow (backend: %s). The '
                    '.keras file will be complete; run again on TensorFlow for the SavedModel.',
                    keras.backend.backend())
    serving_dir = ''
  return serving_dir


def upgrade(f):
  """--upgrade: rewrites an older .keras file of this pipeline with the current layer names
  (keras_models.upgrade; loadable on the torch backend too); returns the summary dict."""
  outputs.check_output_file(f.output, '--output', f.overwrite)
  if os.path.dirname(f.output):
    tf.io.gfile.makedirs(os.path.dirname(f.output))
  try:
    with staged.staged_path(f.output) as path:
      renamed = upgrade_lib.upgrade(f.upgrade, path)
  except (upgrade_lib.NotAKerasFile, OSError, tf.errors.OpError) as e:
    raise PipelineError('--upgrade=%s cannot be upgraded: %s' % (f.upgrade, e))
  model = keras.saving.load_model(f.output)  # proves the file loads on this backend
  return {'upgraded': f.upgrade, 'output': f.output, 'layers_renamed': renamed,
          'backend': keras.backend.backend(), 'weights': len(model.weights)}


def _model_of(f, config):
  """The Keras model to load the checkpoint into: the built-in network's twin
  (`keras_models.build`), or the user's --keras_network for a run of their --network.

  Raises:
    PipelineError: a user network without --keras_network, --keras_network for a built-in
      network, or a twin that does not fit (`keras_models.user_twin`).
  """
  keras_network = getattr(f, 'keras_network', None)
  if config.is_built_in:
    if keras_network:
      raise PipelineError('--keras_network is for a run of your own --network; this run trained '
                          'the built-in %s, whose Keras twin is built in: drop it.' % config.model)
    return build.build_model(config)
  if not keras_network:
    raise PipelineError('the run trained your network --network=%s: pass its Keras 3 twin as '
                        '--keras_network=MODULE:CALLABLE (docs/your-model.md).' % config.model)
  return user_twin.build_model(keras_network, config)


def convert(f):
  """Converts per the flag values `f` (or upgrades, with --upgrade); returns the summary."""
  to_torch = f.output.endswith(_TORCH_SUFFIX)
  if not (to_torch or f.output.endswith('.keras')):
    raise PipelineError('--output=%s: give a path ending in .keras (Keras 3) or .pt (PyTorch).'
                        % f.output)
  if getattr(f, 'upgrade', None):
    if to_torch:
      raise PipelineError('--upgrade rewrites a .keras file: give --output=PATH.keras.')
    return upgrade(f)
  torch_export = _torch_export() if to_torch else None
  if bool(f.check_predictions) != bool(f.check_input):
    raise PipelineError('--check_predictions and --check_input go together: the prediction '
                        'output and the --predict_input it was made from.')
  serving_dir = serving_dir_of(f)
  outputs.check_output_file(f.output, '--output', f.overwrite)  # before any work
  if serving_dir:
    outputs.check_output_dir(serving_dir, '--serving_dir', f.overwrite)
  config, data = run_settings(f)
  if to_torch and not config.is_built_in:
    raise PipelineError('--output=PATH.pt converts the built-in networks (trainer.torch_models); '
                        'your network %s goes to PATH.keras, which Keras\' torch backend runs '
                        '(docs/migration.md).' % config.model)
  if data.modality == 'text' and not data.data_dir and (to_torch or f.serving_dir != ''):
    raise PipelineError('the text %s needs the run\'s vocab.txt: pass --data_dir%s.' % (
        ('PyTorch export', '') if to_torch else
        ('serving export', ' (or --serving_dir= for the .keras file only)')))
  vocabulary = _vocabulary(data, config.vocab_size) if to_torch else None  # before any work
  prefix = checkpoint_of(f)
  recorded = bool(f.model_dir) and network_record.read(f.model_dir) is not None
  use_moving_average = f.use_moving_average
  if use_moving_average is None:
    if not recorded and any(n.endswith(warm_start.EMA_SUFFIX)
                            for n, _ in tf.train.list_variables(prefix)):
      raise PipelineError(
          'checkpoint %s holds moving averages of the weights and no %s says whether the run '
          'evaluated with them (it did with --moving_average_decay > 0): pass '
          '--use_moving_average or --nouse_moving_average.' % (prefix, network_record.FILE))
    use_moving_average = config.moving_average_decay > 0
  if not recorded and not f.check_predictions:
    logging.warning('No %s: the settings that no weight shape shows (image size and '
                    'statistics, BiLSTM pooling, evaluation crop) come from the flags and '
                    '--data_dir unchecked. Pass --check_predictions to prove them.',
                    network_record.FILE)
  model = _model_of(f, config)
  try:
    report = checkpoint_map.load(model, prefix, use_moving_average, config.model)
  except ValueError as e:
    raise PipelineError(str(e))
  logging.info('%s: %d Keras weights from %d checkpoint tensors (%s layout%s)', prefix,
               report['weights'], report['tensors'], report['layout'],
               ', moving averages' if use_moving_average else '')
  predict = lambda inputs: build.logits_of(model.predict_on_batch(inputs))  # noqa: E731
  if to_torch:
    try:
      module = torch_export.from_keras(model, config, vocabulary)
    except ValueError as e:
      raise PipelineError('the PyTorch %s cannot take the weights: %s' % (config.model, e))
    predict = torch_export.predict_function(module)
  check = None
  if f.check_predictions:  # before anything is written: a model that fails it is not kept
    check = check_predictions(predict, data, f.check_predictions, f.check_input, f.tolerance,
                              'the PyTorch module' if to_torch else 'the Keras model')
    logging.info('checked on %d inputs: largest logit difference %.3g, %d classes equal',
                 check['examples'], check['max_abs_logit_difference'], check['classes_equal'])
  if os.path.dirname(f.output):
    tf.io.gfile.makedirs(os.path.dirname(f.output))
  if to_torch:
    torch_export.save(module, f.output)  # written aside and renamed, local or gs://
  else:
    with staged.staged_path(f.output) as path:
      model.save(path)
  if serving_dir:  # with --overwrite what the start check found there is deleted first
    outputs.prepare_output_dir(serving_dir, '--serving_dir', f.overwrite)
    serving.export(model, serving_dir, data)
  summary = {'checkpoint': prefix, 'output': f.output, 'serving_dir': serving_dir or None,
             'format': 'pytorch' if to_torch else 'keras', 'backend': keras.backend.backend(),
             'model': config.model, 'layout': report['layout'],
             'weights': report['weights'], 'moving_average': use_moving_average,
             'widened_from_bfloat16': len(report['widened'])}
  if to_torch:
    summary['torchvision'] = torch_export.torchvision_builder(module)
  if check:
    summary['check'] = check
  return summary


def _vocabulary(data, vocab_size):
  """The run's vocabulary (list of str) for a text run, checked against its vocab_size; None
  for images.

  Raises:
    PipelineError: the file is missing, not a vocabulary of this pipeline, or of another size.
  """
  if data.modality != 'text':
    return None
  tokenizer.check_vocabulary(data.vocab_path, vocab_size)
  return tokenizer.read_vocabulary(data.vocab_path)


def _torch_export():
  """trainer.torch_models.export, or the install to make."""
  try:
    from trainer.torch_models import export  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise PipelineError('--output=PATH.pt needs PyTorch (%s): pip install \'.[keras-torch]\' '
                        '(torch 2.13.0).' % e)
  return export


def main(argv):
  del argv
  outcome.print_result(lambda: convert(FLAGS))


def run():
  """The console entry point (`tpu-pipeline-export-keras`)."""
  groups = help_text.define_groups([('Conversion', keras_flags.define_export_keras_flags)])
  outcome.start(__doc__, groups, main, 'docs/migration.md')


if __name__ == '__main__':
  run()
