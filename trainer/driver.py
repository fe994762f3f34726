"""Runs train / eval / train_and_eval for a `trainer.config.Config` and writes results.json."""

import contextlib
import json
import time

from absl import logging
import tensorflow.compat.v1 as tf

from trainer import cloud
from trainer import estimator as estimator_lib
from trainer import hooks as hooks_lib
from trainer import input_pipeline
from trainer import storage
from trainer.config import PipelineError

RESULTS_FILE = 'results.json'


def checkpoint_step(checkpoint_path):
  """global_step stored in a checkpoint (public API: tf.train.load_variable)."""
  return int(tf.train.load_variable(checkpoint_path, 'global_step'))


def latest_step(model_dir):
  """global_step of the latest checkpoint in model_dir, 0 when there is none."""
  checkpoint = tf.train.latest_checkpoint(model_dir)
  return checkpoint_step(checkpoint) if checkpoint else 0


def check_data(config):
  """Fails fast, before any graph is built, when the shards a mode needs are missing (the
  data_dir itself is checked by `flags.config` before it reads dataset.json).

  Raises:
    PipelineError: no file matches a split's pattern.
  """
  data = config.data
  if data.fake_data:
    return
  splits = [False] if config.mode == 'eval' else [True]
  if config.mode == 'train_and_eval':
    splits.append(False)
  for is_training in splits:
    if not tf.io.gfile.glob(data.file_pattern(is_training)):
      raise PipelineError(
          'no TFRecord files match %s. Point --data_dir at a directory of shards (train-*, '
          'validation-*), e.g. one made by `python -m trainer.prepare fashion_mnist` (or '
          '`rotten_tomatoes` / `text` for bilstm) `--output_dir DIR`, or use --fake_data for a '
          'smoke test.' % data.file_pattern(is_training))
  if data.modality == 'text' and not tf.io.gfile.exists(data.vocab_path):
    raise PipelineError('%s is missing: text data needs the vocabulary its token ids come from. '
                        'Re-run `python -m trainer.prepare text` into %s.'
                        % (data.vocab_path, data.data_dir))


@contextlib.contextmanager
def _explain_checkpoint_mismatch(config):
  """A checkpoint written with another --moving_average_decay setting (or another model) lacks
  variables this graph restores: say which setting to use instead of TF's key listing."""
  try:
    yield
  except tf.errors.NotFoundError as e:
    if 'ExponentialMovingAverage' in e.message:
      raise PipelineError(
          'the checkpoint in %s has no moving averages of the weights (it was trained with '
          '--moving_average_decay=0), but this run uses --moving_average_decay=%s. Pass '
          '--moving_average_decay=0 to continue or evaluate it, or use a new --model_dir.'
          % (config.model_dir, config.model.moving_average_decay))
    if 'not found in checkpoint' in e.message:
      raise PipelineError(
          'the checkpoint in %s does not match this model (%s); was it written with another '
          '--model, --resnet_depth or --num_classes? Use the same flags or a new --model_dir.'
          % (config.model_dir, e.message.splitlines()[0][:300]))
    raise


@contextlib.contextmanager
def _explain_input_errors(config, split):
  """Turns failures of the input pipeline (corrupt records, undecodable images, labels out of
  range) into a PipelineError naming the data and what to do; checkpoints already written stay."""
  try:
    yield
  except tf.errors.DataLossError as e:
    pattern = config.data.file_pattern(is_training=split == 'train')
    raise PipelineError(
        'corrupt TFRecord data in the %s split (%s): %s. Re-create or remove the damaged shard '
        '(e.g. re-run `python -m trainer.prepare`); training resumes from the last checkpoint in '
        '%s.' % (split, _locate_corrupt_shard(pattern), e.message.splitlines()[0],
                 config.model_dir))
  except tf.errors.InvalidArgumentError as e:
    if 'class/label' in e.message or 'text/token_ids' in e.message:
      # TF 2.x puts 'Graph execution error:' first; the failed check is on a later line.
      lines = [l for l in e.message.splitlines() if 'outside [0' in l] or e.message.splitlines()
      raise PipelineError('a label or token id in the %s split under %s is out of range: %s' % (
          split, config.data.data_dir, lines[0].strip()[:500]))
    if 'IteratorGetNext' in e.message:
      raise PipelineError('a record in the %s split under %s could not be parsed or decoded: %s. '
                          'Check that the shards hold tf.train.Examples in the ImageNet schema '
                          '(image/encoded, image/class/label) or, for text, text/token_ids and '
                          'text/class/label.' % (
                              split, config.data.data_dir, e.message.splitlines()[0]))
    raise


def _locate_corrupt_shard(pattern, max_bytes=2 << 30):
  """Names the first shard matching `pattern` whose records fail their CRC check (TF's error
  does not say which file); gives up after reading max_bytes."""
  scanned = 0
  for path in sorted(tf.io.gfile.glob(pattern)):
    if scanned > max_bytes:
      break
    try:
      for record in tf.io.tf_record_iterator(path):
        scanned += len(record)
    except tf.errors.DataLossError:
      return 'shard ' + path
  return 'shards %s; the damaged one was not found in the first %d MiB' % (pattern, max_bytes >> 20)


def input_fns(config, estimator):
  """(train_input_fn, eval_input_fn) for `estimator`. TPUEstimator sets params['batch_size']
  itself (per core on TPU); a plain Estimator does not, so these give its input_fns the
  per-replica training batch and the eval batch."""
  train = input_pipeline.input_fn_builder(config.data, is_training=True)
  evaluation = input_pipeline.input_fn_builder(config.data, is_training=False,
                                               global_batch_size=config.eval_batch_size)
  if isinstance(estimator, tf.estimator.tpu.TPUEstimator):
    return train, evaluation
  per_replica = config.train_batch_size // config.num_replicas
  return (lambda params: train(dict(params, batch_size=per_replica)),
          lambda params: evaluation(dict(params, batch_size=config.eval_batch_size)))


def _train(estimator, config, max_steps, throughput):
  hook = hooks_lib.ProgressHook(config.model, config.train_steps, config.log_every_n_secs)
  hooks = [hook]
  if config.profile_steps:
    hooks.append(hooks_lib.TraceHook(config.model_dir.rstrip('/') + '/profile',
                                     *config.profile_steps))
  with _explain_input_errors(config, 'train'), _explain_checkpoint_mismatch(config):
    estimator.train(input_fns(config, estimator)[0], max_steps=max_steps, hooks=hooks)
  throughput[0] += hook.measured_steps
  throughput[1] += hook.measured_seconds


def evaluate(estimator, config, checkpoint_path, input_fn=None):
  """Evaluates one checkpoint on every eval example exactly once.

  Returns:
    dict with top_1_accuracy, top_5_accuracy, loss (mean cross-entropy over real examples),
    num_eval_examples and global_step, as Python numbers.

  Raises:
    PipelineError: the eval split holds a different number of examples than configured.
  """
  input_fn = input_fn or input_fns(config, estimator)[1]
  with _explain_input_errors(config, 'eval'), _explain_checkpoint_mismatch(config):
    metrics = estimator.evaluate(input_fn, steps=config.eval_steps, checkpoint_path=checkpoint_path)
  results = {
      'top_1_accuracy': float(metrics['top_1_accuracy']),
      'top_5_accuracy': float(metrics['top_5_accuracy']),
      'loss': float(metrics['eval_loss']),
      'num_eval_examples': int(metrics['num_examples']),
      'global_step': int(metrics['global_step']),
  }
  logging.info('eval at step %d: top_1_accuracy %.4f top_5_accuracy %.4f loss %.4f on %d examples',
               results['global_step'], results['top_1_accuracy'], results['top_5_accuracy'],
               results['loss'], results['num_eval_examples'])
  if results['num_eval_examples'] != config.data.num_eval_examples:
    raise PipelineError(
        'evaluation read %d examples but the eval split should have %d (dataset.json or '
        '--num_eval_examples). Fix the count so every example is evaluated exactly once.'
        % (results['num_eval_examples'], config.data.num_eval_examples))
  return results


def _train_and_eval(estimator, config, throughput):
  step = latest_step(config.model_dir)
  if step >= config.train_steps:
    logging.info('model_dir %s already holds a checkpoint at step %d >= train_steps %d: not '
                 'training; raise --train_steps to train longer.', config.model_dir, step,
                 config.train_steps)
  elif step > 0:
    logging.info('Resuming from the checkpoint at step %d of %d in %s', step, config.train_steps,
                 config.model_dir)
  chunk = config.train_steps if config.mode == 'train' else config.steps_per_eval
  while step < config.train_steps:
    next_stop = min(config.train_steps, (step // chunk + 1) * chunk)
    _train(estimator, config, next_stop, throughput)
    step = latest_step(config.model_dir)
    if config.mode == 'train_and_eval' and step < config.train_steps:
      evaluate(estimator, config, tf.train.latest_checkpoint(config.model_dir))
  if config.mode == 'train':
    return {'global_step': step}
  return evaluate(estimator, config, tf.train.latest_checkpoint(config.model_dir))


def _eval_only(estimator, config):
  """Evaluates the latest checkpoint; with eval_timeout > 0 keeps evaluating new checkpoints until
  one reaches train_steps (if given) or none appears for eval_timeout seconds (never forever)."""
  if config.eval_timeout <= 0:
    checkpoint = tf.train.latest_checkpoint(config.model_dir)
    if not checkpoint:
      raise PipelineError('no checkpoint in %s to evaluate; train first or pass --eval_timeout '
                          'to wait for one.' % config.model_dir)
    return evaluate(estimator, config, checkpoint)
  results = None
  for checkpoint in tf.train.checkpoints_iterator(config.model_dir, timeout=config.eval_timeout):
    results = evaluate(estimator, config, checkpoint)
    if config.train_steps and results['global_step'] >= config.train_steps:
      break
  if results is None:
    raise PipelineError('no checkpoint appeared in %s within --eval_timeout=%d s.'
                        % (config.model_dir, config.eval_timeout))
  return results


def export(estimator, config, checkpoint_path):
  """Writes a SavedModel (signature `serving_default`: image_bytes, or text for text models ->
  classes, probabilities, logits) of `checkpoint_path`, with the moving-average weights when the
  model keeps them."""
  with _explain_checkpoint_mismatch(config):
    path = estimator.export_saved_model(
        config.export_dir, input_pipeline.serving_input_receiver_fn_builder(config.data),
        checkpoint_path=checkpoint_path)
  path = path.decode() if isinstance(path, bytes) else path
  logging.info('Exported SavedModel to %s', path)
  return path


def run(config):
  """Runs config.mode, exports if asked, writes <model_dir>/results.json and returns its dict.

  Raises:
    PipelineError: for anything the user must fix (data, TPU, checkpoints).
  """
  check_data(config)
  task = cloud.distributed_task()
  if task and config.mirrored_devices:
    raise PipelineError('TF_CONFIG describes a cluster (%s) but MirroredStrategy (--num_gpus or '
                        '--mirrored_devices) trains in one process. Unset TF_CONFIG or drop the '
                        'flag.' % ', '.join(sorted(task[2])))
  if task:
    return _run_distributed(config, *task)
  estimator = estimator_lib.build_estimator(config)  # resolves the TPU first with --use_tpu
  storage.check_path_usable(config.model_dir, 'model_dir', config.use_tpu)
  if config.export_dir:
    storage.check_path_usable(config.export_dir, 'export_dir', config.use_tpu)
  throughput = [0, 0.0]  # steps, seconds measured by the progress hooks
  start = time.time()
  if config.mode == 'eval':
    results = _eval_only(estimator, config)
  else:
    results = _train_and_eval(estimator, config, throughput)
  results.update(_run_facts(config, throughput, start))
  if config.export_dir:
    results['export_path'] = export(estimator, config, tf.train.latest_checkpoint(config.model_dir))
  _write_json(config.model_dir, RESULTS_FILE, results)
  return results


def _run_facts(config, throughput, start):
  return {
      'mode': config.mode,
      'model': config.model.model,
      'resnet_depth': config.model.resnet_depth if config.model.model == 'resnet' else None,
      'moving_average_decay': config.model.moving_average_decay,
      'image_size': config.model.image_size if config.data.modality == 'image' else None,
      'max_seq_length': config.model.max_seq_length if config.data.modality == 'text' else None,
      'train_batch_size': config.train_batch_size,
      'train_steps': config.train_steps,
      'examples_per_sec': (throughput[0] * config.train_batch_size / throughput[1]
                           if throughput[1] > 0 else None),
      'wall_seconds': time.time() - start,
      'use_tpu': config.use_tpu,
      'mirrored_devices': list(config.mirrored_devices),
      'precision': config.model.precision,
      'tensorflow_version': tf.__version__,
      'mkl_enabled': _mkl_enabled(),
  }


def _write_json(directory, name, value):
  tf.io.gfile.makedirs(directory)
  with tf.io.gfile.GFile('%s/%s' % (directory.rstrip('/'), name), 'w') as f:
    f.write(json.dumps(value, indent=2, sort_keys=True) + '\n')


def _run_distributed(config, task_type, task_index, cluster):
  """Between-graph training on TensorFlow's distributed runtime (`tf.estimator.train_and_evaluate`
  with the TF_CONFIG cluster). Parameter servers serve until they are stopped; every worker trains
  until the shared global_step reaches train_steps and records its own step count in
  <model_dir>/tasks/<type>-<index>.json; the chief then evaluates the final checkpoint, exports,
  and writes results.json.

  Raises:
    PipelineError: --use_tpu or --mode=eval with such a cluster.
  """
  if config.use_tpu:
    raise PipelineError('TF_CONFIG describes a CPU/GPU cluster (%s) but --use_tpu is set: a Cloud '
                        'TPU job runs as one process. Drop --use_tpu or the cluster.'
                        % ', '.join(sorted(cluster)))
  if config.mode == 'eval':
    raise PipelineError('--mode=eval runs as one process: unset TF_CONFIG to evaluate.')
  logging.info('Distributed training: task %s %d of cluster %s', task_type, task_index,
               json.dumps(cluster, sort_keys=True))
  estimator = estimator_lib.build_distributed_estimator(config)
  if task_type != 'ps':
    storage.check_path_usable(config.model_dir, 'model_dir')
  progress = hooks_lib.ProgressHook(config.model, config.train_steps, config.log_every_n_secs)
  counter = hooks_lib.LocalStepCounter()
  train_input_fn, eval_input_fn = input_fns(config, estimator)
  start = time.time()
  with _explain_input_errors(config, 'train'), _explain_checkpoint_mismatch(config):
    tf.estimator.train_and_evaluate(  # a 'ps' task serves here until it is stopped
        estimator,
        tf.estimator.TrainSpec(train_input_fn, max_steps=config.train_steps,
                               hooks=[progress, counter]),
        tf.estimator.EvalSpec(eval_input_fn, steps=config.eval_steps))
  task = {'task_type': task_type, 'task_index': task_index, 'local_steps': counter.steps,
          'wall_seconds': time.time() - start}
  _write_json(config.model_dir + '/tasks', '%s-%d.json' % (task_type, task_index), task)
  if task_type not in ('chief', 'master'):
    return task
  checkpoint = tf.train.latest_checkpoint(config.model_dir)
  results = evaluate(estimator, config, checkpoint, input_fn=eval_input_fn)
  results.update(_run_facts(config, [progress.measured_steps, progress.measured_seconds], start))
  results.update(task, cluster={k: len(v) for k, v in cluster.items()})
  if config.export_dir:
    storage.check_path_usable(config.export_dir, 'export_dir')
    results['export_path'] = export(estimator, config, checkpoint)
  _write_json(config.model_dir, RESULTS_FILE, results)
  return results


def _mkl_enabled():
  try:
    from tensorflow.python.util import _pywrap_util_port  # TF >= 2.x
    return bool(_pywrap_util_port.IsMklEnabled())
  except ImportError:
    from tensorflow.python import pywrap_tensorflow  # TF 1.15
    return bool(pywrap_tensorflow.IsMklEnabled())
