"""Inside a Vertex AI custom job: the AIP_* output directories as defaults (flags win), one
directory per tuning trial, events copied to AIP_TENSORBOARD_LOG_DIR, the evaluator refused. A
tuning trial's chief + worker + parameter server writing to gs:// as Vertex AI sets them up is
tests/test_distributed.py's cluster on TF 2.15."""

import json
import types
import uuid

import pytest
import tensorflow.compat.v1 as tf

from trainer.cloud import aiplatform_env
from trainer.cloud import vertex_env
from trainer.errors import PipelineError
from trainer.flags import to_config

from helpers import needs_gcs
from helpers import vertex_ai_env

# ---- the environment -> settings rule (in-process) -----------------------------------------------

def test_aip_directories_are_the_defaults_without_their_trailing_slash():
  env = vertex_ai_env('gs://bkt/job')
  assert vertex_env.output_dirs(None, None, None, 'train_and_eval', env) == (
      'gs://bkt/job/checkpoints', 'gs://bkt/job/model')
  assert vertex_env.tensorboard_dir('gs://bkt/job/checkpoints', env) == 'gs://bkt/job/logs'


def test_flags_win_over_the_environment():
  env = vertex_ai_env('gs://bkt/job')
  assert vertex_env.output_dirs('gs://bkt/m', 'gs://bkt/e', 'gs://bkt/j', 'train', env) == (
      'gs://bkt/m', 'gs://bkt/e')
  assert vertex_env.output_dirs(None, None, 'gs://bkt/j', 'train', env) == (
      'gs://bkt/j', 'gs://bkt/job/model')


def test_only_training_modes_export_to_aip_model_dir():
  env = vertex_ai_env('gs://bkt/job')
  for mode in ('eval', 'predict', 'dry_run'):
    assert vertex_env.output_dirs(None, None, None, mode, env).export_dir is None, mode


def test_missing_variables_change_nothing():
  assert vertex_env.output_dirs(None, None, None, 'train', {}) == (None, None)
  assert vertex_env.output_dirs('/tmp/m', None, None, 'train', {}) == ('/tmp/m', None)
  assert vertex_env.tensorboard_dir('/tmp/m', {}) is None
  assert vertex_env.copy_events('/nonexistent', {}) == 0
  with pytest.raises(PipelineError, match='AIP_CHECKPOINT_DIR'):
    to_config.model_dir_of(types.SimpleNamespace(model_dir=None, job_dir=None))


def test_tensorboard_dir_equal_to_model_dir_is_not_a_copy_target():
  env = {'AIP_TENSORBOARD_LOG_DIR': 'gs://bkt/run/'}
  assert vertex_env.tensorboard_dir('gs://bkt/run', env) is None


@pytest.mark.parametrize('env,expected', [
    ({'CLOUD_ML_TRIAL_ID': '4'}, '4'),
    ({'TF_CONFIG': json.dumps({'task': {'type': 'chief', 'index': 0, 'trial': '5'}})}, '5'),
    ({'CLUSTER_SPEC': json.dumps({'task': {'type': 'workerpool0', 'index': 0, 'trial': '6'}})},
     '6'),
    ({'CLOUD_ML_TRIAL_ID': '4', 'CLUSTER_SPEC': json.dumps({'task': {'trial': '6'}})}, '4'),
    ({}, ''),
])
def test_trial_id_sources(env, expected):
  assert vertex_env.trial_id(env) == expected


@pytest.mark.parametrize('env', [{'TF_CONFIG': '{not json'}, {'CLUSTER_SPEC': '[]'}])
def test_trial_id_refuses_a_malformed_variable(env):
  """trainer.cloud.cluster_env checks both variables; a bad one is refused, not ignored."""
  with pytest.raises(PipelineError, match=sorted(env)[0]):
    vertex_env.trial_id(env)


def test_two_tuning_trials_of_one_job_never_share_a_directory():
  """The same command line (an explicit shared --model_dir/--export_dir, or none) in two trials of
  one Vertex AI tuning job: every directory is the trial's own."""
  dirs = {}
  for trial in ('1', '2'):
    env = vertex_ai_env('gs://bkt/hpt', trial)
    dirs[trial] = (vertex_env.output_dirs(None, None, None, 'train_and_eval', env),
                   vertex_env.output_dirs('gs://bkt/shared', 'gs://bkt/exp/', None, 'train', env),
                   vertex_env.tensorboard_dir('x', env))
  assert dirs['1'][0] == ('gs://bkt/hpt/1/checkpoints', 'gs://bkt/hpt/1/model')
  assert dirs['2'][1] == ('gs://bkt/shared/2', 'gs://bkt/exp/2')
  assert dirs['2'][2] == 'gs://bkt/hpt/2/logs'
  flat = [d for trial in dirs.values() for pair in trial[:2] for d in pair] + [
      dirs['1'][2], dirs['2'][2]]
  assert len(set(flat)) == len(flat)
  # A directory that already ends with the trial id is kept (a wrapper that appended it itself).
  env = vertex_ai_env('gs://bkt/hpt', '2')
  assert vertex_env.output_dirs('gs://bkt/m/2/', None, None, 'train', env).model_dir == (
      'gs://bkt/m/2/')


def test_trial_in_tf_config_only_also_separates_an_explicit_model_dir():
  env = {'CLUSTER_SPEC': json.dumps({'cluster': {'workerpool0': ['h:1']},
                                     'task': {'type': 'workerpool0', 'index': 0, 'trial': '9'}})}
  assert vertex_env.output_dirs('gs://bkt/m', None, None, 'train', env).model_dir == 'gs://bkt/m/9'


def test_legacy_ai_platform_job_dir_is_kept_as_given_in_a_tuning_trial():
  """Not a Vertex AI job (no AIP_*, no workerpool CLUSTER_SPEC): --job-dir as before."""
  env = {'CLOUD_ML_TRIAL_ID': '3', 'TF_CONFIG': json.dumps(
      {'cluster': {'master': ['h:1']}, 'task': {'type': 'master', 'index': 0, 'trial': '3'}})}
  assert vertex_env.output_dirs(None, None, 'gs://bkt/job', 'train', env) == ('gs://bkt/job', None)


def test_to_config_takes_the_vertex_dirs(monkeypatch):
  for name, value in vertex_ai_env('gs://bkt/v', '8').items():
    monkeypatch.setenv(name, value)
  f = to_config.with_vertex_dirs(types.SimpleNamespace(model_dir=None, export_dir=None,
                                                       job_dir=None, mode='train', other=1))
  assert (f.model_dir, f.export_dir, f.other) == ('gs://bkt/v/8/checkpoints', 'gs://bkt/v/8/model',
                                                  1)
  assert to_config.model_dir_of(f) == 'gs://bkt/v/8/checkpoints'


# ---- TF_CONFIG as Vertex AI sets it --------------------------------------------------------------

def test_vertex_tf_config_chief_worker_ps_is_a_cluster_and_the_evaluator_is_refused():
  cluster = {'chief': ['h0:2222'], 'worker': ['h1:2222'], 'ps': ['h2:2222']}
  env = {'TF_CONFIG': json.dumps({'cluster': cluster, 'environment': 'cloud',
                                  'task': {'type': 'worker', 'index': 0, 'trial': '2'}})}
  assert aiplatform_env.distributed_task(env) == ('worker', 0, cluster)
  for evaluator_cluster in (cluster, {'chief': ['h0:2222']}):
    env = {'TF_CONFIG': json.dumps({'cluster': evaluator_cluster,
                                    'task': {'type': 'evaluator', 'index': 0}})}
    with pytest.raises(PipelineError, match='Remove the evaluator pool'):
      aiplatform_env.distributed_task(env)


# ---- the events copy -----------------------------------------------------------------------------

def _write_events(directory, value):
  with tf.Graph().as_default():
    writer = tf.summary.FileWriter(directory)
    writer.add_summary(tf.Summary(value=[tf.Summary.Value(tag='x', simple_value=value)]), 1)
    writer.close()


def _check_copy_events(model_dir, logs):
  env = {'AIP_TENSORBOARD_LOG_DIR': logs + '/'}
  _write_events(model_dir, 1.0)
  _write_events(model_dir + '/eval', 2.0)
  assert vertex_env.copy_events(model_dir, env) == 2
  assert vertex_env.copy_events(model_dir, env) == 0  # unchanged: nothing to copy
  (train,) = tf.io.gfile.glob(logs + '/events.out.tfevents.*')
  (evaluation,) = tf.io.gfile.glob(logs + '/eval/events.out.tfevents.*')
  with tf.io.gfile.GFile(evaluation, 'rb') as f, \
      tf.io.gfile.GFile(tf.io.gfile.glob(model_dir + '/eval/events.*')[0], 'rb') as g:
    assert f.read() == g.read()
  assert train.rsplit('/', 1)[1] == tf.io.gfile.glob(model_dir + '/events.*')[0].rsplit('/', 1)[1]


def test_events_files_are_copied_once_each(tmp_path):
  _check_copy_events(str(tmp_path / 'model'), str(tmp_path / 'logs'))


def test_a_failed_events_copy_warns_and_the_run_goes_on(tmp_path, caplog):
  model_dir = str(tmp_path / 'model')
  _write_events(model_dir, 1.0)
  (tmp_path / 'logs').write_text('a file where the directory should be')
  caplog.set_level('WARNING')
  env = {'AIP_TENSORBOARD_LOG_DIR': str(tmp_path / 'logs' / 'run')}
  assert vertex_env.copy_events(model_dir, env) == 0
  assert 'the run goes on' in caplog.text


@needs_gcs
def test_events_files_are_copied_between_gcs_directories():
  base = 'gs://bkt/%s' % uuid.uuid4().hex[:12]
  _check_copy_events(base + '/checkpoints', base + '/logs')
