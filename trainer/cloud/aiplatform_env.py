"""What the trainer reads from AI Platform Training: the TF_CONFIG cluster and the
hyperparameter-tuning trial it reports to.

AI Platform runs each tuning trial with CLOUD_ML_HP_METRIC_TAG (the `hyperparameterMetricTag` of
the job's config, e.g. top_1_accuracy) and CLOUD_ML_TRIAL_ID set (Vertex AI: trainer.submit sets
the tag in every trial's pools); the trial's final value of that metric is reported through the
cloudml-hypertune package, which rewrites a local file that the service collects:
$CLOUD_ML_HP_METRIC_FILE, default /tmp/hypertune/output.metrics. On Google's training service
that file lies under /var/hypertune, writable by root only (cloudml-hypertune's PyPI page;
GoogleCloudPlatform/cloudml-hypertune#6): the project's image gives the file to its unprivileged
user before dropping root (scripts/container-entrypoint), and check_hypertune_trial proves it
writable before any training.
"""

import os

from absl import logging

from trainer.cloud import cluster_env
from trainer.errors import PipelineError

METRIC_TAG_ENV = 'CLOUD_ML_HP_METRIC_TAG'
METRIC_FILE_ENV = 'CLOUD_ML_HP_METRIC_FILE'
# cloudml-hypertune's own default when $CLOUD_ML_HP_METRIC_FILE is unset (hypertune/hypertune.py).
DEFAULT_METRIC_FILE = '/tmp/hypertune/output.metrics'


def distributed_task(environ=None):
  """The task of this process when TF_CONFIG describes a cluster with workers or parameter
  servers (TensorFlow's distributed runtime, as AI Platform's CUSTOM tier starts it).

  Returns:
    (task_type, task_index, cluster dict), or None for a single-process run (no TF_CONFIG, or
    AI Platform's BASIC tiers: a lone 'master'/'chief').

  Raises:
    PipelineError: TF_CONFIG is malformed (`trainer.cloud.cluster_env.tf_config`), or makes this
      process an evaluator (not run: the chief evaluates).
  """
  tf_config = cluster_env.tf_config(environ)
  cluster = tf_config.get('cluster') or {}
  if (tf_config.get('task') or {}).get('type') == cluster_env.EVALUATOR:
    # Before the single-process case: an evaluator beside a lone chief would train too.
    raise PipelineError(
        'TF_CONFIG makes this process an evaluator (Vertex AI worker pool 3, AI Platform '
        'evaluatorConfig), which this trainer does not run: in a cluster the chief evaluates the '
        'final checkpoint and writes results.json. Remove the evaluator pool from the job.')
  if not any(cluster.get(k) for k in cluster if k not in ('master', 'chief')):
    return None
  task = tf_config['task']  # cluster_env checked it is in the cluster
  return task['type'], task.get('index', 0), cluster


# The evaluation metrics in results.json that a tuning job can optimise.
TUNABLE_METRICS = ('top_1_accuracy', 'top_5_accuracy', 'loss')


def _is_reporter(environ):
  """The chief (or the only process) reports a trial's metric; workers and servers do not."""
  task = distributed_task(environ)
  return task is None or task[0] in ('chief', 'master')


def check_hypertune_trial(environ=None):
  """Before training, in a tuning trial ($CLOUD_ML_HP_METRIC_TAG set): the tag names one of
  `TUNABLE_METRICS`, and on the reporting process cloudml-hypertune's metric file can be written
  (opened for appending, created empty if absent; its directory created as the library does).

  Raises:
    PipelineError: the tag names no metric of this trainer, cloudml-hypertune is missing, or the
      file cannot be written (the trial would otherwise train for hours and then fail to report).
  """
  environ = os.environ if environ is None else environ
  tag = environ.get(METRIC_TAG_ENV)
  if not tag:
    return
  if tag not in TUNABLE_METRICS:
    raise PipelineError('hyperparameterMetricTag %r (from $%s) is not a metric of this trainer; '
                        'use one of %s.' % (tag, METRIC_TAG_ENV, ', '.join(TUNABLE_METRICS)))
  if not _is_reporter(environ):
    return
  _hypertune(tag)
  path = environ.get(METRIC_FILE_ENV, DEFAULT_METRIC_FILE)
  try:
    os.makedirs(os.path.dirname(path) or '.', exist_ok=True)  # as HyperTune() does
    with open(path, 'a'):
      pass
  except OSError as e:
    raise PipelineError(
        'this hyperparameter-tuning trial cannot write its metric file %s as uid %d (%s), so it '
        'would train and then report nothing. Google\'s training service keeps that file in a '
        'root-owned /var/hypertune: run the project\'s image as it is built (its entrypoint gives '
        'the file to the trainer\'s user before dropping root, docs/cloud.md), or run the '
        'container as root.' % (path, os.getuid(), e.strerror or e))


def _hypertune(tag):
  try:
    import hypertune  # pylint: disable=g-import-not-at-top
  except ImportError:
    raise PipelineError('this is a hyperparameter-tuning trial ($%s=%s) but cloudml-hypertune is '
                        'not installed: `pip install cloudml-hypertune` (setup.py lists it).'
                        % (METRIC_TAG_ENV, tag))
  return hypertune


def report_hypertune_metric(results, environ=None):
  """Reports results[$CLOUD_ML_HP_METRIC_TAG] at results['global_step'] in a tuning trial.

  Args:
    results: the run's results dict (as in results.json).
    environ: the environment (default os.environ).

  Returns:
    The reported value (float), or None outside a tuning trial.

  Raises:
    PipelineError: the tag names no metric of the run, or cloudml-hypertune is not installed.
  """
  environ = os.environ if environ is None else environ
  tag = environ.get(METRIC_TAG_ENV)
  if not tag or results.get('task_type') not in (None, 'chief', 'master'):
    return None  # not a tuning trial, or a worker / parameter server (the chief reports)
  check_hypertune_trial(environ)
  value = results.get(tag)
  if value is None:
    raise PipelineError('this run (mode %s) produced no %s to report to hyperparameter tuning; '
                        'use --mode=train_and_eval.' % (results.get('mode'), tag))
  _hypertune(tag).HyperTune().report_hyperparameter_tuning_metric(
      hyperparameter_metric_tag=tag, metric_value=float(value),
      global_step=int(results.get('global_step') or 0))
  logging.info('Reported %s = %.6f to AI Platform hyperparameter tuning (trial %s)', tag, value,
               environ.get('CLOUD_ML_TRIAL_ID', '?'))
  return float(value)
