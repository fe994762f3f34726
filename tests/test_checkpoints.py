"""A damaged newest checkpoint (truncated, missing or corrupt files, as a kill during a write to
object storage leaves it) is detected, moved aside and the run goes on from the newest intact
one; with none intact, a clear error."""

import os
import re
import tempfile
import uuid

import pytest
import tensorflow.compat.v1 as tf

from trainer.errors import PipelineError
from trainer.run import checkpoints

from helpers import needs_gcs
from helpers import ok
from helpers import refused
from helpers import results_of
from helpers import run_main


def _write_checkpoints(model_dir, steps=(100, 200, 300)):
  """Real checkpoints of a few variables (about 70 KB each) at `steps`."""
  with tf.Graph().as_default():
    tf.get_variable('dense/kernel', [128, 128])
    tf.get_variable('dense/bias', [128])
    step = tf.train.get_or_create_global_step()
    saver = tf.train.Saver(max_to_keep=10)
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      for value in steps:
        sess.run(step.assign(value))
        saver.save(sess, os.path.join(model_dir, 'model.ckpt'), global_step=value)
  return [os.path.join(model_dir, 'model.ckpt-%d' % s) for s in steps]


def _data_file(prefix):
  return prefix + '.data-00000-of-00001'


def _truncate(prefix):
  path = _data_file(prefix)
  with open(path, 'r+b') as f:
    f.truncate(os.path.getsize(path) // 2)


def _flip_a_byte(prefix):
  path = _data_file(prefix)
  with open(path, 'r+b') as f:
    f.seek(1000)
    byte = f.read(1)
    f.seek(1000)
    f.write(bytes([byte[0] ^ 0xFF]))


def _garble_index(prefix):
  with open(prefix + '.index', 'wb') as f:
    f.write(b'not a checkpoint index' * 10)


DAMAGE = {
    'truncated data': (_truncate, 'hold'),
    'missing data': (lambda p: os.remove(_data_file(p)), 'data files are missing'),
    'missing index': (lambda p: os.remove(p + '.index'), 'index file'),
    'garbled index': (_garble_index, 'index cannot be read'),
    'flipped byte': (_flip_a_byte, 'does not read back'),
}


@pytest.mark.parametrize('kind', sorted(DAMAGE))
def test_a_damaged_newest_checkpoint_is_moved_aside(tmp_path, kind):
  damage, reason = DAMAGE[kind]
  model_dir = str(tmp_path)
  prefixes = _write_checkpoints(model_dir)
  assert all(checkpoints.checkpoint_damage(p) is None for p in prefixes)
  damage(prefixes[-1])
  assert reason in checkpoints.checkpoint_damage(prefixes[-1])
  # An evaluation beside training only skips it: nothing moves.
  before = sorted(os.listdir(model_dir))
  assert checkpoints.newest_intact_checkpoint(model_dir, move_aside=False) == prefixes[1]
  assert sorted(os.listdir(model_dir)) == before
  # A training run moves its files aside and makes TensorFlow's own lookups agree.
  assert checkpoints.newest_intact_checkpoint(model_dir) == prefixes[1]
  damaged = os.listdir(os.path.join(model_dir, checkpoints.DAMAGED_DIR))
  assert damaged and all(name.startswith('model.ckpt-300') for name in damaged)
  assert not any(n.startswith('model.ckpt-300') for n in os.listdir(model_dir))
  assert tf.train.latest_checkpoint(model_dir) == prefixes[1]
  state = tf.train.get_checkpoint_state(model_dir)
  assert list(state.all_model_checkpoint_paths) == prefixes[:2]
  assert checkpoints.newest_intact_checkpoint(model_dir) == prefixes[1]  # now a no-op


@needs_gcs
def test_on_gcs_a_flipped_byte_is_found_in_the_local_copy_of_the_files(tmp_path, monkeypatch):
  """gs://: the files are read whole into a local copy (a request per tensor took 5-9 s for a
  small ResNet-18's checkpoint) and every tensor's checksum is checked there, not through the
  remote reads' fallback (which warns); the copy is removed and the message names no local
  path."""
  local_tmp = tmp_path / 'tmp'
  local_tmp.mkdir()
  monkeypatch.setattr(tempfile, 'tempdir', str(local_tmp))
  warnings = []
  monkeypatch.setattr(checkpoints.logging, 'warning', lambda *args: warnings.append(args))
  model_dir = 'gs://bkt/%s' % uuid.uuid4().hex[:12]
  prefixes = _write_checkpoints(model_dir, steps=(100, 200))
  assert all(checkpoints.checkpoint_damage(p) is None for p in prefixes)
  path = _data_file(prefixes[-1])
  with tf.io.gfile.GFile(path, 'rb') as f:
    data = bytearray(f.read())
  data[1000] ^= 0xFF
  with tf.io.gfile.GFile(path, 'wb') as f:
    f.write(bytes(data))
  problem = checkpoints.checkpoint_damage(prefixes[-1])
  assert 'does not read back' in problem and str(local_tmp) not in problem, problem
  assert not os.listdir(str(local_tmp)) and not warnings, warnings
  assert checkpoints.newest_intact_checkpoint(model_dir, move_aside=False) == prefixes[0]


def test_no_intact_checkpoint_is_a_clear_error_and_nothing_is_deleted(tmp_path):
  model_dir = str(tmp_path)
  prefixes = _write_checkpoints(model_dir, steps=(100, 200))
  for prefix in prefixes:
    _truncate(prefix)
  with pytest.raises(PipelineError, match='no intact checkpoint in .*model.ckpt-200: its data '
                     'files hold .*model.ckpt-100.*damaged'):
    checkpoints.newest_intact_checkpoint(model_dir)
  assert len(os.listdir(os.path.join(model_dir, checkpoints.DAMAGED_DIR))) == 6  # 2 x 3 files


def test_without_checkpoints_there_is_nothing_to_check(tmp_path):
  assert checkpoints.newest_intact_checkpoint(str(tmp_path)) is None
  prefixes = _write_checkpoints(str(tmp_path))
  assert checkpoints.newest_intact_checkpoint(str(tmp_path)) == prefixes[-1]
  assert not os.path.exists(os.path.join(str(tmp_path), checkpoints.DAMAGED_DIR))


def test_a_run_resumes_from_the_newest_intact_checkpoint(small_dir, tmp_path):
  """The CLI: a CNN trained to step 20 (checkpoints at 10 and 20), its newest checkpoint's data
  truncated. --mode=eval evaluates step 10 and moves nothing; training to step 30 warns, moves
  the damaged files aside, resumes from step 10 and finishes; a model_dir with no intact
  checkpoint is refused with the reason."""
  model_dir = str(tmp_path / 'model')
  args = ['--data_dir=' + small_dir, '--model_dir=' + model_dir, '--model=cnn',
          '--image_size=28', '--train_batch_size=32', '--eval_batch_size=100', '--seed=1',
          '--save_checkpoints_steps=10', '--mode=train']
  ok(run_main('--train_steps=20', *args))
  newest = os.path.join(model_dir, 'model.ckpt-20')
  _truncate(newest)
  evaluated = ok(run_main(*[a for a in args if a != '--mode=train'], '--mode=eval'))
  assert 'model.ckpt-20 is damaged' in evaluated.stderr
  assert results_of(model_dir)['global_step'] == 10
  assert not os.path.exists(os.path.join(model_dir, checkpoints.DAMAGED_DIR))
  resumed = ok(run_main('--train_steps=30', *args))
  assert 'model.ckpt-20 is damaged: its data files hold' in resumed.stderr
  assert 'going on from %s' % os.path.join(model_dir, 'model.ckpt-10') in resumed.stderr
  assert results_of(model_dir)['global_step'] == 30
  assert sorted(os.listdir(os.path.join(model_dir, checkpoints.DAMAGED_DIR))) == [
      'model.ckpt-20.data-00000-of-00001', 'model.ckpt-20.index', 'model.ckpt-20.meta']
  for index in tf.io.gfile.glob(os.path.join(model_dir, 'model.ckpt-*.index')):
    _truncate(index[:-len('.index')])
  refused(run_main('--train_steps=40', *args), 'no intact checkpoint in', 'model.ckpt-30')


def test_the_rewritten_state_works_in_a_relative_model_dir(tmp_path, monkeypatch):
  """TensorFlow stores checkpoint paths relative to a relative (or gs://) model_dir: after a
  damaged checkpoint is moved aside the state still resolves, for a later run to resume."""
  monkeypatch.chdir(tmp_path)
  os.makedirs('runs/model')
  prefixes = _write_checkpoints('runs/model')
  _truncate(prefixes[-1])
  assert checkpoints.newest_intact_checkpoint('runs/model') == prefixes[1]
  assert tf.train.latest_checkpoint('runs/model') == prefixes[1]
  with open('runs/model/checkpoint') as f:
    assert '"model.ckpt-200"' in f.read()
  assert checkpoints.checkpoint_damage(tf.train.latest_checkpoint('runs/model')) is None


def test_an_error_that_is_not_damage_moves_nothing(tmp_path, monkeypatch):
  """A storage outage or a refused permission while reading is raised, never taken for damage:
  an intact checkpoint must not be moved aside on a transient error."""
  model_dir = str(tmp_path)
  _write_checkpoints(model_dir)

  def unavailable(prefix):
    raise tf.errors.UnavailableError(None, None, 'connection reset by the object store')

  monkeypatch.setattr(tf.train, 'NewCheckpointReader', unavailable)
  with pytest.raises(tf.errors.UnavailableError):
    checkpoints.newest_intact_checkpoint(model_dir)
  assert not os.path.exists(os.path.join(model_dir, checkpoints.DAMAGED_DIR))


@pytest.mark.parametrize('where', ['local', pytest.param('gs', marks=needs_gcs)])
def test_the_folders_of_saves_killed_before_their_merge_are_deleted_and_nothing_else(where,
                                                                                     tmp_path):
  """What a save killed inside its data write leaves (tests/test_kill_anywhere.py makes it for
  real): PREFIX_temp_HEX/ (TF 1.15) or PREFIX_temp/ (TF 2.x), with a partial data file."""
  model_dir = str(tmp_path) if where == 'local' else 'gs://bkt/%s' % uuid.uuid4().hex[:12]
  prefixes = _write_checkpoints(model_dir, steps=(6,))
  unfinished = ['model.ckpt-12_temp_' + 'ab' * 16, 'model.ckpt-0123abcd-18_temp']
  kept = ['notes_temp', 'model.ckpt-12_temporary']
  for name in unfinished + kept:
    tf.io.gfile.makedirs('%s/%s' % (model_dir, name))
    with tf.io.gfile.GFile('%s/%s/part-00000-of-00001.data-00000-of-00001' % (model_dir, name),
                           'w') as f:
      f.write('partial')
  with tf.io.gfile.GFile(model_dir + '/model.ckpt-24_temp', 'w') as f:  # a file, not a save's
    f.write('x')
  assert checkpoints.remove_unfinished_saves(model_dir) == sorted(unfinished)
  left = {name.rstrip('/') for name in tf.io.gfile.listdir(model_dir)}
  assert left == {'checkpoint', 'model.ckpt-24_temp', 'model.ckpt-6.data-00000-of-00001',
                  'model.ckpt-6.index', 'model.ckpt-6.meta'} | set(kept), left
  assert tf.train.latest_checkpoint(model_dir) == prefixes[0]


def test_only_run_named_checkpoints_no_state_file_names_are_deleted(tmp_path):
  """checkpoints.remove_orphans (the next gs:// holder's cleanup; plain files here): a
  run-named checkpoint that neither the state file nor `keep` names goes; named, kept and other
  names stay; without a state file that reads and names one, nothing goes."""
  directory = str(tmp_path)
  prefixes = ['model.ckpt-aaaa0001-10', 'model.ckpt-aaaa0001-20', 'model.ckpt-bbbb0002-30',
              'model.ckpt-bbbb0002-40', 'model.ckpt-40']  # the last: TensorFlow's own name
  for prefix in prefixes:
    for suffix in ('.index', '.meta', '.data-00000-of-00001'):
      (tmp_path / (prefix + suffix)).write_text('x')
  (tmp_path / 'model.ckpt-bbbb0002-50_temp').mkdir()  # an unfinished save: not this cleanup's

  def left():
    return sorted({re.sub(r'\.(index|meta|data-00000-of-00001)$', '', n)
                   for n in os.listdir(directory)})

  everything = sorted(prefixes + ['model.ckpt-bbbb0002-50_temp'])
  assert checkpoints.remove_orphans(directory) == [] and left() == everything  # no state file
  (tmp_path / 'checkpoint').write_text('not a CheckpointState {')
  assert checkpoints.remove_orphans(directory) == []  # one that does not read
  assert left() == sorted(everything + ['checkpoint'])
  tf.train.update_checkpoint_state(directory, os.path.join(directory, prefixes[1]),
                                   all_model_checkpoint_paths=[os.path.join(directory, p)
                                                               for p in prefixes[:2]])
  assert checkpoints.remove_orphans(directory, keep=[prefixes[2]]) == [prefixes[3]]
  assert left() == ['checkpoint'] + sorted(prefixes[:3] + prefixes[4:] + [
      'model.ckpt-bbbb0002-50_temp'])
