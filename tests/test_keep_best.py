"""Keep the best, stop when done (--keep_best, --early_stopping_evals) on real Fashion-MNIST."""

import json
import os

import pytest

from helpers import config_from_args, ok, results_of, run_main
from trainer.errors import PipelineError

_CNN = ['--model=cnn', '--image_size=28', '--train_batch_size=32', '--eval_batch_size=64',
        '--skip_host_call', '--keep_checkpoint_max=1', '--seed=3']


def _best_state(model_dir):
  with open(os.path.join(model_dir, 'best', 'best.json')) as f:
    return json.load(f)


def test_the_best_checkpoint_is_kept_out_of_keep_checkpoint_max_and_exported(small_dir, tmp_path):
  model_dir, export_dir = str(tmp_path / 'model'), str(tmp_path / 'export')
  ok(run_main('--train_steps=40', '--steps_per_eval=10', '--data_dir=' + small_dir,
               '--model_dir=' + model_dir, '--export_dir=' + export_dir, *_CNN))
  results, state = results_of(model_dir), _best_state(model_dir)
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
  # The kept copy is a whole checkpoint: evaluating model_dir/best gives the recorded accuracy.
  ok(run_main('--mode=eval', '--data_dir=' + small_dir,
               '--model_dir=' + os.path.join(model_dir, 'best'), *_CNN))
  again = results_of(os.path.join(model_dir, 'best'))
  assert again['global_step'] == step
  assert again['top_1_accuracy'] == pytest.approx(best['top_1_accuracy'], abs=1e-6)


def test_early_stopping_stops_after_n_evaluations_without_improvement_and_stays_stopped(
    small_dir, tmp_path):
  """--early_stopping_evals=2 stops two evaluations after the best one (a learning rate of 0:
  only the batch-norm statistics move, so the best comes early); a re-run trains nothing more."""
  model_dir = str(tmp_path / 'model')
  args = ['--train_steps=100', '--steps_per_eval=10', '--base_learning_rate=0',
          '--early_stopping_evals=2', '--data_dir=' + small_dir, '--model_dir=' + model_dir] + _CNN
  proc = ok(run_main(*args))
  assert 'Stopping early: no better top_1_accuracy in the last 2 evaluations' in proc.stderr
  results = results_of(model_dir)
  step = results['global_step']
  assert results['stopped_early'] and step == results['best']['global_step'] + 20 < 100
  proc = ok(run_main(*args))
  assert 'Stopping early' in proc.stderr and results_of(model_dir)['global_step'] == step
  assert len(_best_state(model_dir)['evaluations']) == step // 10


@pytest.mark.parametrize('args, message', [
    (['--early_stopping_evals=2', '--mode=train'], 'does not evaluate while training'),
    (['--early_stopping_evals=-1'], 'must be >= 0'),
])
def test_early_stopping_flags_are_checked(small_dir, tmp_path, args, message):
  with pytest.raises(PipelineError, match=message):
    config_from_args('--data_dir=' + small_dir, '--model_dir=' + str(tmp_path), '--model=cnn',
                     '--train_steps=10', *args)
