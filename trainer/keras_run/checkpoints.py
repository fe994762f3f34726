"""Periodic checkpoints of a Keras 3 run and its exact resumption, on any backend.

A checkpoint is `model.save_weights` of the compiled model: the network's weights, the
optimizer's slots and its step counter (`optimizer.iterations`, which also drives the learning
rate); save_weights leaves out the layers' random-number states (the dropout masks' seed
generators), which `checkpoint.json` holds. The weights are written aside and renamed into place,
then named in `checkpoint.json` ({"step": N, "weights": "ckpt-N.weights.h5", "seeds": [...]}),
also renamed into place: a process killed at any moment (kill -9) leaves the previous checkpoint
intact and named.
Resuming loads the named one; the training input is deterministic (`trainer.data.input_fn`: seeded
shuffles, each example's augmentation keyed by its position), so skipping the N batches already
trained on gives the batches an uninterrupted run trains on next: the resumed run is the same run.
"""

import json
import os

from absl import logging
import keras
import numpy as np

from trainer.keras_run import process_outputs
from trainer.storage import gfile
from trainer.storage import json_files
from trainer.storage import staged

STATE_FILE = 'checkpoint.json'
_PATTERN = 'ckpt-%d.weights.h5'


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

  def _path(self, name):
    return os.path.join(self.directory, name)

  def _state(self):
    state = json_files.read(self._path(STATE_FILE))
    return None if state is json_files.MISSING else state

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
    name = _PATTERN % step
    with staged.staged_path(self._path(name)) as temporary:
      model.save_weights(temporary)
    if self.before_save:  # again before the act that makes it the newest: the write can be long
      self.before_save()
    with staged.staged_file(self._path(STATE_FILE)) as f:
      f.write(json.dumps({'step': step, 'weights': name, 'seeds': [
          keras.ops.convert_to_numpy(v).tolist() for v in _seed_states(model)]}) + '\n')
    for old in self._all()[:-self.keep]:
      gfile.remove(self._path(_PATTERN % old))
    logging.info('checkpoint at step %d: %s', step, self._path(name))

  def _all(self):
    steps = []
    for name in gfile.listdir(self.directory):
      if name.startswith('ckpt-') and name.endswith('.weights.h5'):
        steps.append(int(name[len('ckpt-'):-len('.weights.h5')]))
    return sorted(steps)

  def restore(self, model):
    """Loads the newest checkpoint into the compiled `model` (its optimizer built first, so
    that its slots load too); returns its step, or 0 when there is none."""
    state = self._state()
    if state is None:
      return 0
    step = int(state['step'])
    model.optimizer.build(model.trainable_variables)
    model.load_weights(self._path(_PATTERN % step))
    for variable, value in zip(_seed_states(model), state.get('seeds', [])):
      variable.assign(np.asarray(value, dtype=variable.dtype))
    logging.info('resumed from step %d (%s)', step, self._path(_PATTERN % step))
    return step

  def remove_all(self):
    """Deletes every checkpoint and checkpoint.json (after a finished run's outputs)."""
    for step in self._all():
      gfile.remove(self._path(_PATTERN % step))
    if gfile.exists(self._path(STATE_FILE)):
      gfile.remove(self._path(STATE_FILE))
