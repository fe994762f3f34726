"""The end of every run: the evaluation of a checkpoint, results.json (what the run measured and
what it ran on) and then the SavedModel export, whose directory is checked before any work
(`check_export_dir`). The single-process driver and the distributed chief share it."""

import os
import platform
import re
import time
import uuid

from absl import logging
import numpy as np
import tensorflow.compat.v1 as tf

from trainer.cloud import gcs_preflight
from trainer.cloud import vertex_env
from trainer.data import serving
from trainer.errors import PipelineError
from trainer.host import threads as host_threads
from trainer.run import best_checkpoint
from trainer.run import checkpoints
from trainer.run import run_errors
from trainer.run import tf_build
from trainer.storage import json_files
from trainer.storage import outputs
from trainer.storage import staged

RESULTS_FILE = 'results.json'
# The modes that write model_dir's checkpoints, under its writer lease (trainer.storage.lease).
WRITING_MODES = ('train', 'train_and_eval')
# In model_dir while an export runs: the export directory and what it held before, so that a
# rerun after a kill mid-export knows what the interrupted export left (`interrupted_export`).
EXPORTING_FILE = 'export_in_progress.json'


def evaluate(estimator, config, checkpoint_path, input_fn):
  """Evaluates one checkpoint on every eval example exactly once.

  Args:
    estimator: the run's Estimator.
    config: `trainer.run.run_config.Config`.
    checkpoint_path: the checkpoint prefix to evaluate.
    input_fn: the eval input_fn (`trainer.run.estimator.input_fns`).

  Returns:
    dict with top_1_accuracy, top_5_accuracy, loss (mean cross-entropy over real examples),
    num_eval_examples and global_step, as Python numbers.

  Raises:
    PipelineError: the eval split holds a different number of examples than configured, or its
      records cannot be read.
  """
  with run_errors.explain_input_errors(config, 'eval'), \
      run_errors.explain_checkpoint_mismatch(config), run_errors.explain_tpu_shape_errors(config):
    metrics = estimator.evaluate(input_fn, steps=config.eval_steps, checkpoint_path=checkpoint_path)
  vertex_env.copy_events(config.model_dir)  # Vertex AI TensorBoard sees each evaluation
  if config.model.is_model_fn:  # a legacy model_fn's own metrics, as they are
    results = {name: _number(value) for name, value in metrics.items()}
    logging.info('eval at step %d: %s', results['global_step'], ', '.join(
        '%s %s' % (name, results[name]) for name in sorted(results) if name != 'global_step'))
    return results
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


def _number(value):
  """A metric's value as a Python int or float (a list for a non-scalar one)."""
  value = np.asarray(value)
  if value.shape:
    return value.tolist()
  return int(value) if np.issubdtype(value.dtype, np.integer) else float(value)


def export(estimator, config, checkpoint_path, export_dir=None, confirm=None):
  """Writes a SavedModel of `checkpoint_path` under `export_dir` (default config.export_dir;
  signature `serving_default`: image_bytes, or text for text models -> classes, probabilities,
  logits), with the moving-average weights when the model keeps them.

  `confirm`: for the holder of model_dir's writer lease, its `Lease.confirm`. The SavedModel is
  then written under <export_dir>/temp-RUN/ (RUN: random hex digits), and renamed to
  <export_dir>/<timestamp> only once `confirm()` (a read of the lease, made then) shows the run
  still holds the lease: a run stalled inside its export past a takeover never adds a version
  that a server of the newest one (TensorFlow Serving's default) would take. The time left
  unfenced is the rename's own (one request per file on gs://).

  Returns:
    str, the SavedModel's path.

  Raises:
    lease.LeaseLost: `confirm` refused (the staged SavedModel is removed).
  """
  base = (export_dir or config.export_dir).rstrip('/')
  staging = '%s/temp-%s' % (base, uuid.uuid4().hex[:8]) if confirm else base
  try:
    with run_errors.explain_checkpoint_mismatch(config):
      path = estimator.export_saved_model(
          staging, serving.serving_input_receiver_fn_builder(config.data),
          checkpoint_path=checkpoint_path)
    path = path.decode() if isinstance(path, bytes) else path
    if confirm:
      confirm()
      final = '%s/%s' % (base, path.rstrip('/').rpartition('/')[2])
      tf.io.gfile.rename(path, final)
      path = final
  finally:
    if confirm:
      staged.discard(staging)
  logging.info('Exported SavedModel to %s', path)
  return path


def copy_saved_model(source, parent, confirm=None):
  """Copies the SavedModel directory `source` to <parent>/<its name> (local or gs://), written
  under temp-<name> and then renamed, as the Estimator writes an export, so that an interrupted
  copy is never taken for a SavedModel.

  Args:
    source: str, a SavedModel directory (an export's <export_dir>/<timestamp>).
    parent: str, the directory to copy it into (created if missing).
    confirm: called before the rename (`export`'s); what it raises leaves the copy unnamed.

  Returns:
    str, the copy's path.

  Raises:
    tf.errors.OpError: a read or write failed, or <parent>/<name> exists already.
    lease.LeaseLost: `confirm` refused (the copy is removed).
  """
  source = source.rstrip('/')
  name = source.rpartition('/')[2]
  temporary, path = '%s/temp-%s' % (parent, name), '%s/%s' % (parent, name)
  for directory, _, files in tf.io.gfile.walk(source):
    directory = directory.rstrip('/')  # gs:// lists subdirectories with a trailing slash
    target = temporary + directory[len(source):]
    tf.io.gfile.makedirs(target)
    for file_name in files:
      tf.io.gfile.copy(directory + '/' + file_name, target + '/' + file_name, overwrite=True)
  if confirm:
    try:
      confirm()
    except BaseException:
      staged.discard(temporary)
      raise
  tf.io.gfile.rename(temporary, path)
  return path


def export_dir_flag(export_dir, environ=None):
  """What named `export_dir`, for messages: $AIP_MODEL_DIR in a Vertex AI job that set it (and
  no --export_dir replaced it), else --export_dir."""
  environ = os.environ if environ is None else environ
  from_vertex = environ.get(vertex_env.MODEL_DIR_ENV, '').rstrip('/')
  return vertex_env.MODEL_DIR_ENV if export_dir == from_vertex else '--export_dir'


def check_export_dir(config):
  """Refuses, before any work, an export_dir that cannot be written or already holds something
  (unless config.overwrite: `finish` then deletes its contents just before exporting).

  Raises:
    PipelineError: naming the flag (or AIP_MODEL_DIR), the path, what is there and the fix.
  """
  if not config.export_dir or config.mode == 'dry_run':
    return
  flag = export_dir_flag(config.export_dir)
  gcs_preflight.check_path_usable(config.export_dir, 'export_dir', config.use_tpu)  # gs:// only
  # What a killed training run's export left: removed by `finish`, under model_dir's lease.
  left = set(interrupted_export(config)) if config.mode in WRITING_MODES else set()
  outputs.check_output_dir(config.export_dir, flag, config.overwrite,
                           owned=lambda name: name not in left)


def interrupted_export(config):
  """The names in config.export_dir that an export of this model_dir, killed before it ended,
  left there: what the Estimator writes (a SavedModel's <timestamp>/ or temp-<timestamp>/, which
  TF 1.15's Estimator names temp-b'<timestamp>', and best/), or `export` stages (temp-RUN/), and
  was not there before it began.
  [] when model_dir has no EXPORTING_FILE for this export_dir."""
  record = json_files.read(config.model_dir.rstrip('/') + '/' + EXPORTING_FILE)
  if (not isinstance(record, dict) or
      str(record.get('export_dir', '')).rstrip('/') != config.export_dir.rstrip('/')):
    return []
  before = set(record.get('names_before') or [])
  return [n for n in outputs.existing_entries(config.export_dir)
          if n not in before and
          re.match(r"^(temp-(b'\d+'|[0-9a-f]+)|\d+|%s)$" % best_checkpoint.BEST_DIR, n)]


def finish(estimator, config, results, checkpoint_path, lease=None, fence=None):
  """Writes `results` to <model_dir>/results.json and copies the events files to a Vertex AI
  job's AIP_TENSORBOARD_LOG_DIR; then, when config.export_dir is set, exports `checkpoint_path`
  (and the best checkpoint that results['best'] names, if any, under <export_dir>/best) and
  writes results.json again with export_path (best_export_path). Results are written first so
  that a failing export does not lose them.

  `lease`: the held `trainer.storage.lease.Lease` of model_dir (training runs): the run records
  the export it begins in EXPORTING_FILE, removes what an interrupted one left
  (`interrupted_export`), and makes each SavedModel visible only after a read of the lease shows
  it still holds it (`export`). `fence`: a claimed `trainer.storage.state_fence.StateFence` on
  results.json (gs://), which then writes it: a run that lost the lease meanwhile cannot.

  Returns:
    the results dict.

  Raises:
    PipelineError: the export failed (results.json is written), saying why.
    lease.LeaseLost: the run lost model_dir's lease before its SavedModel became visible.
  """
  writer = lease is not None
  confirm = lease.confirm if writer else None
  _write_results(config, results, fence)
  vertex_env.copy_events(config.model_dir)
  if not config.export_dir:
    return results
  flag = export_dir_flag(config.export_dir)
  exporting = config.model_dir.rstrip('/') + '/' + EXPORTING_FILE
  try:
    left = interrupted_export(config) if writer else []
    if left:
      logging.warning('Removing what an interrupted export of this run left in %s: %s.',
                      config.export_dir, ', '.join(left))
      outputs.clear_output_dir(config.export_dir, left)
    if config.overwrite:  # what the start check found there (--overwrite), and anything since
      outputs.clear_output_dir(config.export_dir, outputs.existing_entries(config.export_dir))
    if writer:
      json_files.write(exporting, {'export_dir': config.export_dir,
                                   'names_before': outputs.existing_entries(config.export_dir)})
    exported = {'export_path': export(estimator, config, checkpoint_path, confirm=confirm)}
    if results.get('best'):
      best_dir = config.export_dir.rstrip('/') + '/' + best_checkpoint.BEST_DIR
      if checkpoints.same_checkpoint(results['best']['checkpoint'], checkpoint_path):
        # The same weights, so the same SavedModel: copied (no second graph, restore and save).
        exported['best_export_path'] = copy_saved_model(exported['export_path'], best_dir,
                                                        confirm)
        logging.info('The best checkpoint is the exported one: its SavedModel copied to %s',
                     exported['best_export_path'])
      else:
        exported['best_export_path'] = export(estimator, config, results['best']['checkpoint'],
                                              best_dir, confirm)
  except (tf.errors.OpError, OSError) as e:
    raise PipelineError(
        'the SavedModel export to %s=%s failed: %s. The run\'s results are in %s/%s (without '
        'export_path) and its checkpoints are intact: once %s can be written, run the same '
        'command again to export (with --overwrite if the failed export left files there).'
        % (flag, config.export_dir, _first_line(e), config.model_dir.rstrip('/'), RESULTS_FILE,
           flag))
  results.update(exported)
  _write_results(config, results, fence)
  if writer:
    tf.io.gfile.remove(exporting)
  return results


def _first_line(error):
  """The first line of an exception's text (TensorFlow's errors add their op's context)."""
  text = error.message if isinstance(error, tf.errors.OpError) else str(error)
  return '%s: %s' % (type(error).__name__, text.strip().split('\n')[0])


def run_facts(config, measured_steps, measured_seconds, start):
  """What results.json records about the run besides its metrics.

  Args:
    config: `trainer.run.run_config.Config`.
    measured_steps, measured_seconds: training steps and seconds the progress hooks timed.
    start: time.time() at the start of the run.
  """
  return {
      'mode': config.mode,
      'model': config.model.model,
      'input_fn': config.model.input_fn or None,
      'resnet_depth': config.model.resnet_depth if config.model.model == 'resnet' else None,
      'moving_average_decay': config.model.moving_average_decay,
      'image_size': (config.model.image_size if config.data.modality == 'image' and
                     not config.model.is_model_fn else None),
      'max_seq_length': config.model.max_seq_length if config.data.modality == 'text' else None,
      'train_batch_size': config.train_batch_size,
      'train_steps': config.train_steps,
      'seed': config.seed,
      'examples_per_sec': (measured_steps * config.train_batch_size / measured_seconds
                           if measured_seconds > 0 else None),
      'wall_seconds': time.time() - start,
      'use_tpu': config.use_tpu,
      'mirrored_devices': list(config.mirrored_devices),
      'precision': config.model.precision,
      'tensorflow_version': tf.__version__,
      'mkl_enabled': tf_build.mkl_enabled(),
  }


def hparams(config):
  """The run's hyperparameters for TensorBoard's HParams tab: {name: bool, int, float or str}."""
  model = config.model
  values = {
      'model': model.model, 'train_batch_size': config.train_batch_size,
      'train_steps': config.train_steps, 'seed': config.seed, 'optimizer': model.optimizer,
      'base_learning_rate': model.base_learning_rate, 'lr_schedule': model.lr_schedule,
      'warmup_epochs': model.warmup_epochs, 'weight_decay': model.weight_decay,
      'label_smoothing': model.label_smoothing, 'moving_average_decay': model.moving_average_decay,
      'gradient_clip_norm': model.gradient_clip_norm, 'precision': model.precision,
      'use_tpu': config.use_tpu, 'init_checkpoint': model.init_checkpoint,
      'freeze_backbone': model.freeze_backbone, 'tensorflow_version': tf.__version__,
  }
  if config.data.modality == 'image':
    values.update(image_size=model.image_size, train_crop=config.data.train_crop)
  elif model.is_built_in:
    values.update(max_seq_length=model.max_seq_length, embedding_dim=model.embedding_dim,
                  lstm_hidden_units=model.lstm_hidden_units)
  else:
    values.update(max_seq_length=model.max_seq_length)
  if not model.is_built_in:
    values['network_params'] = model.network_params
  if model.model == 'resnet':
    values['resnet_depth'] = model.resnet_depth
  return values


def tensorflow_runtime():
  """The Python and TensorFlow this process runs: python, tensorflow_version, tensorflow_build
  (the installed distribution: intel-tensorflow, tensorflow-cpu, ...), mkl_enabled (oneDNN),
  and host: the CPU (model, vector ISA, cores) and the environment its process ran with
  (trainer.host.threads: OpenMP and oneDNN settings, who set each)."""
  cpu, _, applied = host_threads.current()
  return {
      'python': platform.python_version(),
      'tensorflow_version': tf.__version__,
      'tensorflow_build': tf_build.tensorflow_build(),
      'mkl_enabled': tf_build.mkl_enabled(),
      'host': {'cpu_model': cpu.model, 'isa': cpu.isa, 'physical_cores': cpu.physical_cores,
               'logical_cpus': cpu.logical_cpus,
               # name -> [value, 'set' by the trainer or the 'user''s]
               'env': {name: [value, source] for name, value, source in applied}},
  }


def _write_results(config, results, fence):
  if fence:
    fence.write(json_files.text(results))
  else:
    write_json(config.model_dir, RESULTS_FILE, results)


def write_json(directory, name, value):
  """Writes `value` as indented JSON to <directory>/<name> (local or gs://), aside and renamed
  into place (`trainer.storage.json_files`): never half a file."""
  tf.io.gfile.makedirs(directory)
  json_files.write('%s/%s' % (directory.rstrip('/'), name), value)
