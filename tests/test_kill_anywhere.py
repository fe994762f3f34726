"""Kills at any moment, resumed to the same result: a harness that kills a command (kill -9, and
SIGTERM) at points drawn from a seed (after a training step, inside a checkpoint save, before the
rename of a staged file, inside the SavedModel export, inside a `prepare` conversion: the points
of tests/kill_at.py), then runs the same command again, until it ends; at most MAX_KILLS kills a
run. Each run must end as an uninterrupted one does: the same final step, every output present
and readable, nothing outside its own directories touched. (The Keras trainer's version, whose
resumed weights equal an uninterrupted run's bit for bit: tests/test_keras_train.py.)

The trainer's harness runs on both runtimes (their checkpoint saves and exports differ), on local
disk and on gs:// (the GCS emulator: there the visible writes go through the writer's fences, and
the killed runs' unnamed checkpoints must be gone at the end); the conversion's and the
leftovers' are TensorFlow-free and run once."""

import json
import os
import re
import uuid

import pytest
import tensorflow.compat.v1 as tf

from trainer.run import checkpoints
from trainer.storage import staged

from helpers import needs_gcs
from helpers import ok
from helpers import run_main
from helpers import run_prepare
from kill_harness import KILLED
from kill_harness import run_until_done
from refusals import fingerprint

tensorflow_free = pytest.mark.one_runtime('Beam and file names: no TensorFlow under it')

def _tiny(small_dir, model_dir, export_dir):
  return ['--data_dir=' + small_dir, '--model_dir=' + model_dir, '--export_dir=' + export_dir,
          '--model=cnn', '--image_size=28', '--train_batch_size=32', '--eval_batch_size=100',
          '--seed=3', '--log_every_n_secs=60', '--mode=train_and_eval', '--train_steps=24',
          '--steps_per_eval=12', '--save_checkpoints_steps=6', '--keep_checkpoint_max=2']


# The points come in an order drawn from the seed, each before any again; a kill drawn for a
# call the rerun never makes does not happen. So each runtime runs two seeds whose kills reach all
# five points between them (FIRED: the points each seed's kills reached, the same on both
# runtimes): seed 56 (after step 4, inside the 2nd save before its state file, inside the 2nd
# save's data write, inside the export) with seed 2 on TF 2.15 (checkpoint, step, rename, data)
# and seed 17 on TF 1.15 (step, rename, data; its draw of a second export never comes).
POINTS = {'step': 8, 'checkpoint': 3, 'rename': 4, 'export': 2, 'data': 2}
SEEDS = {'2': (56, 2), '1': (56, 17)}
FIRED = {2: {'checkpoint', 'step', 'rename', 'data'}, 17: {'step', 'rename', 'data'},
         56: {'step', 'checkpoint', 'data', 'export'}}
# The killed run's accuracy: a resumed Estimator run draws new shuffles (docs/reliability.md), so
# it ends as a run of another data order does. Uninterrupted runs of this command with --seed 1-10
# on each runtime reached 0.447-0.633 (mean 0.547, standard deviation 0.054, 20 runs; BENCHMARKS.md,
# "Killed anywhere"): the range is that mean plus or minus 4 standard deviations. An untrained
# network (a resume that lost the weights) scores about 0.1.
ACCURACY_RANGE = (0.33, 0.76)


def _killed_run(small_dir, model_dir, export_dir, seed, points):
  """Runs `_tiny`'s trainer.main under the kill harness (`points`, `seed`) until it ends, and
  checks that it was killed 3 times or more and that every run after a kill resumed from the
  newest intact checkpoint the killed one left (a resume from an older one, or from scratch,
  fails here). Returns (the harness's history, the points whose kills fired)."""
  left, resumed = [], []  # the newest intact step each run left; the step each run resumed from
  fired = set()

  def after_each(stderr):
    fired.update(re.findall(r'^kill_at: (\w+) #', stderr, re.M))
    found = re.search(r'Resuming from the checkpoint at step (\d+) of', stderr)
    trained = re.search(r'step \d+/24 ', stderr)  # it reached training: a resume was logged
    resumed.append(int(found.group(1)) if found else 0 if trained else None)
    newest = (checkpoints.newest_intact_checkpoint(model_dir, move_aside=False)
              if tf.io.gfile.exists(model_dir) else None)
    left.append(checkpoints.step_of(newest) if newest else 0)

  history = run_until_done('trainer.main', _tiny(small_dir, model_dir, export_dir), seed, points,
                           after_each=after_each)
  print('%s seed %d: %s, fired %s, left %s, resumed %s' % (model_dir, seed, history, sorted(fired),
                                                          left, resumed))
  assert sum(status in KILLED['trainer.main'] for _, status in history) >= 3, history
  for k in range(1, len(history)):
    if 0 < left[k - 1] < 24 and resumed[k] is not None:
      assert resumed[k] == left[k - 1], (k, left, resumed, history)
  return history, fired


@pytest.fixture(scope='module')
def uninterrupted(small_dir, tmp_path_factory):
  """The uninterrupted run's directory (model/, export/), shared by the seeds' tests."""
  whole = tmp_path_factory.mktemp('whole')
  ok(run_main(*_tiny(small_dir, str(whole / 'model'), str(whole / 'export'))))
  return whole


@pytest.mark.parametrize('draw', [0, 1])
def test_trainer_killed_anywhere_finishes_like_an_uninterrupted_run(draw, small_dir,
                                                                     uninterrupted, tmp_path):
  """trainer.main (24 steps, a checkpoint every 6, an evaluation every 12, an export) killed at
  four of the five points of tests/kill_at.py: every run after a kill resumes from the newest
  intact checkpoint the killed one left (a resume from an older one, or from scratch, fails
  here); it ends at step 24 with results.json, an intact checkpoint and one loadable SavedModel
  (and the best one), with the uninterrupted run's files and no others (a save killed inside its
  data write leaves a temporary folder, which the next run deletes), an accuracy within the
  spread of uninterrupted runs of other seeds, and a sibling directory untouched."""
  seed = SEEDS[tf.__version__[0]][draw]
  neighbour = tmp_path / 'neighbour'
  (neighbour / 'model').mkdir(parents=True)
  (neighbour / 'model' / 'notes.txt').write_text('another run')
  before = fingerprint(str(neighbour))
  whole = uninterrupted
  killed = tmp_path / 'killed'
  model_dir = str(killed / 'model')
  history, fired = _killed_run(small_dir, model_dir, str(killed / 'export'), seed, POINTS)
  assert fired == FIRED[seed], (sorted(fired), history)
  assert fingerprint(str(neighbour)) == before
  results = [json.loads((run / 'model' / 'results.json').read_text()) for run in (whole, killed)]
  for key in ('global_step', 'train_steps', 'mode', 'model', 'seed'):
    assert results[0][key] == results[1][key], key
  assert results[1]['global_step'] == 24
  low, high = ACCURACY_RANGE
  assert low <= results[1]['top_1_accuracy'] <= high, (results[1]['top_1_accuracy'], history)
  model_dir = str(killed / 'model')
  newest = checkpoints.newest_intact_checkpoint(model_dir, move_aside=False)
  assert checkpoints.step_of(newest) == 24 and checkpoints.checkpoint_damage(newest) is None
  exports = [sorted(n if not n.isdigit() else 'TIMESTAMP' for n in os.listdir(str(run / 'export')))
             for run in (whole, killed)]
  assert exports[0] == exports[1] and exports[1].count('TIMESTAMP') == 1, exports
  for path in (results[1]['export_path'], results[1].get('best_export_path')):
    if path:
      with tf.Graph().as_default(), tf.Session() as session:
        tf.saved_model.loader.load(session, ['serve'], path)
  # Events files are named by their time and pid; a SIGTERM saves the step it reached, so the
  # checkpoints kept may be of other steps than the uninterrupted run's.
  names = [{re.sub(r'^model\.ckpt-\d+\.', 'model.ckpt-STEP.', n)
            for n in os.listdir(str(run / 'model')) if not n.startswith('events.out.')}
           for run in (whole, killed)]
  assert names[1] - names[0] <= {'damaged'} and names[0] <= names[1], names
  for left in ('export_in_progress.json', 'writer.lease'):
    assert not os.path.exists(os.path.join(model_dir, left))



# On gs:// the trainer's visible writes are fenced (trainer/storage/state_fence.py): the points
# are the state file's, results.json's and best/checkpoint's fenced writes besides a step and the
# export (the data write's watcher and the staged renames are local disk's). Each point's count is
# one a run makes whatever its evaluations score (a second best or export depends on them), and
# GCS_FIRED is what each runtime's seed reaches: on both, each fenced write and the export
# (SIGKILL inside the state file's first write, best/checkpoint's and the export; SIGTERM before
# results.json's).
GCS_POINTS = {'step': 8, 'checkpoint': 3, 'results': 1, 'best': 1, 'export': 1}
GCS_SEEDS = {'2': 15, '1': 15}
GCS_FIRED = {15: {'checkpoint', 'best', 'export', 'results'}}


@needs_gcs
def test_on_gcs_a_trainer_killed_anywhere_finishes_with_no_orphan(small_dir):
  """trainer.main with model_dir and export_dir on gs:// killed at the points of GCS_POINTS:
  each run after a kill resumes from the newest intact checkpoint the killed one left; the run
  ends at step 24 with results.json, an intact newest checkpoint, its SavedModel (and the best
  one) loadable and nothing else in the export folder, and an accuracy in the uninterrupted runs'
  spread; and every run-named checkpoint left in model_dir and best/ is one the state files name
  (a killed run's unnamed ones were deleted by the next holder), with no lease or unfinished
  export's record left."""
  seed = GCS_SEEDS[tf.__version__[0]]
  base = 'gs://bkt/kill-%s' % uuid.uuid4().hex[:12]  # the suites of both runtimes share the bucket
  model_dir, export_dir = base + '/model', base + '/export'
  history, fired = _killed_run(small_dir, model_dir, export_dir, seed, GCS_POINTS)
  assert fired == GCS_FIRED[seed], (sorted(fired), history)
  with tf.io.gfile.GFile(model_dir + '/results.json') as f:
    results = json.load(f)
  assert results['global_step'] == 24
  low, high = ACCURACY_RANGE
  assert low <= results['top_1_accuracy'] <= high, (results['top_1_accuracy'], history)
  newest = checkpoints.newest_intact_checkpoint(model_dir, move_aside=False)
  assert checkpoints.step_of(newest) == 24 and checkpoints.checkpoint_damage(newest) is None
  # The finished run's export and its best/ copy, nothing a killed export left.
  exports = sorted(n.rstrip('/') for n in tf.io.gfile.listdir(export_dir))
  assert exports == sorted([os.path.basename(results['export_path'])] +
                           (['best'] if results.get('best_export_path') else [])), exports
  for path in (results['export_path'], results.get('best_export_path')):
    if path:
      with tf.Graph().as_default(), tf.Session() as session:
        tf.saved_model.loader.load(session, ['serve'], path)
  named = set(tf.train.get_checkpoint_state(model_dir).all_model_checkpoint_paths)
  best = tf.train.get_checkpoint_state(model_dir + '/best')
  named |= set(best.all_model_checkpoint_paths) if best else set()
  kept = {p[:-len('.index')] for folder in (model_dir, model_dir + '/best')
          for p in tf.io.gfile.glob(folder + '/model.ckpt-*.index')}
  assert newest in kept and kept <= named, (newest, sorted(kept - named), sorted(named))
  for name in ('export_in_progress.json', 'writer.lease'):
    assert not tf.io.gfile.exists(model_dir + '/' + name), name

@tensorflow_free
def test_prepare_killed_anywhere_writes_the_same_conversion(tmp_path):
  """trainer.prepare text (a CSV of 300 labelled lines) killed up to 4 times inside its
  conversion (before a shard's, vocab.txt's or dataset.json's rename): the same command, run
  again, takes over the dead run's lease, replaces its unfinished output and writes files
  identical to an uninterrupted conversion's."""
  lines = ['text,label'] + ['%s film number %d,%s' % ('good fun' if i % 2 else 'dull bad', i,
                                                       'pos' if i % 2 else 'neg')
                            for i in range(300)]
  (tmp_path / 'texts.csv').write_text('\n'.join(lines) + '\n')
  args = lambda out: ['text', '--input=%s' % (tmp_path / 'texts.csv'), '--output_dir=' + out,
                      '--train_shards=4', '--validation_shards=2']
  whole, killed = str(tmp_path / 'whole'), str(tmp_path / 'killed')
  ok(run_prepare(*args(whole)))
  history = run_until_done('trainer.prepare', args(killed), 5, {'rename': 8})
  print('prepare: %s' % history)
  assert sum(status in KILLED['trainer.prepare'] for _, status in history) >= 2, history
  assert fingerprint(whole) == fingerprint(killed)


@tensorflow_free
def test_files_a_killed_writer_left_aside_are_removed_by_the_next_holder(tmp_path):
  """`staged.remove_leftovers`: a file written aside (.partial-HEX.NAME, and earlier versions'
  NAME.partial-HEX[.EXT] and .SHARD.tmp-HEX32) goes, everything else stays; the lease's own are
  the lease's."""
  with staged.staged_file(str(tmp_path / 'results.json')) as f:
    aside = os.path.basename(f.name)
    f.write('{}')
    assert sorted(os.listdir(str(tmp_path))) == [aside] and aside.endswith('.results.json')
  assert os.listdir(str(tmp_path)) == ['results.json']
  left = ['.partial-0123456789ab.ckpt-4.weights.h5', 'results.json.partial-0123456789ab',
          'model.partial-0123456789ab.keras', '.train-00000-of-00002.tmp-' + 'a' * 32]
  for name in left + ['notes.partial-12', '.partial-0123456789ab.writer.lease', 'train-x.tmp']:
    (tmp_path / name).write_text('x')
  assert staged.remove_leftovers(str(tmp_path), but=('writer.lease',)) == sorted(left)
  assert sorted(os.listdir(str(tmp_path))) == [
      '.partial-0123456789ab.writer.lease', 'notes.partial-12', 'results.json', 'train-x.tmp']
