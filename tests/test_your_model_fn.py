"""A legacy job as it is: its own TPUEstimator model_fn and input_fn (`--model_fn=`, `--input_fn=`,
examples/iris.py, the iris question's 4-32-3 network on the iris data scikit-learn ships) run by
trainer.main: trained, killed with kill -9 and resumed, dry-run on a v3-32, advised; and each way
such a job can break TPUEstimator's contract refused at start in one line."""

import json
import os
import re
import subprocess
import sys
import uuid

import pytest
import tensorflow.compat.v1 as tf

from trainer.errors import PipelineError
from trainer.run import dry_run as dry_run_lib
from trainer.run import input_checks

from helpers import config_from_args
from helpers import main_args
from helpers import needs_gcs
from helpers import ok
from helpers import REPO
from helpers import results_of
from helpers import run_main

IRIS = ['--model_fn=examples.iris:model_fn', '--input_fn=examples.iris:input_fn']
# 120 training flowers: 300 steps of 16 are 40 epochs; the 30 held out in 3 batches of 10.
RUN = IRIS + ['--train_steps=300', '--train_batch_size=16', '--eval_batch_size=10',
              '--num_eval_examples=30', '--steps_per_eval=300', '--save_checkpoints_steps=100',
              '--seed=1', '--log_every_n_secs=0.01']


def test_the_iris_job_trains_is_killed_with_kill_9_and_resumes(tmp_path):
  model_dir = str(tmp_path / 'iris')
  args = main_args(RUN + ['--model_dir=' + model_dir])
  killed = subprocess.run([sys.executable, os.path.join(REPO, 'tests', 'kill_at.py'),
                           'step:150:KILL', 'trainer.main'] + args, cwd=REPO,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=300)
  assert killed.returncode == -9, killed.stderr[-2000:]
  assert tf.train.latest_checkpoint(model_dir).endswith('model.ckpt-100')
  resumed = ok(run_main(*(RUN + ['--model_dir=' + model_dir])))
  assert 'Resuming from the checkpoint at step 100 of 300' in resumed.stderr
  assert 'examples/sec' in resumed.stderr and 'ETA' in resumed.stderr
  results = results_of(model_dir)
  # The model_fn's own metrics, as its eval_metrics name them.
  assert (results['model'], results['input_fn']) == ('examples.iris:model_fn',
                                                     'examples.iris:input_fn')
  assert results['global_step'] == 300 and results['accuracy'] >= 0.9, results
  assert 'top_1_accuracy' not in results
  # A later run into it must name the job again.
  with pytest.raises(PipelineError, match='records a legacy job .--model_fn=examples.iris:'
                     'model_fn --input_fn=examples.iris:input_fn.: pass both again'):
    config_from_args('--model_dir=' + model_dir, '--mode=eval', '--fake_data',
                     '--image_size=8', '--num_classes=3')


@needs_gcs
def test_on_gcs_a_legacy_job_that_brings_its_own_saver_saves_through_the_fence():
  """A legacy model_fn whose scaffold_fn gives its own Saver (keeping 2 checkpoints), model_dir
  in a bucket: the Saver keeps its settings and saves as the pipeline's fenced one does, its
  checkpoints named by the run (`model.ckpt-RUN-STEP`) and the state file written through the
  fence (trainer/run/fenced_saver.py); before, it saved unfenced, with a warning."""
  model_dir = 'gs://bkt/own-saver-%s' % uuid.uuid4().hex[:12]
  run = ok(run_main('--model_fn=user_model_fns:own_saver', '--input_fn=examples.iris:input_fn',
                    '--model_dir=' + model_dir, '--train_steps=30', '--train_batch_size=16',
                    '--eval_batch_size=10', '--num_eval_examples=30', '--steps_per_eval=30',
                    '--save_checkpoints_steps=10', '--seed=1',
                    env={'PYTHONPATH': os.path.join(REPO, 'tests')}))
  assert 'brings its own Saver' not in run.stderr
  assert results_of(model_dir)['global_step'] == 30
  steps = sorted(int(m.group(1)) for m in (
      re.match(r'model\.ckpt-[0-9a-f]{8}-(\d+)\.index$', n)
      for n in tf.io.gfile.listdir(model_dir)) if m)
  assert steps == [20, 30], tf.io.gfile.listdir(model_dir)  # its max_to_keep=2
  assert re.search(r'/model\.ckpt-[0-9a-f]{8}-30$', tf.train.latest_checkpoint(model_dir))


def test_a_legacy_saver_that_keeps_checkpoints_the_state_file_does_not_list_stays_unfenced():
  """The fence's state file lists a Saver's kept checkpoints, and a restart deletes run-named
  checkpoints it does not list: a Saver that keeps every checkpoint or one every N hours is
  left unfenced (trainer.run.fenced_saver.why_not_fenced says why), one that keeps its newest
  N is fenced."""
  from trainer.run import fenced_saver  # pylint: disable=g-import-not-at-top
  with tf.Graph().as_default():
    tf.get_variable('v', initializer=0.0)
    assert fenced_saver.why_not_fenced(tf.train.Saver(max_to_keep=3)) is None
    assert 'max_to_keep=0' in fenced_saver.why_not_fenced(tf.train.Saver(max_to_keep=0))
    assert 'every 2 hours' in fenced_saver.why_not_fenced(
        tf.train.Saver(max_to_keep=3, keep_checkpoint_every_n_hours=2))
    assert 'not a tf.train.Saver' in fenced_saver.why_not_fenced(object())


def test_the_iris_job_dry_runs_on_a_v3_32_and_is_advised_to_stay_on_the_cpu(tmp_path):
  config = config_from_args('--mode=dry_run', '--tpu_topology=v3-32', '--model_dir=' +
                            str(tmp_path), '--train_batch_size=64', '--eval_batch_size=32',
                            '--num_eval_examples=30', '--train_steps=10', *IRIS)
  report = dry_run_lib.dry_run(config, 'v3-32')
  # TPUEstimator called the job's input_fn once per host with 2 examples per core.
  assert [(h['host_id'], h['num_hosts'], h['per_core_batch_size'])
          for h in report['per_host']] == [(i, 4, 2) for i in range(4)]
  assert report['infeed']['enqueue_ops'] == 32 and report['cross_replica_sums'] > 0
  assert report['unsupported_ops'] == []
  assert 'not run for a --model_fn job' in report['prediction']['refused']

  output = tmp_path / 'advice.json'
  ok(subprocess.run([sys.executable, '-m', 'trainer.advise', '--train_batch_size=16',
                     '--train_steps=300', '--output=%s' % output] + IRIS, cwd=REPO,
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                    timeout=300))
  advice = json.loads(output.read_text())['advice']
  assert advice['verdict'].startswith('stay on the CPU'), advice['verdict']


@pytest.mark.parametrize('args, says', [
    (['--model_fn=examples.iris:model_fn'], '--model_fn and --input_fn come together'),
    (IRIS + ['--model=cnn'], '--model: read by the pipeline\'s own networks'),
    (IRIS + ['--export_dir=/tmp/x'], '--export_dir: read by the pipeline\'s own networks'),
    (IRIS + ['--mode=predict', '--predict_input=x', '--predict_output=y'],
     '--mode=predict reads the pipeline\'s own input formats'),
    (IRIS + ['--mode=train_and_eval'], 'needs --num_eval_examples'),
    (['--model_fn=examples.iris:input_fn', '--input_fn=examples.iris:input_fn'],
     'takes input_fn(params, mode), which cannot be called as model_fn(features, labels, mode, '
     'params)'),
    (['--model_fn=examples.iris:model_fn', '--input_fn=user_model_fns:a_list'],
     'returned list; the contract is input_fn(params)'),
    (['--model_fn=examples.iris:model_fn', '--input_fn=user_model_fns:features_only'],
     'features_only yields '),
    (['--model_fn=user_model_fns:no_train_op', '--input_fn=examples.iris:input_fn'],
     'no_train_op raised ValueError when built for training with params'),
    (['--model_fn=user_model_fns:estimator_spec', '--input_fn=examples.iris:input_fn',
      '--mode=dry_run', '--tpu_topology=v3-8', '--num_eval_examples=30'],
     'returned a tf.estimator.EstimatorSpec, which TPUEstimator cannot run on a TPU'),
    (['--model_fn=examples.iris:model_fn', '--input_fn=user_model_fns:reads_context'],
     "reads params['context'], which TPUEstimator gives on a TPU only"),
    (['--model_fn=examples.iris:model_fn', '--input_fn=user_model_fns:fixed_batch',
      '--mode=dry_run', '--tpu_topology=v3-32', '--num_eval_examples=30'],
     "yields batches of 16, but params['batch_size'] is 2"),
])
def test_a_legacy_job_that_breaks_the_contract_is_refused_in_one_line(args, says, tmp_path):
  with pytest.raises(PipelineError) as refusal:
    config = config_from_args('--model_dir=' + str(tmp_path / 'run'), '--train_steps=10',
                              '--train_batch_size=64', '--mode=train', *args)
    input_checks.check(config)
  assert says in str(refusal.value)
  assert '\n' not in str(refusal.value)


def test_a_legacy_job_in_a_vertex_job_exports_nothing(monkeypatch, tmp_path):
  """A Vertex AI job's AIP_MODEL_DIR is --export_dir's default, but a legacy job has no serving
  signature of the pipeline's: its config exports nothing, as when run anywhere else."""
  monkeypatch.setenv('AIP_MODEL_DIR', str(tmp_path / 'model') + '/')
  monkeypatch.setenv('AIP_CHECKPOINT_DIR', str(tmp_path / 'checkpoints') + '/')
  config = config_from_args(*IRIS, '--train_steps=3', '--num_eval_examples=30')
  assert config.model_dir == str(tmp_path / 'checkpoints') and config.export_dir is None
  assert config_from_args('--fake_data', '--model=cnn', '--num_classes=10', '--train_steps=3',
                          '--num_train_examples=16', '--num_eval_examples=8').export_dir == str(
                              tmp_path / 'model')
