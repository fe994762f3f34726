"""Turns `trainer.train_keras`'s parsed flag values into one checked
`trainer.keras_run.run_config.KerasRunConfig`, before any work: each value against the rule its
`trainer.main` namesake obeys (flags/value_rules.py), then what spans several flags or absl's
flag types cannot say. A KerasRunConfig is checked when built here, not by itself."""

import json

from absl import logging

from trainer.errors import PipelineError
from trainer.flags import value_rules
from trainer.keras_run.run_config import KerasRecipe
from trainer.keras_run.run_config import KerasRunConfig
from trainer.models import recipes
from trainer.models.model_config import MODELS
from trainer.models.specs import network_params

# The recipe table's settings a Keras run reads (moving_average_decay: see recipe_values).
_RECIPE_FLAGS = ('optimizer', 'base_learning_rate', 'lr_schedule', 'warmup_epochs',
                 'lr_decay_epochs', 'lr_decay_every_epochs', 'lr_decay_factor', 'weight_decay',
                 'label_smoothing', 'gradient_clip_norm')


def recipe_values(f):
  """The optimisation settings of a Keras run: each flag if given, else the recipe of
  --recipe, else --model's own (a --network's: models.recipes.USER_NETWORK_RECIPE), from the table
  trainer.main reads (models/recipes.py). The recipe's weight moving average is not kept by the
  Keras trainer: logged as a warning."""
  network = getattr(f, 'network', None) or f.model
  name = recipes.recipe_name(network, getattr(f, 'recipe', None))
  values = dict(recipes.SCHEDULE_DEFAULTS, **recipes.MODEL_DEFAULTS[name])
  for flag in _RECIPE_FLAGS:
    given = getattr(f, flag, None)
    if given is not None:
      values[flag] = (value_rules.decay_epochs(given) if flag == 'lr_decay_epochs' else given)
  if values.get('moving_average_decay') and not getattr(f, 'init_model', None):
    logging.warning('The %s recipe keeps a moving average of the weights (decay %g) for '
                    'evaluation; the Keras trainer does not: it trains and evaluates the weights '
                    'themselves.', name, values['moving_average_decay'])
  return values


def _canonical(text):
  """--network_params as canonical JSON ('' for none; `network_params.user_params` refuses a
  bad one)."""
  parsed = network_params.user_params(text)
  return json.dumps(parsed, sort_keys=True) if parsed else ''


def keras_run_config(f):
  """The KerasRunConfig of flag values `f` (flags.keras_flags.define_train_keras_flags; any
  object with those attributes).

  Raises:
    PipelineError: a value that cannot run, with what to give instead.
  """
  value_rules.check_ranges(f)  # the rules trainer.main's flags of the same names obey
  if f.save_checkpoints_steps % f.log_every_steps:
    raise PipelineError('--save_checkpoints_steps=%d is not a multiple of --log_every_steps=%d '
                        '(checkpoints are written at the end of a logged period).'
                        % (f.save_checkpoints_steps, f.log_every_steps))
  if f.init_model and not f.init_model.endswith('.keras'):
    raise PipelineError('--init_model=%s: give a .keras file.' % f.init_model)
  if getattr(f, 'network_params', None) and (getattr(f, 'network', None) or f.model) in MODELS:
    raise PipelineError('--network_params is read by a --network=MODULE:CALLABLE only, not by the '
                        'built-in --model=%s: drop it.' % f.model)
  plan = recipe_values(f)
  recipe = KerasRecipe(
      optimizer=plan['optimizer'], momentum=float(f.momentum), nesterov=bool(f.nesterov),
      base_learning_rate=float(plan['base_learning_rate']), lr_schedule=plan['lr_schedule'],
      warmup_epochs=float(plan['warmup_epochs']),
      lr_decay_epochs=tuple(float(e) for e in plan['lr_decay_epochs']),
      lr_decay_every_epochs=float(plan['lr_decay_every_epochs']),
      lr_decay_factor=float(plan['lr_decay_factor']), weight_decay=float(plan['weight_decay']),
      label_smoothing=float(plan['label_smoothing']),
      gradient_clip_norm=float(plan['gradient_clip_norm']),
      aux_loss_weight=float(f.aux_loss_weight))
  return KerasRunConfig(
      model_dir=f.model_dir, data_dir=f.data_dir, init_model=f.init_model or None,
      model=getattr(f, 'network', None) or f.model,
      network_params=_canonical(getattr(f, 'network_params', None)), resnet_depth=int(f.resnet_depth), image_size=f.image_size,
      embedding_dim=int(f.embedding_dim), lstm_hidden_units=int(f.lstm_hidden_units),
      overwrite=bool(f.overwrite), train_steps=f.train_steps,
      train_epochs=float(f.train_epochs), train_batch_size=int(f.train_batch_size),
      eval_batch_size=int(f.eval_batch_size), recipe=recipe, dtype_policy=f.dtype_policy,
      crop_padding=f.crop_padding, cache_decoded=bool(f.cache_decoded),
      log_every_steps=int(f.log_every_steps),
      save_checkpoints_steps=int(f.save_checkpoints_steps),
      keep_checkpoints=int(f.keep_checkpoints), cpu_replicas=int(f.cpu_replicas),
      data_parallel=bool(f.data_parallel), multi_host=bool(f.multi_host),
      multi_host_timeout=int(f.multi_host_timeout), seed=int(f.seed),
      lease_expiry_secs=int(f.lease_expiry_secs))
