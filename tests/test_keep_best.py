"""Keep the best, stop when done (--keep_best, --early_stopping_evals) on real Fashion-MNIST."""

import json
import os

import pytest
import tensorflow.compat.v1 as tf

from trainer.errors import PipelineError
from trainer.run import best_checkpoint
from trainer.run import checkpoints

from helpers import config_from_args
from helpers import ok
from helpers import REPO
from helpers import results_of
from helpers import run_main

_CNN = ['--model=cnn', '--image_size=28', '--train_batch_size=32', '--eval_batch_size=64',
        '--skip_host_call', '--keep_checkpoint_max=1', '--seed=3']


def _best_state(model_dir):
  with open(os.path.join(model_dir, 'best', 'best.json')) as f:
    return json.load(f)


def test_the_best_checkpoint_is_kept_out_of_keep_checkpoint_max_and_exported(small_dir, tmp_path):
  """The run's --model_dir is relative (to the working directory, the repository): best/'s state
  file must still name the copy inside best/ (TensorFlow had rewritten the name to
  '../../model.ckpt-N', outside it)."""
  model_dir, export_dir = str(tmp_path / 'model'), str(tmp_path / 'export')
  ok(run_main('--train_steps=40', '--steps_per_eval=10', '--data_dir=' + small_dir,
               '--model_dir=' + os.path.relpath(model_dir, REPO), '--export_dir=' + export_dir,
               *_CNN))
  results, state = results_of(model_dir), _best_state(model_dir)
  for record in results, state:  # their paths are as given: relative to the repository
    record['best']['checkpoint'] = os.path.normpath(os.path.join(REPO,
                                                                 record['best']['checkpoint']))
  accuracies = [e['top_1_accuracy'] for e in state['evaluations']]
  assert [e['global_step'] for e in state['evaluations']] == [10, 20, 30, 40]
  best = state['best']
  # The first evaluation with the highest accuracy (a tie keeps the earlier checkpoint).
  assert best['global_step'] == state['evaluations'][accuracies.index(max(accuracies))][
      'global_step']
  assert results['best'] == best and not results['stopped_early']
  assert results['global_step'] == 40 and results['top_1_accuracy'] == accuracies[-1]
  step = best['global_step']
  assert sorted(os.listdir(os.path.join(model_dir, 'best'))) == [
      'best.json', 'checkpoint', 'model.ckpt-%d.data-00000-of-00001' % step,
      'model.ckpt-%d.index' % step, 'model.ckpt-%d.meta' % step]
  assert os.path.dirname(results['best_export_path']) == os.path.join(export_dir, 'best')
  # The kept copy is a whole checkpoint (every tensor reads back with its checksum) that
  # TensorFlow's own lookup finds, of the best step.
  best_dir = os.path.join(model_dir, 'best')
  assert tf.train.latest_checkpoint(best_dir) == best['checkpoint']
  assert checkpoints.checkpoint_damage(best['checkpoint']) is None
  assert tf.train.load_variable(best_dir, 'global_step') == step


def test_early_stopping_stops_after_n_evaluations_without_improvement_and_stays_stopped(
    text_small_dir, tmp_path):
  """The BiLSTM at a learning rate of 0 (no batch norm: its evaluations never change): the first
  evaluation stays the best (ties keep it), so --early_stopping_evals=2 stops after the third;
  a re-run trains nothing more."""
  model_dir = str(tmp_path / 'model')
  args = ['--train_steps=100', '--steps_per_eval=10', '--base_learning_rate=0',
          '--early_stopping_evals=2', '--data_dir=' + text_small_dir, '--model_dir=' + model_dir,
          '--model=bilstm', '--embedding_dim=16', '--lstm_hidden_units=16',
          '--train_batch_size=32', '--eval_batch_size=64', '--skip_host_call', '--seed=3']
  proc = ok(run_main(*args))
  assert ('Stopping early: no better top_1_accuracy in the last 2 evaluations (best %.4f at '
          'step 10)' % results_of(model_dir)['best']['top_1_accuracy']) in proc.stderr
  results = results_of(model_dir)
  assert results['stopped_early'] and results['global_step'] == 30
  proc = ok(run_main(*args))
  assert 'Stopping early' in proc.stderr and results_of(model_dir)['global_step'] == 30
  assert [e['global_step'] for e in _best_state(model_dir)['evaluations']] == [10, 20, 30]


def _checkpoint(model_dir, step):
  """A real checkpoint at `step` of one variable; returns its prefix."""
  with tf.Graph().as_default():
    tf.Variable([float(step)], name='w')
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      return tf.train.Saver().save(sess, os.path.join(model_dir, 'model.ckpt'), global_step=step)


@pytest.mark.parametrize('keep', [True, False])
def test_best_checkpoint_bookkeeping(keep, tmp_path):
  """Fed evaluations: the first maximum wins, only its copy stays in best/ (with keep), the
  count since the best survives a restart (also without keep), and a re-evaluation of a
  recorded step is not counted twice."""
  model_dir = str(tmp_path)
  best = best_checkpoint.BestCheckpoint(model_dir, keep=keep)
  for step, accuracy in ((10, 0.5), (20, 0.7), (30, 0.7), (40, 0.6)):
    improved = best.record({'global_step': step, 'top_1_accuracy': accuracy},
                           _checkpoint(model_dir, step))
    assert improved == (step in (10, 20))
  assert best.best['global_step'] == 20 and best.evaluations_since_best == 2
  restarted = best_checkpoint.BestCheckpoint(model_dir, keep=keep)
  assert restarted.evaluations_since_best == 2 and restarted.evaluated(40)
  assert not restarted.record({'global_step': 40, 'top_1_accuracy': 0.9},
                              os.path.join(model_dir, 'model.ckpt-40'))
  best_dir = os.path.join(model_dir, 'best')
  if keep:
    assert tf.train.latest_checkpoint(best_dir) == os.path.join(best_dir, 'model.ckpt-20')
    assert sorted(os.listdir(best_dir)) == ['best.json', 'checkpoint',
                                            'model.ckpt-20.data-00000-of-00001',
                                            'model.ckpt-20.index', 'model.ckpt-20.meta']
    assert tf.train.load_variable(best_dir, 'w')[0] == 20.0
  else:
    assert os.listdir(best_dir) == ['best.json']


@pytest.mark.parametrize('args, message', [
    (['--early_stopping_evals=2', '--mode=train'], 'does not evaluate while training'),
    (['--early_stopping_evals=-1'], 'must be >= 0'),
])
def test_early_stopping_flags_are_checked(small_dir, tmp_path, args, message):
  with pytest.raises(PipelineError, match=message):
    config_from_args('--data_dir=' + small_dir, '--model_dir=' + str(tmp_path), '--model=cnn',
                     '--train_steps=10', *args)


def _one_variable_checkpoint(prefix, value):
  """A one-variable checkpoint saved at `prefix` (its name holds the step)."""
  with tf.Graph().as_default():
    variable = tf.Variable(value, name='w')
    with tf.Session() as session:
      session.run(variable.initializer)
      tf.train.Saver([variable]).save(session, prefix, write_meta_graph=False)
  return prefix


def test_only_a_checkpoint_with_the_same_weights_counts_as_the_exported_one(tmp_path):
  """The best export is copied from the final one only when both checkpoints hold the same
  weights: the same step retrained (its first checkpoint moved aside) is exported anew."""
  first = _one_variable_checkpoint(str(tmp_path / 'best' / 'model.ckpt-20'), [1.0, 2.0])
  copied = str(tmp_path / 'copy' / 'model.ckpt-20')
  tf.io.gfile.makedirs(os.path.dirname(copied))
  for suffix in ('.index', '.data-00000-of-00001'):
    tf.io.gfile.copy(first + suffix, copied + suffix)
  retrained = _one_variable_checkpoint(str(tmp_path / 'model.ckpt-20'), [1.0, 3.0])
  later = _one_variable_checkpoint(str(tmp_path / 'later' / 'model.ckpt-30'), [1.0, 2.0])
  assert checkpoints.same_checkpoint(first, copied)
  assert not checkpoints.same_checkpoint(first, retrained)
  assert not checkpoints.same_checkpoint(first, later)
