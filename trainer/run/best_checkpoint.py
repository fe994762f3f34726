"""Keep the best, stop when done: the checkpoint with the best evaluation so far is copied into
<model_dir>/best/ (out of keep_checkpoint_max's reach, and a `checkpoint` state file so that
`--init_checkpoint=<model_dir>/best` or `tf.train.latest_checkpoint` find it), with
<model_dir>/best/best.json recording every evaluation of the run. A resumed run reads it back,
so the best and the count of evaluations since it survive restarts.

best.json: {"metric": "top_1_accuracy", "best": {<evaluation results>, "checkpoint": prefix},
            "evaluations": [{"global_step": N, "top_1_accuracy": x}, ...]}

On gs:// the training run writes best/checkpoint and best/best.json through fences
(`trainer.storage.state_fence`), as it writes model_dir's own state file: a run that stalled past
its lease's expiry cannot name its copy there, or rewrite the record, once another run took over.
The copies' file names carry the run's name on gs:// (`trainer.run.fenced_saver`), so a stalled
run's copy never overwrites the new holder's.
"""

import os

from absl import logging
from google.protobuf import text_format
import tensorflow.compat.v1 as tf

from trainer.errors import PipelineError
from trainer.run import checkpoints
from trainer.storage import json_files

BEST_DIR = 'best'
STATE_FILE = 'best.json'
CHECKPOINT_STATE_FILE = 'checkpoint'  # TensorFlow's name, read by tf.train.latest_checkpoint
# The files a fenced run writes through a fence each (model_dir-relative name, what they are).
FENCED_FILES = {BEST_DIR + '/' + CHECKPOINT_STATE_FILE: 'the best checkpoint\'s state file',
                BEST_DIR + '/' + STATE_FILE: 'the record of evaluations'}
FENCE_AGAIN = ('Run the same command again: it resumes from the newest checkpoint and records '
               'its evaluations.')
METRIC = 'top_1_accuracy'  # higher is better


def read_state(model_dir):
  """The record <model_dir>/best/best.json, checked (called before any work, and by
  `BestCheckpoint`).

  Returns:
    dict with "best" (None or a dict with global_step, METRIC and checkpoint) and "evaluations"
    (a list of dicts with global_step and METRIC); None when there is no such file.

  Raises:
    PipelineError: the file is not such a record (truncated, edited), naming it and the fix.
  """
  path = '%s/%s/%s' % (model_dir.rstrip('/'), BEST_DIR, STATE_FILE)
  try:
    state = json_files.read(path)
    if state is json_files.MISSING:
      return None
    if not isinstance(state, dict) or not isinstance(state.get('evaluations'), list):
      raise ValueError('no "evaluations" list')
    for entry in state['evaluations'] + ([state['best']] if state.get('best') is not None else []):
      if not isinstance(entry, dict) or not isinstance(entry.get('global_step'), int) or \
          isinstance(entry.get(METRIC), bool) or not isinstance(entry.get(METRIC), (int, float)):
        raise ValueError('an evaluation without an integer global_step and a numeric %s' % METRIC)
    if state.get('best') is not None and not isinstance(state['best'].get('checkpoint'), str):
      raise ValueError('"best" names no checkpoint')
  except ValueError as e:  # json's errors and UnicodeDecodeError are ValueErrors
    raise PipelineError(
        '%s is not a record of evaluations (%s): it is damaged (truncated by a full disk or an '
        'interrupted copy?). Restore it from a backup, or delete it to start the record over '
        '(the best checkpoint and the early-stopping count are then forgotten).' % (path, e))
  state.setdefault('best', None)
  return state


def remove_orphans(model_dir, also_keep=()):
  """`checkpoints.remove_orphans` of model_dir and of best/, each keeping what its state file
  names, the checkpoint best.json names (a run interrupted between best/checkpoint and best.json
  leaves them naming two) and the prefixes `also_keep` (e.g. the run's --init_checkpoint): for
  a gs:// training run that holds the lease and has claimed its fences. Returns the paths of the
  prefixes removed."""
  state = read_state(model_dir)
  prefixes = [p for p in also_keep if p] + (
      [state['best']['checkpoint']] if state and state['best'] else [])
  keep = [os.path.basename(p.rstrip('/')) for p in prefixes]
  removed = []
  for directory in (model_dir.rstrip('/'), model_dir.rstrip('/') + '/' + BEST_DIR):
    removed += [directory + '/' + p for p in checkpoints.remove_orphans(directory, keep)]
  return removed


class BestCheckpoint(object):
  """The evaluations of a run and its best one so far (best.json, always kept, so that early
  stopping counts across restarts) and, with `keep`, a copy of the best checkpoint.

  Args:
    model_dir: the run's model_dir (local or gs://).
    keep: copy the best checkpoint into <model_dir>/best/; without it best.json records the
      evaluations only (its `best` names a checkpoint in model_dir that may be gone).
    fences: None (TensorFlow's and this module's own writes), or claimed
      `trainer.storage.state_fence.StateFence`s of a gs:// model_dir keyed by FENCED_FILES'
      names, which then write them (raising lease.LeaseLost once another run wrote one).
  """

  def __init__(self, model_dir, keep=True, fences=None):
    self.directory = model_dir.rstrip('/') + '/' + BEST_DIR
    self.keep = keep
    self._fences = fences or {}
    self.best = None
    self.evaluations = []
    state = read_state(model_dir)
    if state:
      self.best, self.evaluations = state['best'], state['evaluations']

  @property
  def evaluations_since_best(self):
    """Evaluations after the best one (0 when the last was the best, or none happened)."""
    if not self.best:
      return len(self.evaluations)
    later = [e for e in self.evaluations if e['global_step'] > self.best['global_step']]
    return len(later)

  def evaluated(self, step):
    """True when an evaluation at global step `step` is recorded."""
    return any(e['global_step'] == step for e in self.evaluations)

  def record(self, results, checkpoint):
    """Records the evaluation `results` (`trainer.run.results.evaluate`'s dict) of the checkpoint
    prefix `checkpoint`; with `keep`, copies it into best/ when it beats the best so far
    (ties keep the earlier one). Returns True when it is the new best."""
    if self.evaluated(results['global_step']):
      return False  # a resumed run evaluating the same checkpoint again
    self.evaluations.append({'global_step': results['global_step'], METRIC: results[METRIC]})
    improved = self.best is None or results[METRIC] > self.best[METRIC]
    previous = self.best
    if improved:
      self.best = dict(results, checkpoint=checkpoint)
      logging.info('Best %s so far: %.4f at step %d', METRIC, results[METRIC],
                   results['global_step'])
    tf.io.gfile.makedirs(self.directory)
    if improved and self.keep:
      self.best['checkpoint'] = self._copy(checkpoint)
    self._write_state()
    if (improved and self.keep and previous and previous['checkpoint'] != self.best['checkpoint']
        and previous['checkpoint'].startswith(self.directory + '/')):
      for path in checkpoints.checkpoint_files(previous['checkpoint']):
        tf.io.gfile.remove(path)
    return improved

  def _copy(self, checkpoint):
    """Copies the checkpoint's files into best/ and points best/checkpoint at the copy (the
    copy first, then the state: an interruption leaves the previous best usable)."""
    for path in checkpoints.checkpoint_files(checkpoint):
      tf.io.gfile.copy(path, self.directory + '/' + os.path.basename(path), overwrite=True)
    # The state file names the copy relative to best/ (get_checkpoint_state joins it to the
    # directory). TensorFlow takes a relative name as relative to the working directory when the
    # directory is not absolute (gs://, a relative model_dir) and rewrites it relative to
    # best/: given the bare name it recorded '../../../../model.ckpt-N', outside best/.
    name = os.path.basename(checkpoint)
    path = name if os.path.isabs(self.directory) else self.directory + '/' + name
    fence = self._fences.get(BEST_DIR + '/' + CHECKPOINT_STATE_FILE)
    if fence:
      state = tf.train.generate_checkpoint_state_proto(self.directory, path,
                                                       all_model_checkpoint_paths=[path])
      fence.write(text_format.MessageToString(state))
    else:
      tf.train.update_checkpoint_state(self.directory, path, all_model_checkpoint_paths=[path])
    return self.directory + '/' + name

  def _write_state(self):
    record = {'metric': METRIC, 'best': self.best, 'evaluations': self.evaluations}
    fence = self._fences.get(BEST_DIR + '/' + STATE_FILE)
    if fence:
      fence.write(json_files.text(record))
    else:
      json_files.write(self.directory + '/' + STATE_FILE, record)
