"""One recipe table (models/recipes.py) for both trainers: the Estimator's learning rate
(models/optimization.py), built from trainer.main's flags, equals the plain-Python reference
`recipes.learning_rate` at every step that matters, for every network's recipe under every
schedule; and a network's flags left unset take its recipe. The Keras trainer's side:
test_keras_recipes.py."""

import pytest
import tensorflow.compat.v1 as tf

from trainer.models import optimization
from trainer.models import recipes
from trainer.models.model_config import MODELS

from helpers import config_from_args

# A run of 10 epochs of 50 steps (1,600 examples at batch 32): the warmup, each decay boundary
# and the cosine's middle and end fall inside it.
BATCH, EXAMPLES, STEPS = 32, 1600, 500
SCHEDULE_FLAGS = {
    'step': dict(lr_decay_epochs=(2.0, 6.5), lr_decay_factor=0.2),
    # The step schedule without decay epochs: a recipe that has none keeps the peak rate.
    'step-no-decays': dict(lr_schedule='step'),
    'exponential': dict(lr_decay_every_epochs=1.5, lr_decay_factor=0.5),
    'cosine': {},
    'constant': {},
}
CHECKED_STEPS = (0, 1, 24, 25, 26, 99, 100, 101, 250, 324, 325, 326, 499, 500)


def _flag(name, value):
  return '--%s=%s' % (name, ','.join(map(str, value)) if isinstance(value, tuple) else value)


@pytest.mark.parametrize('network', MODELS)
@pytest.mark.parametrize('schedule', sorted(SCHEDULE_FLAGS))
def test_the_estimators_rate_is_the_reference_for_every_recipe_and_schedule(network, schedule):
  overrides = dict(dict(lr_schedule=schedule, warmup_epochs=0.5), **SCHEDULE_FLAGS[schedule])
  config = config_from_args(
      '--fake_data', '--model=' + network, '--model_dir=/tmp/unused',
      '--train_batch_size=%d' % BATCH, '--num_train_examples=%d' % EXAMPLES,
      '--train_steps=%d' % STEPS, *[_flag(k, v) for k, v in sorted(overrides.items())])
  recipe = dict(recipes.MODEL_DEFAULTS[network], **overrides)
  with tf.Graph().as_default():
    step = tf.placeholder(tf.int64, [])
    rate = optimization.learning_rate_schedule(config.model, step)
    with tf.Session() as sess:
      got = [sess.run(rate, {step: s}) for s in CHECKED_STEPS]
  want = [recipes.learning_rate(recipe, s, BATCH, EXAMPLES / BATCH, STEPS) for s in CHECKED_STEPS]
  assert got == pytest.approx(want, rel=1e-5, abs=1e-9), list(zip(CHECKED_STEPS, got, want))
  # The steps tell the schedules apart: the constant one alone keeps one rate.
  assert (len(set(want)) == 1) == (schedule == 'constant'), want


@pytest.mark.parametrize('network', MODELS)
def test_unset_flags_take_the_networks_recipe_and_a_user_network_takes_the_default(network):
  args = ['--fake_data', '--model_dir=/tmp/unused', '--train_steps=1']
  model = config_from_args('--model=' + network, *args).model
  for name, value in recipes.MODEL_DEFAULTS[network].items():
    assert getattr(model, name) == value, name
  mobilenet = config_from_args('--network=examples.mobilenet:mobilenet', '--recipe=' + network,
                               '--image_size=32', '--num_classes=10', *args).model
  assert mobilenet.optimizer == recipes.MODEL_DEFAULTS[network]['optimizer']
  default = config_from_args('--network=examples.mobilenet:mobilenet', '--image_size=32',
                             '--num_classes=10', *args).model
  assert default.optimizer == recipes.MODEL_DEFAULTS[recipes.USER_NETWORK_RECIPE]['optimizer']
