"""Paths are data, never patterns: the bad-input matrix's rows for special characters in path
flags (tests/refusals.py runs them), and what must keep working with them.

Each directory name holds `[ ] * ? space é`; beside it lies a sibling that the name, read as a
pattern, would match ('a b[1]*?é' matches 'a b1xé'). TensorFlow's own checkpoint code globs
model_dir unescaped (trainer.storage.patterns.check_checkpoint_path), so checkpoint paths with
* ? [ are refused; data directories are escaped and work.
"""

import os
import shutil

import pytest
import tensorflow.compat.v1 as tf

from trainer.prepare import image_folder
from trainer.run import checkpoints
from trainer.storage import patterns

from helpers import ok
from helpers import results_of
from helpers import run_main
from refusals import Row
from refusals import run_rows

SPECIAL = 'a b[1]*?é'    # every character the matrix covers
SIBLING = 'a b1xé'       # what SPECIAL matches when read as a pattern
ALLOWED = 'm ]é'         # the special characters a checkpoint directory may hold
TRAIN = ['--model=cnn', '--train_steps=1', '--train_batch_size=8', '--eval_batch_size=10',
         '--steps_per_eval=1', '--nokeep_best']


def _copy_data(source):
  def setup(root):
    for name in (SIBLING, SPECIAL):
      shutil.copytree(source, os.path.join(root, name))
  return setup


def _checkpoint_sibling(root):
  """A sibling run whose checkpoint the special model_dir would match."""
  os.makedirs(os.path.join(root, SIBLING))
  for name in ('checkpoint', 'model.ckpt-1.index', 'model.ckpt-1.data-00000-of-00001'):
    with open(os.path.join(root, SIBLING, name), 'w') as f:
      f.write('model_checkpoint_path: "model.ckpt-1"\n' if name == 'checkpoint' else name)


def _main_rows(tiny_dir):
  def data_without_shards(root):
    _copy_data(tiny_dir)(root)
    for name in os.listdir(os.path.join(root, SPECIAL)):
      if name != 'dataset.json':
        os.remove(os.path.join(root, SPECIAL, name))

  data = '--data_dir={root}/' + SPECIAL
  return [
      Row('main: --model_dir with [ * ?', 'main',
          ['--data_dir=' + tiny_dir, '--model_dir={root}/' + SPECIAL] + TRAIN,
          ['--model_dir', 'wildcards'], _checkpoint_sibling),
      Row('main: --job_dir with [ * ?', 'main',
          ['--data_dir=' + tiny_dir, '--job_dir={root}/' + SPECIAL] + TRAIN,
          ['--job_dir', 'wildcards'], _checkpoint_sibling),
      Row('main: AIP_CHECKPOINT_DIR with [ * ?', 'main', ['--data_dir=' + tiny_dir] + TRAIN,
          ['AIP_CHECKPOINT_DIR', 'wildcards'], _checkpoint_sibling,
          {'AIP_CHECKPOINT_DIR': '{root}/' + SPECIAL}),
      Row('main: --init_checkpoint with [ * ?', 'main',
          ['--data_dir=' + tiny_dir, '--model_dir={root}/run',
           '--init_checkpoint={root}/' + SPECIAL + '/model.ckpt-1'] + TRAIN,
          ['--init_checkpoint', 'wildcards'], _checkpoint_sibling),
      Row('main: --data_dir with [ * ? space é, its shards missing, a matching sibling has '
          'them', 'main', [data, '--model_dir={root}/' + ALLOWED] + TRAIN,
          ['no TFRecord files match', SPECIAL], data_without_shards),
      Row('main: --predict_output with [ * ? space é under a file', 'main',
          [data, '--model_dir={root}/' + ALLOWED, '--mode=predict',
           '--predict_input={root}/' + SPECIAL + '/validation-*',
           '--predict_output={root}/' + SPECIAL + '/dataset.json/p.jsonl'],
          ['--predict_output'], _copy_data(tiny_dir)),
      Row('main: --export_dir with [ * ? space é holding an export, a matching sibling too',
          'main', ['--data_dir=' + tiny_dir, '--model_dir={root}/' + ALLOWED,
                   '--export_dir={root}/' + SPECIAL] + TRAIN,
          ['--export_dir', SPECIAL, 'already holds', '--overwrite'],
          lambda root: [_write(root, name, '1699999999/saved_model.pb')
                        for name in (SPECIAL, SIBLING)]),
  ]


def _write(root, directory, relative, text='x'):
  path = os.path.join(root, directory, relative)
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, 'w') as f:
    f.write(text)


def test_special_characters_in_trainer_main_path_flags_are_refused_or_read_literally(
    tiny_dir, tmp_path):
  failures = run_rows(_main_rows(tiny_dir), str(tmp_path))
  assert not failures, '\n'.join(failures)


def _prepare_rows(tiny_dir):
  def tree(root):
    for name in (SIBLING, 'src'):
      for label in ('c0', 'c1'):
        os.makedirs(os.path.join(root, name, label))
        shutil.copy(os.path.join(os.path.dirname(image_folder.__file__), '__init__.py'),
                    os.path.join(root, name, label, 'x.txt'))

  def earlier_conversion(root):
    _copy_data(tiny_dir)(root)

  return [
      Row('prepare: --output_dir with [ * ? space é holding a conversion', 'prepare',
          ['fashion_mnist', '--output_dir={root}/' + SPECIAL],
          ['--output_dir', '--overwrite'], earlier_conversion),
      Row('prepare: --source_dir with [ * ? space é that does not exist, a matching sibling '
          'does', 'prepare',
          ['image_folder', '--source_dir={root}/' + SPECIAL, '--output_dir={root}/out'],
          ['--source_dir'], tree),
      Row('prepare: --validation_input with [ * ? space é that does not exist, a matching '
          'sibling does', 'prepare',
          ['text', '--input={root}/in.csv', '--validation_input={root}/' + SPECIAL + '.csv',
           '--output_dir={root}/out'], [SPECIAL],
          lambda root: [_write(root, '.', name, 'text,label\na,0\nb,1\n')
                        for name in ('in.csv', SIBLING + '.csv')]),
      Row('prepare: --input with [ * ? space é that does not exist, a matching sibling does',
          'prepare', ['text', '--input={root}/' + SPECIAL + '.csv', '--output_dir={root}/out'],
          [SPECIAL], lambda root: open(os.path.join(root, SIBLING + '.csv'), 'w').write(
              'text,label\na,0\nb,1\n')),
  ]


def test_special_characters_in_prepare_path_flags_are_refused_or_read_literally(
    tiny_dir, tmp_path):
  failures = run_rows(_prepare_rows(tiny_dir), str(tmp_path))
  assert not failures, '\n'.join(failures)


def test_glob_escape_matches_only_the_path_itself(tmp_path):
  for name in (SPECIAL, SIBLING):
    os.makedirs(str(tmp_path / name))
    open(str(tmp_path / name / 'train-00000-of-00001'), 'w').close()
  escaped = patterns.glob_escape(str(tmp_path / SPECIAL)) + '/train-*'
  assert tf.io.gfile.glob(escaped) == [str(tmp_path / SPECIAL / 'train-00000-of-00001')]
  assert patterns.files_matching(str(tmp_path / SPECIAL), 'train-*') == [
      str(tmp_path / SPECIAL / 'train-00000-of-00001')]


def test_a_damaged_checkpoint_check_never_touches_a_matching_sibling(tmp_path):
  """The integrity check's listing of `exp[12]/model.ckpt-1.*` must not see `exp1`'s files:
  exp[12]'s intact checkpoint stays, exp1 is untouched (before the fix: exp[12]'s checkpoint
  was called damaged and exp1's files were moved into exp[12]/damaged/)."""
  sibling, special = tmp_path / 'exp1', tmp_path / 'exp[12]'
  for directory in (sibling, special):
    directory.mkdir()
    with tf.Graph().as_default():
      tf.get_variable('w', [4])
      step = tf.train.get_or_create_global_step()
      with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(step.assign(1))
        # Saved under a plain name and moved: TF's Saver itself globs the prefix it writes.
        tf.train.Saver().save(sess, str(tmp_path / 'plain' / 'model.ckpt'), global_step=1)
    for name in os.listdir(str(tmp_path / 'plain')):
      shutil.move(str(tmp_path / 'plain' / name), str(directory / name))
  before = sorted(os.listdir(str(sibling)))
  prefix = str(special / 'model.ckpt-1')
  assert checkpoints.checkpoint_damage(prefix) is None
  assert [os.path.basename(p) for p in checkpoints.checkpoint_files(prefix)] == [
      'model.ckpt-1.data-00000-of-00001', 'model.ckpt-1.index', 'model.ckpt-1.meta']
  assert sorted(os.listdir(str(sibling))) == before


@pytest.mark.one_runtime('the same code path on both runtimes')
def test_a_run_trains_from_a_data_dir_with_special_characters(tiny_dir, tmp_path):
  shutil.copytree(tiny_dir, str(tmp_path / SPECIAL))
  model_dir = str(tmp_path / ALLOWED)
  ok(run_main('--data_dir=' + str(tmp_path / SPECIAL), '--model_dir=' + model_dir, *TRAIN))
  results = results_of(model_dir)
  assert results['num_eval_examples'] == 50
  assert results['global_step'] == 1
