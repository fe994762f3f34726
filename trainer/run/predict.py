"""`--mode=predict`: batch prediction with a trained checkpoint, through `Estimator.predict` (on a
Cloud TPU, `TPUEstimator.predict`), streamed to a JSON-lines file: one line per input, in input
order. Nothing grows with the number of inputs but the list of file names the glob matched.

A line (keys sorted):
  {"class": 3, "class_name": "Dress", "input": "gs://b/x/validation-00000-of-00002:17",
   "label": 3, "label_name": "Dress", "logits": [-1.5308160781860352, ...], "text": "...",
   "top_k": [{"class": 3, "class_name": "Dress", "probability": 0.91}, ...]}
`label`/`label_name` only for records that hold a label; `logits` only with --predict_logits: the
input's float32 logits, one per class, unrounded (each float32 exactly as a JSON number); `text`
only for text inputs. Probabilities are rounded to 6 decimals.
"""

import json
import time

from absl import logging
import numpy as np
import tensorflow.compat.v1 as tf

from trainer.cloud import gcs_preflight
from trainer.data import dataset_json
from trainer.data import predict_input
from trainer.errors import PipelineError
from trainer.run import checkpoints
from trainer.run import estimator as estimator_lib
from trainer.run import run_errors
from trainer.storage import outputs

RESULTS_FILE = 'predict_results.json'


def class_names(data):
  """The class names of dataset.json in data.data_dir, else the class indices as strings."""
  info = (dataset_json.read(data.data_dir) if data.data_dir else None) or {}
  names = info.get('class_names') or []
  if len(names) != data.num_classes:
    return [str(i) for i in range(data.num_classes)]
  return [str(name) for name in names]


def prediction_line(name, probabilities, names, top_k, label=None, text=None, logits=None):
  """One output line's dict for one input.

  Args:
    name: the input's name (`predict_input.describe_inputs`).
    probabilities: float [num_classes].
    names: the class names, by index.
    top_k: how many classes to list, most probable first.
    label: the input's true class, if known.
    text: text models: the input text.
    logits: float32 [num_classes]: written unrounded as `logits`; None: no `logits` key.

  Returns:
    dict: input, class, class_name, top_k (class, class_name, probability rounded to 6
    decimals), and label, label_name, text, logits where given.
  """
  order = np.argsort(-probabilities, kind='stable')[:top_k]
  line = {'input': name, 'class': int(order[0]), 'class_name': names[order[0]],
          'top_k': [{'class': int(i), 'class_name': names[i],
                     'probability': round(float(probabilities[i]), 6)} for i in order]}
  if label is not None:
    line.update(label=label, label_name=names[label] if 0 <= label < len(names) else None)
  if text is not None:
    line['text'] = text
  if logits is not None:
    line['logits'] = [float(x) for x in logits]  # float32 -> float is exact, and so is json
  return line


def check_output(config):
  """Refuses, before any work, a --predict_output that exists (unless config.overwrite) or that
  cannot be written.

  Raises:
    PipelineError: naming --predict_output and what to do.
  """
  path = config.predict_output
  if path.startswith('gs://'):  # before TF's gs:// client, which retries a missing bucket
    gcs_preflight.check_path_usable(path.rstrip('/').rsplit('/', 1)[0], 'predict_output',
                                    config.use_tpu)
  outputs.check_output_file(path, '--predict_output', config.overwrite)


def predict(estimator, config):
  """Predicts every input of config.predict_input with the newest intact checkpoint of
  config.model_dir and writes config.predict_output (local or gs://).

  Returns:
    the summary dict (also written to <model_dir>/predict_results.json): num_predictions,
    num_labelled, top_1_accuracy over the labelled inputs (None without labels), checkpoint,
    global_step, predict_output, examples_per_sec, wall_seconds.

  Raises:
    PipelineError: no checkpoint, inputs that cannot be read or that the model cannot take, or
      the input pipeline and the list of inputs disagree on their number.
  """
  start = time.time()
  checkpoint = checkpoints.newest_intact_checkpoint(config.model_dir, move_aside=False)
  if not checkpoint:
    raise PipelineError('no checkpoint in %s to predict with; train first (or point --model_dir '
                        'at a trained model).' % config.model_dir)
  source = predict_input.resolve(config.predict_input, config.data.modality)
  names = class_names(config.data)
  top_k = min(config.predict_top_k, config.data.num_classes)
  logging.info('Predicting %d %s file(s) of %s with %s into %s', len(source.paths), source.kind,
               config.predict_input, checkpoint, config.predict_output)
  input_fn = estimator_lib.predict_input_fn(config, estimator, source)
  inputs = predict_input.describe_inputs(source, config.data.label_offset)
  count = labelled = correct = 0
  if '/' in config.predict_output.rstrip('/'):
    tf.io.gfile.makedirs(config.predict_output.rsplit('/', 1)[0])
  # Written under a temporary name and renamed when complete: a run that fails leaves no file
  # that looks like a full output.
  partial = config.predict_output + '.partial'
  with run_errors.explain_checkpoint_mismatch(config), tf.io.gfile.GFile(partial, 'w') as out:
    keys = ['probabilities', 'logits'] if config.predict_logits else ['probabilities']
    predictions = estimator.predict(input_fn, predict_keys=keys,
                                    checkpoint_path=checkpoint, yield_single_examples=True)
    try:
      for prediction in predictions:
        described = next(inputs, None)
        if described is None:
          raise PipelineError('the input pipeline gave more predictions than %s has inputs (%d); '
                              'the output is incomplete (%s).'
                              % (config.predict_input, count, partial))
        name, label, text = described
        line = prediction_line(name, prediction['probabilities'], names, top_k, label, text,
                               prediction.get('logits'))
        out.write(json.dumps(line, sort_keys=True, ensure_ascii=False) + '\n')
        count += 1
        if label is not None:
          labelled += 1
          correct += int(line['class'] == label)
        if count % 10000 == 0:
          logging.info('%d predictions written', count)
    except (tf.errors.InvalidArgumentError, tf.errors.DataLossError,
            tf.errors.NotFoundError) as e:
      # An input the pipeline cannot read (not an image, a record or CSV row it cannot parse):
      # it fails the batch that holds it, at most eval_batch_size inputs after the last line.
      following = next(inputs, (None,))[0]
      raise PipelineError(
          'prediction stopped after %d inputs: an input from %s on (within --eval_batch_size=%d '
          'inputs) cannot be read: %s. The %d lines written are in %s; fix or remove that input '
          'and run again.' % (count, following or 'the end of the inputs', config.eval_batch_size,
                              str(e).split('\n')[0], count, partial))
  if next(inputs, None) is not None:
    raise PipelineError('the input pipeline gave %d predictions but %s has more inputs; the '
                        'output is incomplete (%s).' % (count, config.predict_input, partial))
  tf.io.gfile.rename(partial, config.predict_output, overwrite=True)
  seconds = time.time() - start
  summary = {
      'mode': 'predict', 'predict_input': config.predict_input,
      'predict_output': config.predict_output, 'num_predictions': count,
      'num_labelled': labelled, 'top_1_accuracy': correct / labelled if labelled else None,
      'checkpoint': checkpoint, 'global_step': int(tf.train.load_variable(checkpoint,
                                                                          'global_step')),
      'examples_per_sec': count / seconds if seconds > 0 else None, 'wall_seconds': seconds,
  }
  logging.info('predicted %d inputs into %s%s', count, config.predict_output,
               '; top_1_accuracy %.4f on the %d labelled' % (summary['top_1_accuracy'], labelled)
               if labelled else '')
  return summary
