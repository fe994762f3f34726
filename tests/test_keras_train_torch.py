"""`trainer.train_torch` (Keras runtime, torch 2.13 on the CPU): the CNN's run, trained by TF 2.15
and exported to PyTorch, fine-tunes on real Fashion-MNIST arrays with the run's recipe (the loss
goes down); a SIGTERM saves the step in flight and exits 75, and the same command resumes there
and ends with the uninterrupted run's weights. PyTorch/XLA (--device=xla) is tested where its
virtualenv is (`make .venv-torch-xla/.installed`: not part of make test, BUILD.md)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip('torch', reason="pip install '.[keras-torch]'")
keras = pytest.importorskip('keras', minversion='3', reason='the Keras 3 runtime (.venv-keras)')

# pylint: disable=g-import-not-at-top,wrong-import-position
import tensorflow as tf

from trainer import export_keras as export_keras_lib
from trainer.data import arrays
from trainer.data import dataset_json
from trainer.storage import lease as lease_lib
from trainer.torch_models import classifier
from trainer.torch_run import recipe

from helpers import REPO
from keras_runs import export_flags

STEPS = 24
TORCH_XLA_PYTHON = os.path.join(REPO, '.venv-torch-xla', 'bin', 'python')


@pytest.fixture(scope='module')
def cnn_model_pt(pipeline_runs, tmp_path_factory):
  """The CNN's pipeline run (28 px) exported to model.pt."""
  run = pipeline_runs('cnn')
  output = str(tmp_path_factory.mktemp('cnn_pt') / 'model.pt')
  keras.backend.clear_session()
  export_keras_lib.convert(export_flags(model_dir=run['model_dir'], data_dir=run['data_dir'],
                                        output=output))
  return output


def _command(python, model_pt, data_dir, model_dir, *extra):
  if python == TORCH_XLA_PYTHON:
    extra += ('--device=xla',)
  return [python, '-m', 'trainer.train_torch', '--init_model=' + model_pt,
          '--data_dir=' + data_dir, '--model_dir=' + model_dir, '--train_steps=%d' % STEPS,
          '--train_batch_size=16', '--log_every_steps=4', '--save_checkpoints_steps=8',
          '--seed=3'] + list(extra)


def _run(python, model_pt, data_dir, model_dir, *extra, env=None):
  proc = subprocess.run(_command(python, model_pt, data_dir, model_dir, *extra), cwd=REPO, env=env,
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                        timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return proc


def _train_loss(model_pt, data_dir):
  """The cross-entropy of model_pt's logits on data_dir's training arrays (eval mode)."""
  inputs, labels = arrays.load(data_dir, dataset_json.read(data_dir), True)
  model = classifier.load(model_pt)
  with torch.no_grad():
    logits = model(torch.from_numpy(np.ascontiguousarray(inputs.transpose(0, 3, 1, 2))).float())
  return float(torch.nn.functional.cross_entropy(logits, torch.from_numpy(labels).long()))


def _weights(model_dir):
  return torch.load(os.path.join(model_dir, 'model.pt'), weights_only=True)['state_dict']


def _stop_and_resume(python, model_pt, data_dir, model_dir, env=None):
  """SIGTERM after the step-4 line (20 steps before the end): the step in flight's checkpoint and
  status 75; then the same command resumes there and finishes."""
  proc = subprocess.Popen(_command(python, model_pt, data_dir, model_dir), cwd=REPO, env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          universal_newlines=True)
  log = []
  for line in proc.stderr:  # blocking, line by line: the SIGTERM follows the step-4 line
    log.append(line)
    if 'step 4/%d' % STEPS in line:
      proc.terminate()
  proc.wait(timeout=300)
  assert proc.returncode == 75, ''.join(log)[-3000:]
  saved = [int(n[len('checkpoint-'):-len('.pt')]) for n in os.listdir(model_dir)
           if n.startswith('checkpoint-')]
  assert 4 <= max(saved) < STEPS, saved
  assert not os.path.exists(os.path.join(model_dir, 'model.pt'))
  resumed = _run(python, model_pt, data_dir, model_dir, env=env)
  assert 'Resuming from' in resumed.stderr
  with open(os.path.join(model_dir, 'results.json')) as f:
    return json.load(f)


@pytest.mark.xdist_group('cnn')
def test_a_fine_tune_lowers_the_loss_and_resumes_after_sigterm(cnn_model_pt, tiny_arrays_dir,
                                                               tmp_path):
  whole = str(tmp_path / 'whole')
  _run(sys.executable, cnn_model_pt, tiny_arrays_dir, whole)
  with open(os.path.join(whole, 'results.json')) as f:
    results = json.load(f)
  assert results['global_step'] == STEPS and len(results['logged_losses']) == STEPS // 4
  before = _train_loss(cnn_model_pt, tiny_arrays_dir)
  after = _train_loss(os.path.join(whole, 'model.pt'), tiny_arrays_dir)
  assert after < 0.7 * before, (before, after)
  # One writer per model_dir (trainer.storage.lease): another run holding it refuses this one,
  # before it writes anything.
  files = sorted(os.listdir(whole))
  with lease_lib.held(whole, '--model_dir', command='another fine-tune'):
    refused = subprocess.run(_command(sys.executable, cnn_model_pt, tiny_arrays_dir, whole,
                                      '--train_steps=%d' % (2 * STEPS)), cwd=REPO,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             universal_newlines=True, timeout=600)
  assert refused.returncode == 2, refused.stderr[-3000:]
  assert '--model_dir=%s is being written by another run' % whole in refused.stderr
  assert sorted(os.listdir(whole)) == files
  stopped = str(tmp_path / 'stopped')
  _stop_and_resume(sys.executable, cnn_model_pt, tiny_arrays_dir, stopped)
  ours, theirs = _weights(stopped), _weights(whole)
  assert set(ours) == set(theirs)
  assert all(torch.equal(ours[k], theirs[k]) for k in ours)  # bit-exact on the CPU


@pytest.mark.skipif(not os.path.exists(TORCH_XLA_PYTHON),
                    reason='no .venv-torch-xla (make .venv-torch-xla/.installed; about 7 GB)')
@pytest.mark.xdist_group('cnn')
def test_a_fine_tune_on_pytorch_xla_lowers_the_loss_and_resumes_after_sigterm(
    cnn_model_pt, tiny_arrays_dir, tmp_path):
  """The same on PJRT's CPU device (not bit-exact after the resume: XLA draws dropout's masks
  from its own generator)."""
  model_dir = str(tmp_path / 'xla')
  results = _stop_and_resume(TORCH_XLA_PYTHON, cnn_model_pt, tiny_arrays_dir, model_dir,
                             env=dict(os.environ, PJRT_DEVICE='CPU'))
  assert results['device'].startswith('xla') and results['global_step'] == STEPS
  before = _train_loss(cnn_model_pt, tiny_arrays_dir)
  assert _train_loss(os.path.join(model_dir, 'model.pt'), tiny_arrays_dir) < 0.7 * before


def test_tf1s_rmsprop_is_tfrmsprop():
  """InceptionV3's optimizer: TFRMSProp against tf.compat.v1.train.RMSPropOptimizer (the
  Estimator's, models.optimization) on the same gradients, five steps at changing rates."""
  rng = np.random.default_rng(0)
  start = rng.normal(size=(3, 4)).astype(np.float32)
  grads = [rng.normal(size=(3, 4)).astype(np.float32) for _ in range(5)]
  rates = [0.1, 0.05, 0.2, 0.01, 0.1]
  with tf.Graph().as_default():
    var = tf.compat.v1.get_variable('w', initializer=start)
    grad, rate = tf.compat.v1.placeholder(tf.float32, (3, 4)), tf.compat.v1.placeholder(tf.float32)
    update = tf.compat.v1.train.RMSPropOptimizer(rate, decay=0.9, momentum=0.9, epsilon=1.0
                                                 ).apply_gradients([(grad, var)])
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      for g, r in zip(grads, rates):
        sess.run(update, {grad: g, rate: r})
      expected = sess.run(var)
  weight = torch.nn.Parameter(torch.from_numpy(start.copy()))
  opt = recipe.TFRMSProp([weight], 0.0, decay=0.9, momentum=0.9, epsilon=1.0)
  for g, r in zip(grads, rates):
    weight.grad = torch.from_numpy(g)
    opt.param_groups[0]['lr'] = r
    opt.step()
  np.testing.assert_allclose(weight.detach().numpy(), expected, rtol=1e-5, atol=1e-6)


def test_what_a_fine_tune_trains_and_decays():
  """Weight decay skips the batch norms (models.optimization.weight_decay_loss); InceptionV3's
  batch-norm gammas (TF has none) and the LSTM's second bias are not trained."""
  resnet = classifier.network({'model': 'resnet', 'resnet_depth': 18, 'num_classes': 10})
  decayed = {id(p) for p in recipe.decayed_weights(resnet)}
  named = dict(resnet.named_parameters())
  assert {n for n, p in named.items() if id(p) in decayed} == {
      n for n in named if '.bn' not in n and not n.startswith('bn') and 'downsample.1' not in n}
  inception = classifier.network({'model': 'inception_v3', 'image_size': 75,
                                      'num_classes': 10})
  frozen = {n for n, p in inception.named_parameters() if not p.requires_grad}
  assert frozen and all(n.endswith('.bn.weight') for n in frozen)
  bilstm = classifier.network({'model': 'bilstm', 'vocab_size': 50, 'num_classes': 2,
                                   'embedding_dim': 8, 'lstm_hidden_units': 4, 'lstm_layers': 2,
                                   'lstm_pooling': 'max', 'dropout_rate': 0.1})
  frozen = {n for n, p in bilstm.named_parameters() if not p.requires_grad}
  assert frozen == {'lstm.bias_hh_l0', 'lstm.bias_hh_l0_reverse', 'lstm.bias_hh_l1',
                    'lstm.bias_hh_l1_reverse'}
