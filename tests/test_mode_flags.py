"""A flag the chosen --mode does not read is refused or named in a warning (flags/mode_flags.py),
checked on the Config `trainer.main` would build, in process (--fake_data: no data read)."""

from absl import flags as absl_flags
import pytest

from trainer.errors import PipelineError
from trainer.flags import mode_flags
from trainer.flags import run_flags
from trainer.run.run_config import MODES

from helpers import config_from_args

pytestmark = pytest.mark.one_runtime('flag rules, the same Python code on both')


def _config(tmp_path, *args):
  return config_from_args('--fake_data', '--model=cnn', '--model_dir=' + str(tmp_path), *args)


@pytest.mark.parametrize('mode, verb', [('eval', 'evaluate'), ('predict', 'predict with')])
def test_init_checkpoint_is_refused_where_the_newest_checkpoint_of_model_dir_is_used(
    tmp_path, mode, verb):
  """Before: --mode=eval --init_checkpoint=X ignored X and failed with "no checkpoint in DIR"."""
  predict = (['--predict_input=/tmp/*.png', '--predict_output=/tmp/p.jsonl']
             if mode == 'predict' else [])
  with pytest.raises(PipelineError) as refusal:
    _config(tmp_path, '--mode=' + mode, '--init_checkpoint=/tmp/ref/model.ckpt-5', *predict)
  message = str(refusal.value)
  assert message.startswith('--mode=%s uses the newest checkpoint in --model_dir' % mode)
  assert ('To %s a checkpoint this pipeline wrote, '
          'pass its directory as --model_dir' % verb) in message
  with pytest.raises(PipelineError, match='--init_from_moving_average is read by --mode=train'):
    _config(tmp_path, '--mode=' + mode, '--init_from_moving_average', *predict)


@pytest.mark.parametrize('args, message', [
    (['--mode=train', '--train_steps=1', '--eval_timeout=60'],
     ('--eval_timeout is read by --mode=eval or dry_run only; '
      'add --mode=eval or drop --eval_timeout.')),
    (['--mode=train', '--train_steps=1', '--early_stopping_evals=2'],
     '--mode=train does not evaluate while training'),
])
def test_a_flag_that_would_change_the_result_elsewhere_is_refused(tmp_path, args, message):
  with pytest.raises(PipelineError) as refusal:
    _config(tmp_path, *args)
  assert message in str(refusal.value)


def test_the_training_command_reused_for_eval_runs_and_names_the_flags_it_ignores(tmp_path, caplog):
  """The same command with --mode=eval keeps working: training-only flags are logged as unused."""
  training = ['--train_steps=10', '--steps_per_eval=5', '--freeze_backbone', '--nokeep_best',
              '--export_dir=' + str(tmp_path / 'export'), '--profile_steps=2,4']
  assert _config(tmp_path, '--mode=train_and_eval', *training).mode == 'train_and_eval'
  caplog.set_level('WARNING')
  config = _config(tmp_path, '--mode=eval', *training)
  assert config.mode == 'eval' and config.export_dir == str(tmp_path / 'export')
  warned = ' '.join(r.getMessage() for r in caplog.records)
  for flag in ('--freeze_backbone', '--nokeep_best', '--profile_steps'):
    assert '%s is not read by --mode=eval' % flag in warned
  assert '--export_dir' not in warned  # eval exports the checkpoint it evaluated


def test_each_flag_of_the_table_is_unset_at_its_default():
  """READ_BY's "not given" value is the flag's default: else every run would warn or be refused."""
  if 'model' not in absl_flags.FLAGS:
    run_flags.define_run_flags()
  for name, (modes, unset, _) in mode_flags.READ_BY.items():
    assert absl_flags.FLAGS[name].default == unset, name
    assert set(modes) < set(MODES), name
