"""Multi-worker CPU training on TensorFlow's own distributed runtime: a chief, a worker and a
parameter server as separate processes on 127.0.0.1, configured through TF_CONFIG as AI Platform's
CUSTOM tier did it (TF 1.15) and as a Vertex AI tuning trial's worker pools are (TF 2.15)."""

import json
import os
import re
import uuid

import pytest
import tensorflow.compat.v1 as tf

from trainer.run import network_record

from helpers import free_ports
from helpers import needs_gcs
from helpers import results_of
from helpers import run_cluster
from helpers import run_main
from helpers import TINY
from helpers import vertex_ai_env


def _tf_config(cluster):
  """env_of for helpers.run_cluster: each task's TF_CONFIG in `cluster`."""
  return lambda task_type: dict(os.environ, TF_CONFIG=json.dumps(
      {'cluster': cluster, 'task': {'type': task_type, 'index': 0}}))


# One cluster per runtime (each takes about 35 s): on TF 1.15 configured by TF_CONFIG alone, as AI
# Platform's CUSTOM tier did, model_dir on local disk (TensorFlow's Saver); on TF 2.15 a Vertex AI
# tuning trial's (TF_CONFIG, CLUSTER_SPEC and the AIP_* directories under gs://bkt/<job>/<trial>
# as Vertex AI sets them, no output flag: the chief saves through the state fence, its checkpoints
# named by its run). Both roads ran on both runtimes when written.
_WHERE = 'local' if tf.__version__.startswith('1.') else 'vertex_ai'


def _vertex_ai_trial(cluster, base, trial):
  """env_of for helpers.run_cluster: each task's variables in trial `trial` of a tuning job whose
  worker pools 0, 1 and 2 are `cluster`'s chief, worker and ps."""
  pool_of = {t: 'workerpool%d' % i for i, t in enumerate(('chief', 'worker', 'ps'))}
  pools = {pool_of[t]: cluster[t] for t in pool_of}

  def env_of(task_type):
    task = {'index': 0, 'trial': trial}
    return dict(os.environ, **vertex_ai_env(
        base, trial, {'cluster': cluster, 'environment': 'cloud',
                      'task': dict(task, type=task_type)},
        {'cluster': pools, 'environment': 'cloud', 'task': dict(task, type=pool_of[task_type])}))
  return env_of


@pytest.mark.parametrize('where', [
    pytest.param(_WHERE, marks=needs_gcs if _WHERE == 'vertex_ai' else ())])
def test_chief_worker_and_ps_train_one_model_together(where, small_dir, tmp_path):
  chief, worker, ps = ('127.0.0.1:%d' % p for p in free_ports(3))
  cluster = {'chief': [chief], 'worker': [worker], 'ps': [ps]}
  args = ['--train_steps=120', '--data_dir=' + small_dir, '--skip_host_call'] + TINY
  if where == 'vertex_ai':
    base, trial = 'gs://bkt/vertex-%s' % uuid.uuid4().hex[:8], '7'
    model_dir, env_of = '%s/%s/checkpoints' % (base, trial), _vertex_ai_trial(cluster, base, trial)
  else:
    model_dir, env_of = str(tmp_path / 'model'), _tf_config(cluster)
    args += ['--model_dir=' + model_dir, '--export_dir=' + str(tmp_path / 'export')]
  # Here the worker joined 17 s after the chief's first step, and 120 steps took 84 s (a
  # ResNet-18's variables travel to and from the parameter server every step); it trained 53.
  run_cluster(args, env_of, tmp_path, timeout=480)
  results = results_of(model_dir)
  tasks = {t: results_of(model_dir + '/tasks', t + '-0.json') for t in ('chief', 'worker')}
  assert results['global_step'] >= 120 and results['cluster'] == {'chief': 1, 'worker': 1, 'ps': 1}
  # Both workers advanced the one shared global_step.
  print('local steps:', {t: v['local_steps'] for t, v in tasks.items()})
  assert tasks['chief']['local_steps'] > 0 and tasks['worker']['local_steps'] > 0, (
      tasks, 'a worker without steps joined after the chief had finished: raise --train_steps')
  assert tasks['chief']['local_steps'] + tasks['worker']['local_steps'] >= 120
  # The chief alone recorded the network (trainer.run.network_record).
  assert network_record.read(model_dir)[0].model == 'resnet'
  recorded = 'Recorded the network in ' + network_record.path(model_dir)
  assert recorded in (tmp_path / 'chief.log').read_text()
  for task_type in ('worker', 'ps'):
    assert recorded not in (tmp_path / (task_type + '.log')).read_text(), task_type
  newest = tf.train.latest_checkpoint(model_dir)
  assert re.search(r'/model\.ckpt-%s\d+$' % ('[0-9a-f]{8}-' if where == 'vertex_ai' else ''),
                   newest), newest
  assert tf.io.gfile.exists(os.path.join(results['export_path'], 'saved_model.pb'))
  if where == 'vertex_ai':
    _check_where_vertex_ai_says(base, trial, results, (tmp_path / 'chief.log').read_text())
  # The checkpoint is an ordinary one: a single process without TF_CONFIG evaluates it.
  evaluated = run_main('--mode=eval', '--data_dir=' + small_dir, '--model_dir=' + model_dir, *TINY)
  assert evaluated.returncode == 0, evaluated.stderr[-3000:]
  again = json.loads(evaluated.stdout)
  assert again['global_step'] == results['global_step']
  assert again['top_1_accuracy'] == pytest.approx(results['top_1_accuracy'], abs=1e-6)


def _check_where_vertex_ai_says(base, trial, results, chief_log):
  """Checkpoints, the export and the events of the trial in the AIP_* directories, nothing
  outside <base>/<trial>."""
  root = '%s/%s' % (base, trial)
  assert 'from $AIP_CHECKPOINT_DIR' in chief_log and 'from $AIP_MODEL_DIR' in chief_log
  assert tf.train.latest_checkpoint(root + '/checkpoints').startswith(
      root + '/checkpoints/model.ckpt-')
  assert results['export_path'].startswith(root + '/model/')
  assert tf.io.gfile.glob(root + '/logs/events.out.tfevents.*')
  assert tf.io.gfile.glob(root + '/logs/eval/events.out.tfevents.*')
  assert [p.rstrip('/') for p in tf.io.gfile.listdir(base)] == [trial]


def test_a_tf_config_task_outside_its_cluster_is_refused(small_dir, tmp_path):
  tf_config = {'cluster': {'chief': ['127.0.0.1:1'], 'worker': ['127.0.0.1:2']},
               'task': {'type': 'worker', 'index': 3}}
  proc = run_main('--train_steps=1', '--data_dir=' + small_dir, '--model_dir=' + str(tmp_path),
                  *TINY, env={'TF_CONFIG': json.dumps(tf_config)})
  assert proc.returncode == 2 and 'outside "cluster"."worker"' in proc.stderr, proc.stderr[-3000:]


def test_use_tpu_with_a_cpu_cluster_is_refused(tmp_path):
  tf_config = {'cluster': {'chief': ['127.0.0.1:1'], 'ps': ['127.0.0.1:2']},
               'task': {'type': 'chief', 'index': 0}}
  proc = run_main('--use_tpu', '--tpu=grpc://127.0.0.1:1', '--train_steps=1', '--fake_data',
                  '--num_classes=10', '--image_size=16', '--train_batch_size=64',
                  '--eval_batch_size=64', '--model_dir=gs://bkt/m',
                  env={'TF_CONFIG': json.dumps(tf_config)})
  assert proc.returncode == 2 and 'but --use_tpu is set' in proc.stderr, proc.stderr[-3000:]
