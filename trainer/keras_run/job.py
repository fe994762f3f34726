"""One Keras 3 training run (`trainer.train_keras`): devices, model, data, the fit loop with its
checkpoints, then the evaluation, results.json, model.keras and (TensorFlow) the serving export.

The steps run as Keras `fit` "epochs" of log_every_steps each. A run that resumes from a step
that is not on that grid (stopped by SIGTERM) first trains up to the grid, and the last period
may be shorter: each `fit` call reads a new training input from its own first step on
(`dataset.skip`, or batch number `first` of the arrays' stream), so the batches are those of one
uninterrupted run.

The input is the pipeline's TFRecords through tf.data (keras_models/datasets.py), or, for a
data directory of `trainer.prepare arrays`, NumPy arrays (trainer/data/arrays.py): that path,
with the JAX or PyTorch backend, needs no TensorFlow at all.
"""

import os
import tempfile
import time

from absl import logging
import keras

from trainer.data import dataset_json
from trainer.errors import PipelineError
from trainer.errors import Preempted
from trainer.host import stop_signals
from trainer.keras_models import build
from trainer.keras_run import checkpoints as checkpoints_lib
from trainer.keras_run import devices as devices_lib
from trainer.keras_run import inputs as inputs_lib
from trainer.keras_run import process_outputs
from trainer.keras_run import progress as progress_lib
from trainer.keras_run import recipe
from trainer.keras_run import schedule as schedule_lib
from trainer.models import recipes
from trainer.storage import gfile
from trainer.storage import json_files
from trainer.storage import lease as lease_lib
from trainer.storage import outputs
from trainer.storage import staged
from trainer.storage import state_fence

RESULTS_FILE = 'results.json'
MODEL_FILE = 'model.keras'
SERVING_DIR = 'model_serving'


def _prepare_model_dir(config, checkpoints):
  """Refuses a finished run (or foreign files) in model_dir unless --overwrite, which deletes
  them; an unfinished run (a checkpoint, no results.json: the last output a run writes, so a
  run killed while writing model.keras or model_serving/ is unfinished too) is resumed."""
  names = outputs.existing_entries(config.model_dir)
  unfinished = checkpoints.latest() is not None and RESULTS_FILE not in names
  if not unfinished or config.overwrite:
    outputs.prepare_output_dir(config.model_dir, '--model_dir', config.overwrite)


def _save_model(model, model_dir, fence):
  """Writes <model_dir>/model.keras: staged and renamed (local disk), or on gs:// saved locally
  and uploaded through `fence` (a claimed StateFence on it), so that a run that lost the lease
  replaces no newer holder's model (lease.LeaseLost)."""
  path = os.path.join(model_dir, MODEL_FILE)
  if fence is None:
    with staged.staged_path(path) as temporary:
      model.save(temporary)
    return
  with tempfile.TemporaryDirectory() as local:
    model.save(os.path.join(local, MODEL_FILE))
    with open(os.path.join(local, MODEL_FILE), 'rb') as f:
      fence.write(f.read())


def _export_serving(model, model_dir, data_config, lease):
  """Writes <model_dir>/model_serving/ (keras_models.serving) under a hidden staged name and
  puts it in place (replacing what an export of this run cut short left) only after a read of
  the lease shows this run still holds it (lease.LeaseLost: the staged export is removed)."""
  from trainer.keras_models import serving  # pylint: disable=g-import-not-at-top
  serving_dir = os.path.join(model_dir, SERVING_DIR)
  temporary = staged.aside_name(serving_dir)
  try:
    serving.export(model, temporary, data_config)
    lease.confirm()
    if gfile.isdir(serving_dir):
      gfile.rmtree(serving_dir)
    gfile.rename(temporary, serving_dir)
  finally:
    staged.discard(temporary)


def _model(config, data_info, devices):
  with devices.scope():
    if config.init_model:
      return recipe.load_model(config.init_model, config.dtype_policy)
    return recipe.build_model(config, data_info['num_classes'], data_info)


def _inference_copy(model):
  """`model` without optimizer or compile, built outside any tf.distribute scope: under
  MirroredStrategy, `predict_on_batch` of the training model returns each replica's copy of the
  batch's logits (measured: 50 rows for a batch of 25 on 2 replicas)."""
  inference = model.__class__.from_config(model.get_config())
  inference.set_weights(model.get_weights())
  return inference


def _evaluate(model, data, batch_size, when):
  """recipe.scores of an `_inference_copy` on the whole evaluation split, logged."""
  scores = recipe.scores(model, data.evaluation(batch_size))
  logging.info('%s: accuracy %.4f, loss %.4f on the %d evaluation examples', when,
               scores['accuracy'], scores['loss'], scores['examples'])
  return scores


def _is_chief():
  """Whether this process writes the outputs (JAX multi-host: process 0 alone)."""
  if keras.backend.backend() != 'jax':
    return True
  import jax  # pylint: disable=g-import-not-at-top
  return jax.process_index() == 0


def _segments(start, total, period):
  """[(first step, steps per fit epoch, epochs)]: to the period grid, whole periods, the rest."""
  segments, step = [], start
  if step % period and step < total:
    steps = min(period - step % period, total - step)
    segments.append((step, steps, 1))
    step += steps
  if (total - step) // period:
    segments.append((step, period, (total - step) // period))
    step += period * ((total - step) // period)
  if total > step:
    segments.append((step, total - step, 1))
  return segments


def _tensorflow_version():
  try:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
  except ImportError:
    return None
  return tf.__version__


def train(config, callbacks=()):
  """Trains per `config`; returns the results dict (also in model_dir/results.json).

  Args:
    config: trainer.keras_run.run_config.KerasRunConfig (flags/to_keras_config.py).
    callbacks: more keras.callbacks.Callback for `fit`, called before the run's own (a stop
      they ask for at a step is honoured at that step).

  Raises:
    PipelineError: bad data or model, or outputs that would be replaced.
    Preempted: stopped by SIGTERM or a first Ctrl-C after saving a checkpoint (exit status 75:
      run it again).
    lease_lib.LeaseHeld, LeaseLost: another run writes model_dir (PipelineErrors).
  """
  devices = devices_lib.set_up(config.cpu_replicas, config.multi_host, config.data_parallel,
                               config.multi_host_timeout)
  chief = _is_chief()
  if config.train_batch_size % devices.replicas:
    raise PipelineError('--train_batch_size=%d does not split over %d replicas.'
                        % (config.train_batch_size, devices.replicas))
  checkpoints = checkpoints_lib.Checkpoints(os.path.join(config.model_dir, 'checkpoints'),
                                            config.keep_checkpoints, chief)
  keras.utils.set_random_seed(config.seed)
  info = dataset_json.read(config.data_dir)
  if not info:
    raise PipelineError('%s has no dataset.json: prepare the data with `python -m '
                        'trainer.prepare`.' % config.data_dir)
  model = _model(config, info, devices)
  data = inputs_lib.input_of(config, info, tuple(model.input.shape[1:]),
                             devices.strategy is not None)
  width = build.logits_of(model.output).shape[-1]
  if width != data.num_classes:
    raise PipelineError('the model has %d classes, %s has %d.' % (width, config.data_dir,
                                                                 data.num_classes))
  # One writer per model_dir (trainer.storage.lease): taken after every check of the input, so
  # that a refusal writes nothing; the chief holds it for every process of the job.
  with lease_lib.held(config.model_dir, '--model_dir', config.lease_expiry_secs,
                      'trainer.train_keras', needed=chief) as lease:
    checkpoints.before_save = lease.check if lease else None
    if lease:
      # What a killed run left aside; the lease's own files are the lease's to clear.
      staged.remove_leftovers(config.model_dir, but=(lease_lib.LEASE_FILE,))
      staged.remove_leftovers(checkpoints.directory)
    results_fence = model_fence = None
    if chief:  # the other processes of a multi-process run share model_dir and read it only
      _prepare_model_dir(config, checkpoints)
      if lease and config.model_dir.startswith('gs://'):
        checkpoints.fence(state_fence.StateFence(
            config.model_dir, lease, 'checkpoints/' + checkpoints_lib.STATE_FILE,
            'the checkpoint state file'))
        results_fence = state_fence.StateFence(
            config.model_dir, lease, RESULTS_FILE, 'the results file',
            'Run the same command again: it resumes from the newest checkpoint.')
        results_fence.claim()
        model_fence = state_fence.StateFence(config.model_dir, lease, MODEL_FILE,
                                             'the trained model')
        model_fence.claim()
    steps_per_epoch = data.num_train_examples / float(config.train_batch_size)
    total = config.train_steps or recipes.steps_of_epochs(
        config.train_epochs, data.num_train_examples, config.train_batch_size)
    plan = config.recipe
    schedule = schedule_lib.PipelineSchedule.from_recipe(plan, config.train_batch_size,
                                                         steps_per_epoch, total)
    with devices.scope():
      decayed = recipe.add_weight_decay(model, plan.weight_decay)
      recipe.compile_model(model, recipe.optimizer_of(plan, schedule), plan.label_smoothing,
                           plan.aux_loss_weight)
    devices.wait_for_all('model_dir prepared')  # the chief's --overwrite may delete checkpoints
    devices.check_same_everywhere(checkpoints.latest() or 0, 'the newest checkpoint\'s step in '
                                  '%s' % checkpoints.directory,
                                  '--model_dir must be one directory every process reads (gs://)')
    # Fine-tuning: the starting model's score, before any checkpoint of this run is loaded.
    before = None
    if config.init_model:
      before = _evaluate(_inference_copy(model), data, config.eval_batch_size, 'before training')
    with devices.scope():
      start = checkpoints.restore(model)

    def train_data(first):
      return data.train(model, config.train_batch_size, first)
    logging.info('%s on %s: %d replicas, steps %d to %d, batch %d, %d weights decayed',
                 model.name, keras.backend.backend(), devices.replicas, start, total,
                 config.train_batch_size, decayed)
    with stop_signals.SigtermFlag(at_period_end=devices.processes > 1) as sigterm:
      progress = progress_lib.Progress(
          checkpoints, sigterm, total, config.train_batch_size, config.save_checkpoints_steps,
          config.model_dir if chief else None, devices.any_everywhere)
      callbacks = list(callbacks) + [progress]
      began = time.time()
      epoch = start // config.log_every_steps
      try:
        for first, steps, epochs in _segments(start, total, config.log_every_steps):
          model.fit(train_data(first), initial_epoch=epoch, epochs=epoch + epochs, shuffle=False,
                    steps_per_epoch=steps, callbacks=callbacks, verbose=0)
          epoch += epochs
          if progress.stopped_at is not None:
            raise Preempted('checkpoint at step %d in %s' % (progress.stopped_at,
                                                            checkpoints.directory),
                            sigterm.cause)
      finally:
        progress.close()
      seconds = time.time() - began
    inference = _inference_copy(model)
    after = _evaluate(inference, data, config.eval_batch_size, 'step %d' % total)
    results = {
        'model': model.name, 'init_model': config.init_model, 'data_dir': config.data_dir,
        'steps': total, 'resumed_from_step': start, 'batch_size': config.train_batch_size,
        'accuracy': after['accuracy'], 'eval_loss': after['loss'],
        'eval_examples': after['examples'], 'before': before,
        'train_log': progress.history, 'seconds': seconds, 'seed': config.seed,
        'dtype_policy': config.dtype_policy, 'recipe': plan.as_dict(),
        'devices': devices.describe(), 'keras_version': keras.__version__,
        'tensorflow_version': _tensorflow_version(), 'input': data.kind,
    }
    if not chief:  # a collective: every process saves (trainer.keras_run.process_outputs)
      process_outputs.save_in_scratch(inference.save, '.keras')
    else:
      lease.check()
      _save_model(inference, config.model_dir, model_fence)
      if keras.backend.backend() == 'tensorflow' and data.config is not None:
        _export_serving(inference, config.model_dir, data.config, lease)
      if results_fence:
        results_fence.write(json_files.text(results))
      else:
        json_files.write(os.path.join(config.model_dir, RESULTS_FILE), results)
    return results
