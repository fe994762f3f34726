"""Periodic checkpoints of a Keras 3 run and its exact resumption, on any backend.

A checkpoint is `model.save_weights` of the compiled model: the network's weights, the
optimizer's slots and its step counter (`optimizer.iterations`, which also drives the learning
rate); save_weights leaves out the layers' random-number states (the dropout masks' seed
generators), which `checkpoint.json` holds. The weights are written aside and renamed into place,
then named in `checkpoint.json` ({"step": N, "weights": "ckpt-N.weights.h5", "seeds": [...]}),
also renamed into place: a process killed at any moment (kill -9) leaves the previous checkpoint
intact and named.
On gs:// the holder of model_dir's writer lease also fences them (`fence`,
trainer/storage/state_fence.py): each file carries its run's name (ckpt-RUN-N.weights.h5), and
checkpoint.json is written only with a generation match, so that a run that stalled past a
takeover can neither name its checkpoint nor overwrite or delete the new holder's.
Resuming loads the named one; the training input is deterministic (`trainer.data.input_fn`: seeded
shuffles, each example's augmentation keyed by its position), so skipping the N batches already
trained on gives the batches an uninterrupted run trains on next: the resumed run is the same run.
"""

import json
import os
import re

from absl import logging
import keras
import numpy as np

from trainer.keras_run import process_outputs
from trainer.storage import gfile
from trainer.storage import json_files
from trainer.storage import staged
from trainer.storage import state_fence

STATE_FILE = 'checkpoint.json'
_PATTERN = 'ckpt-%d.weights.h5'
# A checkpoint's weights file: ckpt-STEP, or on gs:// ckpt-RUN-STEP; group 1 the step.
_NAME = re.compile(r'^ckpt-(?:%s-)?(\d+)\.weights\.h5$' % state_fence.RUN_NAME_PATTERN)


def _named(state):
  """The weights file checkpoint.json's `state` names (every version wrote 'weights')."""
  return state.get('weights') or _PATTERN % int(state['step'])


def _seed_states(model):
  """The state variables of the model's random-number generators (keras.random.SeedGenerator,
  e.g. of each Dropout), in the model's order."""
  return [v for v in model.variables if v.path.endswith('seed_generator_state')]


class Checkpoints:
  """The checkpoints in `directory`; `keep` newest are kept. `chief`: this process writes
  (False on the other hosts of a multi-host run, which hold the same replicated weights)."""

  def __init__(self, directory, keep=2, chief=True):
    self.directory = directory
    self.keep = max(1, keep)
    self.chief = chief
    self.before_save = None  # called first by save(): the writer's lease check, which raises
    # gs://: a claimed StateFence on checkpoint.json (`fence`); None: a staged write.
    self._fence = None
    self._owned = []  # with a fence: the weights files this run resumed from or wrote, oldest first

  def _path(self, name):
    return os.path.join(self.directory, name)

  def _state(self):
    state = json_files.read(self._path(STATE_FILE))
    return None if state is json_files.MISSING else state

  def fence(self, fence):
    """Writes checkpoint.json through `fence` (a state_fence.StateFence on it, of the run that
    holds model_dir's lease on gs://), claimed now, and names this run's weights files by its
    run. Deletes the weights files checkpoint.json does not name (a stalled earlier holder's).

    Raises:
      PipelineError: checkpoint.json could not be claimed."""
    fence.claim()
    self._fence = fence
    state = self._state()
    named = _named(state) if state else None
    for name in self._all():
      if name != named:
        logging.info('Deleting %s: a checkpoint checkpoint.json does not name (an earlier run '
                     'that lost the lease of this directory wrote it, or an older one).',
                     self._path(name))
        gfile.remove(self._path(name))

  def latest(self):
    """The newest checkpoint's step, or None (no checkpoint.json)."""
    state = self._state()
    return None if state is None else int(state['step'])

  def save(self, model, step):
    """Writes the checkpoint of `model` at `step` and names it in checkpoint.json. Every process
    of a multi-process JAX run calls it: the weights are gathered by all of them, and the chief
    alone writes (the others save into a scratch file: trainer.keras_run.process_outputs)."""
    if not self.chief:
      process_outputs.save_in_scratch(model.save_weights, '.weights.h5')
      return
    if self.before_save:
      self.before_save()
    gfile.makedirs(self.directory)
    name = (_PATTERN % step if self._fence is None else
            'ckpt-%s-%d.weights.h5' % (self._fence.run_name, step))
    with staged.staged_path(self._path(name)) as temporary:
      model.save_weights(temporary)
    if self.before_save:  # again before the act that makes it the newest: the write can be long
      self.before_save()
    self._write_state(json.dumps({'step': step, 'weights': name, 'seeds': [
        keras.ops.convert_to_numpy(v).tolist() for v in _seed_states(model)]}) + '\n')
    if self._fence is None:  # local: the lease is a lock, every checkpoint there is this run's
      # (a /gcs/ model_dir too, unfenced: docs/reliability.md)
      older = self._all()[:-self.keep]
    else:  # gs://: only what this run owns (a stalled earlier holder's next write is refused)
      self._owned.append(name)
      older, self._owned = self._owned[:-self.keep], self._owned[-self.keep:]
    for old in older:
      if gfile.exists(self._path(old)):
        gfile.remove(self._path(old))
    logging.info('checkpoint at step %d: %s', step, self._path(name))

  def _write_state(self, text):
    """Writes checkpoint.json: through the fence on gs:// (lease.LeaseLost when another run
    wrote it since and this run lost the lease), else staged."""
    if self._fence is not None:
      self._fence.write(text)
      return
    with staged.staged_file(self._path(STATE_FILE)) as f:
      f.write(text)

  def _all(self):
    """The weights files in the directory, oldest step first (list of str)."""
    found = []
    for name in gfile.listdir(self.directory) if gfile.isdir(self.directory) else []:
      match = _NAME.match(name.rstrip('/'))
      if match:
        found.append((int(match.group(1)), name.rstrip('/')))
    return [name for _, name in sorted(found)]

  def restore(self, model):
    """Loads the newest checkpoint into the compiled `model` (its optimizer built first, so
    that its slots load too); returns its step, or 0 when there is none."""
    state = self._state()
    if state is None:
      return 0
    step = int(state['step'])
    name = _named(state)
    model.optimizer.build(model.trainable_variables)
    model.load_weights(self._path(name))
    for variable, value in zip(_seed_states(model), state.get('seeds', [])):
      variable.assign(np.asarray(value, dtype=variable.dtype))
    self._owned = [name]
    logging.info('resumed from step %d (%s)', step, self._path(name))
    return step
