"""The Keras trainer reads the recipe table trainer.main reads (models/recipes.py): its learning
rate (trainer/keras_run/schedule.py), built from train_keras's flags, equals the plain-Python
reference `recipes.learning_rate` for every network's recipe under every schedule, and a
network's recipe flags left unset take that network's recipe, as trainer.main's do
(test_recipes.py). Keras runtime."""

import pytest

keras = pytest.importorskip('keras', minversion='3', reason='the Keras 3 runtime (.venv-keras)')

# pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np
from test_recipes import BATCH
from test_recipes import CHECKED_STEPS
from test_recipes import EXAMPLES
from test_recipes import SCHEDULE_FLAGS
from test_recipes import STEPS

from trainer.keras_run import schedule as schedule_lib
from trainer.models import recipes
from trainer.models.model_config import MODELS

import keras_resume

_RECIPE_FLAGS = ('optimizer', 'base_learning_rate', 'lr_schedule', 'warmup_epochs',
                 'lr_decay_epochs', 'lr_decay_factor', 'weight_decay', 'label_smoothing',
                 'gradient_clip_norm')
_UNSET = {name: None for name in _RECIPE_FLAGS}


def _config(network, **flags):
  return keras_resume.flags('/tmp/unused', '/tmp/unused', model=network, train_batch_size=BATCH,
                            **dict(_UNSET, **flags))


@pytest.mark.parametrize('network', MODELS)
@pytest.mark.parametrize('schedule', sorted(SCHEDULE_FLAGS))
def test_the_keras_rate_is_the_reference_for_every_recipe_and_schedule(network, schedule):
  overrides = dict(dict(lr_schedule=schedule, warmup_epochs=0.5), **SCHEDULE_FLAGS[schedule])
  flags = {k: [str(e) for e in v] if k == 'lr_decay_epochs' else v for k, v in overrides.items()}
  config = _config(network, **flags)
  rate = schedule_lib.PipelineSchedule.from_recipe(config.recipe, BATCH, EXAMPLES / BATCH, STEPS)
  got = [float(keras.ops.convert_to_numpy(rate(np.int64(s)))) for s in CHECKED_STEPS]
  recipe = dict(recipes.MODEL_DEFAULTS[network], **overrides)
  want = [recipes.learning_rate(recipe, s, BATCH, EXAMPLES / BATCH, STEPS) for s in CHECKED_STEPS]
  assert got == pytest.approx(want, rel=1e-5, abs=1e-9), list(zip(CHECKED_STEPS, got, want))


@pytest.mark.parametrize('network', MODELS)
def test_unset_recipe_flags_take_the_networks_recipe_as_in_trainer_main(network):
  recipe = _config(network).recipe
  for name, value in recipes.MODEL_DEFAULTS[network].items():
    if name != 'moving_average_decay':  # not kept by the Keras trainer (logged)
      assert getattr(recipe, name) == value, name
  assert _config(network, recipe='cnn').recipe.optimizer == 'adam'
