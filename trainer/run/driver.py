"""Runs a `trainer.run.run_config.Config`: train, eval or train_and_eval in one process, with resume
from model_dir, or between-graph training when TF_CONFIG describes a cluster. Either way the run
ends in `trainer.run.results` (evaluation, export, results.json)."""

import contextlib
import dataclasses
import json
import time

from absl import logging
import tensorflow.compat.v1 as tf

from trainer.cloud import aiplatform_env
from trainer.cloud import gcs_preflight
from trainer.data import shards
from trainer.errors import PipelineError
from trainer.models import model_fn as model_fn_lib
from trainer.models import warm_start
from trainer.run import best_checkpoint
from trainer.run import checkpoints
from trainer.run import dry_run as dry_run_lib
from trainer.run import estimator as estimator_lib
from trainer.run import hooks as hooks_lib
from trainer.run import input_checks
from trainer.run import lease_hooks
from trainer.run import network_record
from trainer.run import predict as predict_lib
from trainer.run import preemption
from trainer.run import results as results_lib
from trainer.run import run_errors
from trainer.run import run_fences
from trainer.storage import lease as lease_lib
from trainer.storage import lease_stores
from trainer.storage import staged


def checkpoint_step(checkpoint_path):
  """global_step stored in a checkpoint (public API: tf.train.load_variable)."""
  return int(tf.train.load_variable(checkpoint_path, 'global_step'))


def latest_step(model_dir):
  """global_step of the latest checkpoint in model_dir, 0 when there is none."""
  checkpoint = tf.train.latest_checkpoint(model_dir)
  return checkpoint_step(checkpoint) if checkpoint else 0


def run(config, step_time=None):
  """Runs config.mode, exports if asked, writes <model_dir>/results.json and returns its dict
  (a worker or parameter server of a cluster returns its own task record instead; a prediction
  writes <model_dir>/predict_results.json, a dry run <model_dir>/dry_run.json). A training run
  first records its network in <model_dir>/model_config.json (`trainer.run.network_record`; the
  chief of a cluster).

  Args:
    config: `trainer.run.run_config.Config`.
    step_time: the step-time predictor for --predict_step_time (trainer.advise.own_device, given
      by trainer.main: the run layer does not import the advisor, which is built on it), with
      predict_run(config, session_config), scored(prediction, steps, seconds) and
      predict_slice(config, topology); None: no prediction.

  Raises:
    PipelineError: for anything the user must fix (data, TPU, checkpoints, cluster), among them
      an --export_dir that already holds something or a --predict_output that exists, without
      --overwrite (refused before any work); an export that failed (results.json is written).
    preemption.Preempted: on SIGTERM or a first Ctrl-C, after saving a checkpoint at the step
      reached.
    lease_lib.LeaseHeld: another live run is training into model_dir (a PipelineError).
    lease_lib.LeaseLost: another run took model_dir over during this one, which stopped before
      its next checkpoint (a PipelineError).
    PipelineError: the training diverged (a NaN or Inf loss), or model_dir's disk is full
      (`trainer.run.run_errors`): the newest usable checkpoint is kept.
  """
  config = _through_the_api(config)
  input_checks.check(config)  # vocab.txt, best.json, model_dir's checkpoint vs this network
  task = None if config.mode == 'dry_run' else aiplatform_env.distributed_task()
  chief = not task or task[0] in ('chief', 'master')
  if config.mode == 'predict':
    predict_lib.check_output(config)
  elif chief:  # the task that exports
    results_lib.check_export_dir(config)
  watch = preemption.SigtermWatch(config.model_dir, config.preemption_grace_secs,
                                  saves_checkpoints=chief)
  if task and task[0] == 'ps':  # holds nothing to save: SIGTERM may end it as it always did
    return _run(config, watch, task, None, step_time)
  # One writer per model_dir: training holds its lease (in a cluster, the chief for the job);
  # evaluation, prediction and dry runs only read it.
  writes = chief and config.mode in results_lib.WRITING_MODES
  if writes:
    gcs_preflight.check_path_usable(config.model_dir, 'model_dir', config.use_tpu)
  with lease_lib.held(config.model_dir, '--model_dir', config.lease_expiry_secs, 'trainer.main',
                      needed=writes) as lease, watch.installed(), \
      (run_errors.explain_full_disk(config) if writes else contextlib.nullcontext()):
    return _run(config, watch, task, lease, step_time)


def _through_the_api(config):
  """A model_dir on Vertex AI's Cloud Storage FUSE mount (/gcs/BUCKET/...) as gs://BUCKET/...:
  the run reads and writes it through TensorFlow's GCS file system and the Cloud Storage API,
  whose generation matches fence its checkpoints (trainer/storage/state_fence.py); the mount
  gives none, and its cache would serve a fenced file stale. The same objects either way."""
  path = lease_stores.object_path(config.model_dir)
  if not path or path == config.model_dir:
    return config
  logging.warning('--model_dir=%s is Cloud Storage mounted by Vertex AI: this run reads and '
                  'writes it as %s through the Cloud Storage API (the fences of its checkpoints '
                  'need it; docs/reliability.md).', config.model_dir, path)
  return dataclasses.replace(config, model_dir=path,
                             model=dataclasses.replace(config.model, model_dir=path))


def _run(config, watch, task, lease, step_time):
  if lease and tf.io.gfile.isdir(config.model_dir):
    staged.remove_leftovers(config.model_dir, but=(lease_lib.LEASE_FILE,))
    checkpoints.remove_unfinished_saves(config.model_dir)
  config = _resolve_init_checkpoint(config)
  if config.mode == 'predict':
    if task:
      raise PipelineError('--mode=predict runs as one process: unset TF_CONFIG (task %s %d).'
                          % task[:2])
    estimator = estimator_lib.build_estimator(config)
    summary = predict_lib.predict(estimator, config)
    results_lib.write_json(config.model_dir, predict_lib.RESULTS_FILE, summary)
    return summary
  if not config.data.fake_data and not config.model.is_model_fn:  # its input_fn: its own data
    is_training_splits = {'train': [True], 'eval': [False], 'train_and_eval': [True, False],
                          'dry_run': [True, False]}
    shards.check_shards_exist(config.data, is_training_splits[config.mode])
  if config.mode == 'dry_run':
    report = dry_run_lib.dry_run(config, config.tpu_topology, step_time)
    results_lib.write_json(config.model_dir, dry_run_lib.REPORT_FILE, report)
    return report
  if task:
    return _run_distributed(config, watch, lease, *task)
  fence = run_fences.state_fence_of(config, lease)
  results_fence = None  # results.json's, beside the state file's
  best_fences = None  # best/'s state file's and best.json's (trainer.run.best_checkpoint)
  estimator = estimator_lib.build_estimator(config, fence=fence)  # resolves a --use_tpu TPU
  if not lease:  # a training run checked it before taking the lease (`run`)
    gcs_preflight.check_path_usable(config.model_dir, 'model_dir', config.use_tpu)
  if config.mode != 'eval':  # training owns model_dir: a damaged newest checkpoint moves aside
    new_run = not checkpoints.newest_intact_checkpoint(config.model_dir)
    _record_network(config, new_run)
    if new_run:  # its settings
      hooks_lib.write_hparams(config.model_dir, results_lib.hparams(config),
                              [('loss', '.'), (model_fn_lib.TRAIN_ACCURACY_TAG, '.'),
                               ('top_1_accuracy', 'eval'), ('eval_loss', 'eval')])
    if fence:  # after any damaged checkpoint moved aside: earlier holders can no longer write
      results_fence, best_fences = run_fences.claim(config, lease, fence)
  throughput = [0, 0.0]  # steps, seconds measured by the progress hooks
  prediction = None
  if config.mode != 'eval' and config.predict_step_time:  # before training, on an idle host
    if step_time:
      prediction = step_time.predict_run(config, estimator.config.session_config)
    else:
      logging.info('No step-time predictor given to driver.run: no step_time in results.json.')
  start = time.time()
  if config.mode == 'eval':
    results, checkpoint = _eval_only(estimator, config)
  else:
    results = _train_and_eval(estimator, config, throughput, watch, lease, fence, best_fences)
    checkpoint = tf.train.latest_checkpoint(config.model_dir)
  results.update(results_lib.run_facts(config, throughput[0], throughput[1], start))
  if prediction:
    results['step_time'] = step_time.scored(prediction, *throughput)
  if lease:
    lease.check()
  return results_lib.finish(estimator, config, results, checkpoint, lease, results_fence)


def _record_network(config, new_run):
  """Writes model_config.json (for tools that rebuild the network outside Estimator) for a new
  run, or a run that has none yet; a resumed run keeps the record of the run that wrote its
  checkpoints (a resume with other network flags fails to restore them anyway)."""
  if new_run or not tf.io.gfile.exists(network_record.path(config.model_dir)):
    network_record.write(config.model_dir, config)


def _resolve_init_checkpoint(config):
  """The config with --init_checkpoint resolved once, before any graph is built: '' when
  model_dir holds a checkpoint of its own (a restarted fine-tune resumes it and does not read the
  init checkpoint, which may be gone by then), else the checkpoint prefix it names, checked
  intact (a directory: its newest intact checkpoint).

  Raises:
    PipelineError: not a checkpoint, or damaged.
  """
  path = config.model.init_checkpoint
  if not path or config.mode in ('eval', 'predict'):
    return config
  if tf.train.latest_checkpoint(config.model_dir):
    logging.info('model_dir %s holds a checkpoint of its own: resuming it; --init_checkpoint %s '
                 'is not read.', config.model_dir, path)
    prefix = ''
  elif tf.io.gfile.isdir(path):
    prefix = checkpoints.newest_intact_checkpoint(path, move_aside=False)
    if not prefix:
      raise PipelineError('--init_checkpoint %s is a directory without checkpoints (no '
                          '`checkpoint` state file naming one); pass a checkpoint prefix such as '
                          'DIR/model.ckpt-1000.' % path)
  else:
    with run_errors.explain_warm_start_errors():
      prefix = warm_start.checkpoint_prefix(path)
    problem = checkpoints.checkpoint_damage(prefix)
    if problem:
      raise PipelineError('--init_checkpoint %s is damaged: %s. Pass an intact checkpoint.'
                          % (prefix, problem))
  return dataclasses.replace(config, model=dataclasses.replace(config.model,
                                                               init_checkpoint=prefix))


def _train(estimator, config, start_step, max_steps, throughput, watch, lease, fence):
  hook = hooks_lib.ProgressHook(config.model, config.train_steps, config.log_every_n_secs)
  hooks = [hook, watch.hook()] + ([lease_hooks.LeaseHook(lease)] if lease else [])
  if (not config.use_tpu and config.data.modality == 'image' and start_step == 0 and
      not config.model.is_model_fn):
    hooks.append(hooks_lib.InputImagesHook(config.model_dir))
  if config.profile_steps:
    hooks.append(hooks_lib.TraceHook(config.model_dir.rstrip('/') + '/profile',
                                     *config.profile_steps))
  with run_errors.explain_input_errors(config, 'train'), \
      run_errors.explain_checkpoint_mismatch(config), run_errors.explain_tpu_shape_errors(config), \
      run_errors.explain_warm_start_errors(), \
      run_errors.explain_divergence(config, hook, fence=fence), watch.training():
    estimator.train(estimator_lib.input_fns(config, estimator, start_step)[0],
                    max_steps=max_steps, hooks=hooks,
                    saving_listeners=[lease_hooks.LeaseSaverListener(lease)] if lease else None)
  throughput[0] += hook.measured_steps
  throughput[1] += hook.measured_seconds


def _evaluate(estimator, config, checkpoint_path):
  return results_lib.evaluate(estimator, config, checkpoint_path,
                              estimator_lib.input_fns(config, estimator)[1])


def _train_and_eval(estimator, config, throughput, watch, lease, fence=None, best_fences=None):
  """Trains to config.train_steps in chunks of steps_per_eval (train_and_eval) and evaluates
  after each; keeps the best checkpoint (config.keep_best) and stops early after
  config.early_stopping_evals evaluations without a better top_1_accuracy. Returns the last
  evaluation's results (train: the step reached), with the best one and why training stopped.
  `fence`, `best_fences`: on gs://, the fences that write the state file (after a divergence)
  and best/'s files (`best_checkpoint.BestCheckpoint`)."""
  step = latest_step(config.model_dir)
  if step >= config.train_steps:
    logging.info('model_dir %s already holds a checkpoint at step %d >= train_steps %d: not '
                 'training; raise --train_steps to train longer.', config.model_dir, step,
                 config.train_steps)
  elif step > 0:
    logging.info('Resuming from the checkpoint at step %d of %d in %s', step, config.train_steps,
                 config.model_dir)
  evaluating = config.mode == 'train_and_eval'
  best = best_checkpoint.BestCheckpoint(config.model_dir, keep=config.keep_best and evaluating,
                                        fences=best_fences)
  chunk = config.steps_per_eval if evaluating else config.train_steps
  results = None
  stopped_early = False
  if (evaluating and 0 < step < config.train_steps and step % chunk == 0 and
      not best.evaluated(step)):
    # The evaluation of this checkpoint was cut short (preemption): do it before training on.
    _evaluate_latest(estimator, config, best, lease)
  while step < config.train_steps:
    if evaluating and _should_stop(config, best):
      stopped_early = True
      break
    next_stop = min(config.train_steps, (step // chunk + 1) * chunk)
    _train(estimator, config, step, next_stop, throughput, watch, lease, fence)
    step = latest_step(config.model_dir)
    if evaluating:
      results = _evaluate_latest(estimator, config, best, lease)
  if not evaluating:
    return {'global_step': step}
  if results is None:  # nothing trained (finished before, or stopped early before): evaluate
    results = _evaluate_latest(estimator, config, best, lease)
  results['stopped_early'] = stopped_early
  if best.best and config.keep_best:
    results['best'] = best.best
  return results


def _evaluate_latest(estimator, config, best, lease):
  """Evaluates model_dir's latest checkpoint and records it in `best` (after checking the lease:
  an evaluation can outlast it); returns the results."""
  checkpoint = tf.train.latest_checkpoint(config.model_dir)
  results = _evaluate(estimator, config, checkpoint)
  if not config.model.is_model_fn:  # a legacy model_fn's metrics need not hold top-1
    if lease:
      lease.check()
    best.record(results, checkpoint)
  return results


def _should_stop(config, best):
  """True when config.early_stopping_evals evaluations in a row did not beat the best (logged)."""
  if not config.early_stopping_evals or best.evaluations_since_best < config.early_stopping_evals:
    return False
  logging.info('Stopping early: no better %s in the last %d evaluations (best %.4f at step %d); '
               '--early_stopping_evals=%d.', best_checkpoint.METRIC, best.evaluations_since_best,
               best.best[best_checkpoint.METRIC], best.best['global_step'],
               config.early_stopping_evals)
  return True


def _eval_only(estimator, config):
  """Evaluates the newest intact checkpoint; with eval_timeout > 0 keeps evaluating new
  checkpoints until one reaches train_steps (if given) or none appears for eval_timeout seconds
  (never forever). Returns (results, the checkpoint they are of)."""
  if config.eval_timeout <= 0:
    checkpoint = checkpoints.newest_intact_checkpoint(config.model_dir, move_aside=False)
    if not checkpoint:
      raise PipelineError('no checkpoint in %s to evaluate; train first or pass --eval_timeout '
                          'to wait for one.' % config.model_dir)
    return _evaluate(estimator, config, checkpoint), checkpoint
  results = evaluated = None
  for checkpoint in tf.train.checkpoints_iterator(config.model_dir, timeout=config.eval_timeout):
    # Training may delete (keep_checkpoint_max) or be writing what was listed: skip it, not crash.
    problem = checkpoints.checkpoint_damage(checkpoint)
    if problem:
      logging.warning('Skipping checkpoint %s: %s.', checkpoint, problem)
      continue
    try:
      results, evaluated = _evaluate(estimator, config, checkpoint), checkpoint
    except (tf.errors.NotFoundError, ValueError) as e:
      if isinstance(e, ValueError) and 'not a valid checkpoint' not in str(e):
        raise
      logging.warning('Skipping checkpoint %s: it disappeared while being evaluated (%s).',
                      checkpoint, str(e).split('\n')[0])
      continue
    if config.train_steps and results['global_step'] >= config.train_steps:
      break
  if results is None:
    raise PipelineError('no intact checkpoint appeared in %s within --eval_timeout=%d s.'
                        % (config.model_dir, config.eval_timeout))
  return results, evaluated


def _run_distributed(config, watch, lease, task_type, task_index, cluster):
  """Between-graph training on TensorFlow's distributed runtime (`tf.estimator.train_and_evaluate`
  with the TF_CONFIG cluster). Parameter servers serve until they are stopped; every worker trains
  until the shared global_step reaches train_steps and records its own step count in
  <model_dir>/tasks/<type>-<index>.json; the chief then evaluates the final checkpoint, exports,
  and writes results.json.

  --keep_best does not apply here: the chief evaluates the final checkpoint only.

  Raises:
    PipelineError: --use_tpu, MirroredStrategy, --mode=eval or --early_stopping_evals with such
      a cluster.
  """
  if config.early_stopping_evals:
    raise PipelineError('--early_stopping_evals is not supported in a TF_CONFIG cluster (its '
                        'evaluations run beside training); drop the flag.')
  fence = run_fences.state_fence_of(config, lease)  # the chief's, on gs://
  results_fence = None
  estimator = estimator_lib.build_estimator(config, (task_type, task_index, cluster), fence=fence)
  if task_type != 'ps' and not lease:  # the chief checked it before taking the lease (`run`)
    gcs_preflight.check_path_usable(config.model_dir, 'model_dir')
  if task_type in ('chief', 'master'):
    _record_network(config, not checkpoints.newest_intact_checkpoint(config.model_dir))
    if fence:
      results_fence = run_fences.claim(config, lease, fence)[0]
  logging.info('Distributed training: task %s %d of cluster %s', task_type, task_index,
               json.dumps(cluster, sort_keys=True))
  progress = hooks_lib.ProgressHook(config.model, config.train_steps, config.log_every_n_secs)
  counter = hooks_lib.LocalStepCounter()
  # The chief holds model_dir's lease; TF 1.15's TrainSpec has no saving listeners, so the
  # heartbeat's finding is checked after each step.
  lease_hook = [lease_hooks.LeaseHook(lease)] if lease else []
  train_input_fn, eval_input_fn = estimator_lib.input_fns(
      config, estimator, latest_step(config.model_dir))
  start = time.time()
  with run_errors.explain_input_errors(config, 'train'), \
      run_errors.explain_checkpoint_mismatch(config), run_errors.explain_warm_start_errors(), \
      run_errors.explain_divergence(config, progress, lease is not None, fence), \
      watch.training():
    tf.estimator.train_and_evaluate(  # a 'ps' task serves here until it is stopped
        estimator,
        tf.estimator.TrainSpec(train_input_fn, max_steps=config.train_steps,
                               hooks=[progress, counter, watch.hook()] + lease_hook),
        tf.estimator.EvalSpec(eval_input_fn, steps=config.eval_steps))
  task = {'task_type': task_type, 'task_index': task_index, 'local_steps': counter.steps,
          'wall_seconds': time.time() - start}
  results_lib.write_json(config.model_dir + '/tasks', '%s-%d.json' % (task_type, task_index), task)
  if task_type not in ('chief', 'master'):
    return task
  checkpoint = tf.train.latest_checkpoint(config.model_dir)
  results = results_lib.evaluate(estimator, config, checkpoint, eval_input_fn)
  results.update(results_lib.run_facts(config, progress.measured_steps,
                                       progress.measured_seconds, start))
  results.update(task, cluster={k: len(v) for k, v in cluster.items()})
  if config.export_dir:
    gcs_preflight.check_path_usable(config.export_dir, 'export_dir')
  if lease:
    lease.check()
  return results_lib.finish(estimator, config, results, checkpoint, lease, results_fence)
