"""What a run reads from --data_dir and --model_dir, checked before any work (`check`, called first
by `trainer.run.driver.run`): a user's --network against the network contract, the text
vocabulary against dataset.json, <model_dir>/best/best.json, and the checkpoint in model_dir
against the network this run builds.

A checkpoint of another network is refused here because TensorFlow does not say so clearly, or at
all: TF 1.15 fails the restore with "Assign requires shapes of both tensors to match" (no
variable named), and TF 2.15 restores resource variables without checking their shapes, so a
run with another --num_classes trains on with the checkpoint's logits and fails later in the
loss ("logits and labels must be broadcastable").
"""

from absl import logging
import tensorflow.compat.v1 as tf

from trainer.data import tokenizer
from trainer.errors import PipelineError
from trainer.models import features as features_lib
from trainer.models import network_contract
from trainer.models import networks
from trainer.models.specs import network_params
from trainer.run import best_checkpoint
from trainer.run import network_record
from trainer.run import user_model_fn

# ModelConfig fields that decide the names or shapes of the network's variables, with what sets
# each (resnet_depth counts for --model=resnet only).
NETWORK_FIELDS = (('model', '--model, --network or --model_fn'), ('input_fn', '--input_fn'),
                  ('network_params', '--network_params'),
                  ('resnet_depth', '--resnet_depth'),
                  ('num_classes', '--num_classes'), ('vocab_size', "dataset.json's vocab_size"),
                  ('embedding_dim', '--embedding_dim'),
                  ('lstm_hidden_units', '--lstm_hidden_units'), ('lstm_layers', '--lstm_layers'))
# Optimizer slots and moving averages share a classifier variable's shape: skip them.
_NOT_WEIGHTS = ('Momentum', 'RMSProp', 'ExponentialMovingAverage', 'Adam')


def check(config):
  """Refuses a run whose inputs cannot be right, before any graph is built.

  Args:
    config: the run's `trainer.run.run_config.Config`.

  Raises:
    PipelineError: a user's network breaks the contract (`check_network`), vocab.txt does not
      match dataset.json (`tokenizer.check_vocabulary`),
      best.json is damaged (`best_checkpoint.read_state`), or model_dir's checkpoint is of
      another network (`check_checkpoint_fits`).
  """
  data = config.data
  if config.model.is_model_fn:
    user_model_fn.check_builds(config)
  else:
    check_network(config)
  try:
    if data.modality == 'text' and not data.fake_data and not config.model.is_model_fn:
      tokenizer.check_vocabulary(data.vocab_path, data.vocab_size)
    if config.mode in ('train', 'train_and_eval'):
      best_checkpoint.read_state(config.model_dir)
    if config.mode != 'dry_run':
      check_checkpoint_fits(config)
  except tf.errors.OpError as e:  # storage unreachable or forbidden: the run's own checks
    # (trainer.cloud.gcs_preflight, the TPU and cluster refusals) say so with the fix
    logging.warning('Could not check the inputs in %s before starting (%s).', config.model_dir,
                    str(e).splitlines()[0][:200])


def check_network(config):
  """Builds a user's --network once for training on a batch of 2 in a scratch graph
  (`models.network_contract.check_builds`); the built-in networks are not checked.

  Raises:
    PipelineError: the network does not import or breaks the contract, in one line.
  """
  model = config.model
  if model.is_built_in:
    return
  image_dtype = 'float32' if config.data.image_dtype == 'bfloat16' else config.data.image_dtype
  spec = features_lib.feature_spec(model.modality, 2, image_size=model.image_size,
                                   max_seq_length=model.max_seq_length, image_dtype=image_dtype)
  network_contract.check_builds(networks.network_of(model.model), model.model, spec,
                                model.num_classes, network_params.params_of(model, 'float32'))


def check_checkpoint_fits(config):
  """Compares the newest checkpoint in model_dir (which every mode but dry_run restores) with
  this run's network: the classifier's shape in the checkpoint (tf.train.list_variables reads
  only its index) with --num_classes, then the settings <model_dir>/model_config.json recorded
  with this run's (`NETWORK_FIELDS`). Nothing to compare (no checkpoint, an unreadable one, no
  record) passes: restoring reports those.

  Raises:
    PipelineError: naming the variable and both shapes, or the setting and both values, and what
      to do.
  """
  model_dir = config.model_dir
  prefix = tf.train.latest_checkpoint(model_dir)
  if not prefix:
    return
  try:
    shapes = dict(tf.train.list_variables(prefix))
  except (tf.errors.OpError, ValueError):  # damaged: trainer.run.checkpoints deals with it
    return
  fix = ('Use a new --model_dir for this network, or start it from these weights with '
         '--model_dir=NEW_DIR --init_checkpoint=%s (the classifier is initialised anew where its '
         'shape differs).' % model_dir)
  model = config.model
  for name, shape in sorted(shapes.items(), key=lambda item: (item[0].endswith('bias'), item)):
    if _is_classifier(name, model.classifier_scope) and shape and shape[-1] != model.num_classes:
      raise PipelineError(
          'the checkpoint %s is of another network: its variable %s has shape %s, this network\'s '
          '%s (--num_classes=%d; the checkpoint has %d classes). %s'
          % (prefix, name, list(shape), list(shape[:-1]) + [model.num_classes],
             model.num_classes, shape[-1], fix))
  try:
    recorded = network_record.read(model_dir)
  except PipelineError:  # a damaged record: training writes it again, export_keras refuses it
    return
  if not recorded:
    return
  for field, source in NETWORK_FIELDS:
    if field == 'resnet_depth' and model.model != 'resnet':
      continue
    then, now = getattr(recorded[0], field), getattr(model, field)
    if then != now:
      raise PipelineError(
          'the checkpoint %s is of another network: %s records %s=%s, this run has %s (%s); '
          'its variables have other names or shapes. %s'
          % (prefix, network_record.path(model_dir), field, then, now, source, fix))


def _is_classifier(name, scope):
  """Whether checkpoint variable `name` is a weight of the classifier in variable scope `scope`."""
  parts = name.split('/')
  return (len(parts) >= 2 and parts[-2] == scope and parts[-1] in ('kernel', 'bias') and
          not any(p in name for p in _NOT_WEIGHTS))
