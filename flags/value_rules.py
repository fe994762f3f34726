"""The range every numeric flag of the trainers must be in (`FLAG_RULES`), one table for
`trainer.main` (flags/value_checks.py) and `trainer.train_keras` (flags/to_keras_config.py), and
the check against it; and the parse of --lr_decay_epochs both share. Imports no TensorFlow: the
Keras runtime checks its flags without it.
"""

import collections
import math

from trainer.data import dataset_json
from trainer.errors import PipelineError

# A flag's rule: the range its value must be in ([low, high], `low_open` excludes low) and what
# 0 means where 0 is allowed (from the flag's help in flags/run_flags.py, flags/tpu_flags.py).
Rule = collections.namedtuple('Rule', ['low', 'low_open', 'high', 'high_open', 'zero_means'])
_POSITIVE = Rule(0, True, math.inf, False, None)


def _at_least(low, zero_means=None):
  return Rule(low, False, math.inf, False, zero_means)


def _fraction(zero_means=None):
  """[0, 1): a decay, a rate, a smoothing."""
  return Rule(0, False, 1, True, zero_means)


FLAG_RULES = {
    # Model
    'num_classes': Rule(2, False, dataset_json.MAX_NUM_CLASSES, False, None),
    'image_size': Rule(1, False, dataset_json.MAX_IMAGE_SIZE, False, None),
    'max_seq_length': Rule(1, False, dataset_json.MAX_SEQ_LENGTH, False, None),
    'embedding_dim': _POSITIVE,
    'lstm_hidden_units': _POSITIVE,
    'lstm_layers': _POSITIVE,
    'dropout_rate': _fraction('no dropout'),
    # Optimizer
    'label_smoothing': _fraction('no smoothing'),
    'base_learning_rate': _at_least(0, 'the weights never change'),
    'momentum': _fraction('plain SGD'),
    'weight_decay': _at_least(0, 'no weight decay'),
    'warmup_epochs': _at_least(0, 'no warmup'),
    'lr_decay_every_epochs': _POSITIVE,
    'lr_decay_factor': _POSITIVE,
    'gradient_clip_norm': _at_least(0, 'no clipping'),
    'moving_average_decay': _fraction('no moving average'),
    # Data
    'label_offset': _at_least(0),
    'num_train_examples': _POSITIVE,
    'num_eval_examples': _POSITIVE,
    'crop_padding': _at_least(0, 'no padding'),
    'eval_crop_fraction': Rule(0, True, 1, False, None),
    # Schedule
    'train_batch_size': _POSITIVE,
    'eval_batch_size': _POSITIVE,
    'train_steps': _POSITIVE,
    'train_epochs': _POSITIVE,
    'steps_per_eval': _POSITIVE,
    'save_checkpoints_steps': _POSITIVE,
    'keep_checkpoint_max': _POSITIVE,
    'predict_top_k': _at_least(1),
    'early_stopping_evals': _at_least(0, 'never stop early'),
    'eval_timeout': _at_least(0, 'evaluate the latest checkpoint once'),
    'log_every_n_secs': _POSITIVE,
    'preemption_grace_secs': _POSITIVE,
    'lease_expiry_secs': _at_least(12),  # lease.MIN_EXPIRY_SECS
    # Cloud TPU, GPUs
    'iterations_per_loop': _POSITIVE,
    'num_cores': _POSITIVE,
    'tpu_connect_timeout': _POSITIVE,
    'num_gpus': _at_least(0, 'TensorFlow picks one device'),
}


def check_ranges(f):
  """Refuses a value of `f` (flag values, read as attributes) outside its `FLAG_RULES` range;
  names `f` lacks, or holds as None, are skipped (each command has its own flags).

  Raises:
    PipelineError: naming the flag, its value and what it must be.
  """
  for name, rule in sorted(FLAG_RULES.items()):
    value = getattr(f, name, None)
    if value is not None and not _obeys(value, rule):
      raise PipelineError('--%s must be %s, got %s.' % (name, _describe(rule), value))


def decay_epochs(values):
  """--lr_decay_epochs as epochs, one parse for both trainers.

  Args:
    values: absl's list of strings (empty: no decay).

  Returns:
    tuple of float: the epochs, finite, >= 0, in increasing order.

  Raises:
    PipelineError: a value that is not a number, not finite (for no decay give none:
      --lr_decay_epochs=), negative, or out of order.
  """
  text = ','.join(str(v) for v in values)
  try:
    epochs = tuple(float(v) for v in values)
  except (TypeError, ValueError):
    raise PipelineError('--lr_decay_epochs=%s: give numbers of epochs, e.g. 30,60,80.' % text)
  if not all(math.isfinite(e) for e in epochs):
    raise PipelineError('--lr_decay_epochs=%s: give finite epochs; for no decay give none '
                        '(--lr_decay_epochs=).' % text)
  if any(e < 0 for e in epochs) or list(epochs) != sorted(epochs):
    raise PipelineError('--lr_decay_epochs=%s: give epochs >= 0 in increasing order.' % text)
  return epochs


def _obeys(value, rule):
  if not math.isfinite(value):
    return False
  above = value > rule.low if rule.low_open else value >= rule.low
  below = value < rule.high if rule.high_open else value <= rule.high
  return above and below


def _describe(rule):
  if rule.high == math.inf:
    text = '%s %s' % ('>' if rule.low_open else '>=', rule.low)
  else:
    text = 'in %s%s, %s%s' % ('(' if rule.low_open else '[', rule.low, rule.high,
                              ')' if rule.high_open else ']')
  if rule.zero_means:
    text += ' (0: %s)' % rule.zero_means
  return text
