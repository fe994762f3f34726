"""Multi-worker CPU training on TensorFlow's own distributed runtime: a chief, a worker and a
parameter server as separate processes on 127.0.0.1, configured through TF_CONFIG as AI Platform's
CUSTOM tier does it."""

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


def _tf_config(cluster):
  """env_of for helpers.run_cluster: each task's TF_CONFIG in `cluster`."""
  return lambda task_type: dict(os.environ, TF_CONFIG=json.dumps(
      {'cluster': cluster, 'task': {'type': task_type, 'index': 0}}))


# One cluster per runtime (each takes about 35 s): model_dir on local disk (TensorFlow's Saver) on
# TF 1.15, in a bucket as a Vertex AI cluster's is (the chief saves through the state fence,
# its checkpoints named by its run) on TF 2.15; both roads ran on both runtimes when written.
_WHERE = 'local' if tf.__version__.startswith('1.') else 'gs'


@pytest.mark.parametrize('where', [pytest.param(_WHERE, marks=needs_gcs if _WHERE == 'gs' else ())])
def test_chief_worker_and_ps_train_one_model_together(where, small_dir, tmp_path):
  chief, worker, ps = ('127.0.0.1:%d' % p for p in free_ports(3))
  cluster = {'chief': [chief], 'worker': [worker], 'ps': [ps]}
  model_dir = ('gs://bkt/cluster-%s' % uuid.uuid4().hex[:12] if where == 'gs' else
               str(tmp_path / 'model'))
  args = ['--train_steps=120', '--data_dir=' + small_dir, '--model_dir=' + model_dir,
          '--export_dir=' + str(tmp_path / 'export'), '--skip_host_call'] + TINY
  # Here the worker joined 17 s after the chief's first step, and 120 steps took 84 s (a
  # ResNet-18's variables travel to and from the parameter server every step); it trained 53.
  run_cluster(args, _tf_config(cluster), tmp_path, timeout=480)
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
  assert re.search(r'/model\.ckpt-%s\d+$' % ('[0-9a-f]{8}-' if where == 'gs' else ''), newest), \
      newest
  # The checkpoint is an ordinary one: a single process without TF_CONFIG evaluates it.
  evaluated = run_main('--mode=eval', '--data_dir=' + small_dir, '--model_dir=' + model_dir, *TINY)
  assert evaluated.returncode == 0, evaluated.stderr[-3000:]
  again = json.loads(evaluated.stdout)
  assert again['global_step'] == results['global_step']
  assert again['top_1_accuracy'] == pytest.approx(results['top_1_accuracy'], abs=1e-6)
  assert os.path.exists(os.path.join(results['export_path'], 'saved_model.pb'))


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
