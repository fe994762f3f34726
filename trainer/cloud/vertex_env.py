"""What the trainer reads from a Vertex AI custom training job: the output directories it is given
(AIP_*), the hyperparameter-tuning trial it runs as, and the TensorBoard directory it must fill.

What Vertex AI sets (Google's pages, as of 2025):

- With the CustomJob's `baseOutputDirectory` set, every replica gets AIP_MODEL_DIR =
  <base>/model/, AIP_CHECKPOINT_DIR = <base>/checkpoints/ and AIP_TENSORBOARD_LOG_DIR =
  <base>/logs/; in a HyperparameterTuningJob each trial's CustomJob has <base>/<trial_id> as its
  base, so these are <base>/<trial_id>/model/ etc. (the `baseOutputDirectory` field of
  CustomJobSpec: https://cloud.google.com/vertex-ai/docs/reference/rest/v1/CustomJobSpec).
  Vertex AI TensorBoard streams what is written to AIP_TENSORBOARD_LOG_DIR
  (https://cloud.google.com/vertex-ai/docs/experiments/tensorboard-training).
- The worker pools are, in order, the primary replica (chief), workers, parameter servers and
  evaluators; each replica gets CLUSTER_SPEC (pools named workerpool0..workerpool3) and TF_CONFIG,
  whose task types are TensorFlow's (chief, worker, ps, evaluator)
  (https://cloud.google.com/vertex-ai/docs/training/distributed-training). TF_CONFIG's cluster
  never lists the evaluator, and its task carries the tuning trial's id as `trial`
  (https://cloud.google.com/ai-platform/training/docs/distributed-training-details).
- CLOUD_ML_TRIAL_ID names the trial as on AI Platform (read first when present).

The trainer runs TF_CONFIG's cluster (`trainer.cloud.aiplatform_env.distributed_task`); CLUSTER_SPEC
is read for the trial id only. Both are parsed and checked by `trainer.cloud.cluster_env`.
"""

import collections
import os

from absl import logging
import tensorflow.compat.v1 as tf

from trainer.cloud import cluster_env
from trainer.storage import patterns

MODEL_DIR_ENV = 'AIP_MODEL_DIR'
CHECKPOINT_DIR_ENV = 'AIP_CHECKPOINT_DIR'
TENSORBOARD_DIR_ENV = 'AIP_TENSORBOARD_LOG_DIR'
TRIAL_ENV = 'CLOUD_ML_TRIAL_ID'
# The modes whose run ends in a SavedModel export when an export directory is set: AIP_MODEL_DIR
# is their default; an evaluation or prediction in a Vertex job exports only with --export_dir.
EXPORTING_MODES = ('train', 'train_and_eval')
# The events files the Estimator writes: model_dir (training, the graph, HParams) and
# model_dir/eval (every evaluation).
EVENT_SUBDIRS = ('', 'eval')
_EVENTS_GLOB = 'events.out.tfevents.*'

OutputDirs = collections.namedtuple('OutputDirs', ['model_dir', 'export_dir'])


def trial_id(environ=None):
  """The hyperparameter-tuning trial this process runs, '' outside a tuning job.

  CLOUD_ML_TRIAL_ID, else TF_CONFIG's task.trial, else CLUSTER_SPEC's task.trial.

  Raises:
    PipelineError: TF_CONFIG or CLUSTER_SPEC is malformed (`trainer.cloud.cluster_env`).
  """
  environ = os.environ if environ is None else environ
  if environ.get(TRIAL_ENV):
    return str(environ[TRIAL_ENV])
  for spec in (cluster_env.tf_config(environ), cluster_env.cluster_spec(environ)):
    task = spec.get('task') or {}
    if task.get('trial'):
      return str(task['trial'])
  return ''


def in_vertex_job(environ=None):
  """True when the environment is a Vertex AI custom job's: an AIP_* output directory is set, or
  CLUSTER_SPEC names Vertex's worker pools (workerpool0, ...).

  Raises:
    PipelineError: CLUSTER_SPEC is malformed (`trainer.cloud.cluster_env.cluster_spec`).
  """
  environ = os.environ if environ is None else environ
  if any(environ.get(name) for name in (MODEL_DIR_ENV, CHECKPOINT_DIR_ENV, TENSORBOARD_DIR_ENV)):
    return True
  return 'workerpool0' in (cluster_env.cluster_spec(environ).get('cluster') or {})


def _per_trial(path, trial, flag):
  """`path` with /<trial> appended unless its last component already is the trial id (a user
  who wrote .../<trial_id> himself, or a restarted trial reading its own flags)."""
  stripped = path.rstrip('/')
  if stripped.rsplit('/', 1)[-1] == trial:
    return path
  logging.info('Vertex AI tuning trial %s: --%s=%s becomes %s/%s so that trials do not share '
               'it.', trial, flag, path, stripped, trial)
  return '%s/%s' % (stripped, trial)


def output_dirs(model_dir, export_dir, job_dir, mode, environ=None):
  """The run's model_dir and export_dir, from the flags and a Vertex AI job's environment.

  Precedence: --model_dir, else --job_dir, else AIP_CHECKPOINT_DIR for model_dir; --export_dir,
  else (in `EXPORTING_MODES`) AIP_MODEL_DIR for export_dir. Each AIP_* value is taken without its
  trailing slash and is already the trial's own. In a Vertex AI tuning trial (`trial_id` known
  and `in_vertex_job`) a directory given by flag gets /<trial_id> appended: every trial runs the
  same command line, so a shared --model_dir would make trial 2 resume trial 1's checkpoints and
  overwrite its results.json. Outside Vertex AI (legacy AI Platform's --job-dir, a local run)
  flags are used as given. Each default taken from the environment is logged at INFO.

  Args:
    model_dir, export_dir, job_dir: the flags' values (str or None).
    mode: --mode.
    environ: the environment (default os.environ).

  Returns:
    OutputDirs(model_dir, export_dir): str or None each; model_dir None when no flag or variable
    gives one (`flags.to_config.model_dir_of` refuses that).
  """
  environ = os.environ if environ is None else environ
  trial = trial_id(environ) if in_vertex_job(environ) else ''
  given = model_dir or job_dir
  if given:
    flag = 'model_dir' if model_dir else 'job_dir'
    model_dir = _per_trial(given, trial, flag) if trial else given
  elif environ.get(CHECKPOINT_DIR_ENV):
    model_dir = environ[CHECKPOINT_DIR_ENV].rstrip('/')
    logging.info('model_dir %s from $%s (Vertex AI).', model_dir, CHECKPOINT_DIR_ENV)
  if export_dir:
    export_dir = _per_trial(export_dir, trial, 'export_dir') if trial else export_dir
  elif environ.get(MODEL_DIR_ENV) and mode in EXPORTING_MODES:
    export_dir = environ[MODEL_DIR_ENV].rstrip('/')
    logging.info('export_dir %s from $%s (Vertex AI): the SavedModel goes to a timestamped '
                 'directory in it.', export_dir, MODEL_DIR_ENV)
  return OutputDirs(model_dir or None, export_dir or None)


def tensorboard_dir(model_dir, environ=None):
  """AIP_TENSORBOARD_LOG_DIR (without its trailing slash) when it is set and is not model_dir
  itself, else None."""
  environ = os.environ if environ is None else environ
  logs = (environ.get(TENSORBOARD_DIR_ENV) or '').rstrip('/')
  if not logs or logs == model_dir.rstrip('/'):
    return None
  return logs


def copy_events(model_dir, environ=None):
  """Copies the Estimator's events files (model_dir and model_dir/eval) to AIP_TENSORBOARD_LOG_DIR
  (same names, same eval/ subdirectory), so that Vertex AI TensorBoard, which watches that
  directory, shows the run while it trains. Called after each evaluation and at the end of the
  run; an events file is append-only, so one whose copy has the same size is skipped and a grown
  one is copied again. Local or gs:// either side (tf.io.gfile).

  Args:
    model_dir: the run's model_dir.
    environ: the environment (default os.environ).

  Returns:
    The number of files copied (0 without AIP_TENSORBOARD_LOG_DIR).
  """
  logs = tensorboard_dir(model_dir, environ)
  if not logs:
    return 0
  try:
    return _copy_events(model_dir, logs)
  except tf.errors.OpError as e:  # TensorBoard's copy must not cost the run its results
    logging.warning('Copying the events files to $%s %s failed (%s); the run goes on and the '
                    'next evaluation tries again.', TENSORBOARD_DIR_ENV, logs, e)
    return 0


def _copy_events(model_dir, logs):
  copied = 0
  for sub in EVENT_SUBDIRS:
    source = '/'.join(p for p in (model_dir.rstrip('/'), sub) if p)
    target = '/'.join(p for p in (logs, sub) if p)
    for path in patterns.files_matching(source, _EVENTS_GLOB):
      destination = target + '/' + path.rsplit('/', 1)[-1]
      if (tf.io.gfile.exists(destination) and
          tf.io.gfile.stat(destination).length == tf.io.gfile.stat(path).length):
        continue
      tf.io.gfile.makedirs(target)
      tf.io.gfile.copy(path, destination, overwrite=True)
      copied += 1
  if copied:
    logging.info('Copied %d events file(s) from %s to $%s %s (Vertex AI TensorBoard).', copied,
                 model_dir, TENSORBOARD_DIR_ENV, logs)
  return copied
