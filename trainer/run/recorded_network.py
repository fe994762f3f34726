"""A run remembers its network: the flags that shape the network (--model or --network and its
--network_params, --resnet_depth,
--num_classes, --image_size, the BiLSTM's sizes) default to what the run recorded in
<model_dir>/model_config.json (`trainer.run.network_record`, written when training starts), so
`--mode=eval`, `--mode=predict`, a dry run and a resumed training need only --model_dir. A flag
given on the command line that disagrees with the record is refused, naming the flag, both
values and the record: the checkpoint's weights only fit the recorded network.

A warm start (--init_checkpoint of a run of this pipeline) takes the backbone's settings (network
and sizes, not the classes or image size, which follow the new data) from that run's record the
same way.
"""

import types

from absl import logging
import tensorflow.compat.v1 as tf

from trainer.errors import PipelineError
from trainer.models import recipes
from trainer.models.model_config import MODELS
from trainer.models.model_config import TEXT_MODELS
from trainer.run import network_record

# flag -> the networks it shapes (None: every network).
NETWORK_FLAGS = {
    'model': None,
    'network_params': 'user',
    'resnet_depth': ('resnet',),
    'num_classes': None,
    'image_size': 'image',
    'max_seq_length': tuple(TEXT_MODELS),
    'embedding_dim': tuple(TEXT_MODELS),
    'lstm_hidden_units': tuple(TEXT_MODELS),
    'lstm_layers': tuple(TEXT_MODELS),
    'lstm_pooling': tuple(TEXT_MODELS),
}
# What a warm start inherits: the backbone, not the classifier's width or the input size.
BACKBONE_FLAGS = ('model', 'network_params', 'resnet_depth', 'embedding_dim',
                  'lstm_hidden_units', 'lstm_layers', 'lstm_pooling')
_RESUMING_MODES = ('train', 'train_and_eval', 'eval', 'predict', 'dry_run')


def _shapes(name, model):
  networks = NETWORK_FLAGS[name]
  if networks is None:
    return True
  if networks == 'image':
    return model not in TEXT_MODELS
  if networks == 'user':
    return model not in MODELS
  return model in networks


def _apply(f, given, recorded, names, record_path, fix):
  """`f` with each flag of `names` that `recorded` (a ModelConfig) shapes set from it; a given
  flag that disagrees is refused with `fix`."""
  values = {}
  model = recorded.model
  for name in names:
    if not _shapes(name, model):
      continue
    then = getattr(recorded, name)
    if name in given and getattr(f, name) is not None and getattr(f, name) != then:
      # A user network is given as --network (f.model holds its MODULE:CALLABLE).
      flag = 'network' if name == 'model' and getattr(f, name) not in MODELS else name
      raise PipelineError(
          '--%s=%s disagrees with the network recorded in %s (%s=%s). %s'
          % (flag, getattr(f, name), record_path, name, then, fix % {'flag': '--' + flag}))
    values[name] = then
  return types.SimpleNamespace(**dict(vars(f), **values))


def _record_of_checkpoint(init_checkpoint):
  """The record of the run that wrote `init_checkpoint` (its directory, or the prefix's), or
  None."""
  try:
    directory = (init_checkpoint if tf.io.gfile.isdir(init_checkpoint)
                 else init_checkpoint.rstrip('/').rpartition('/')[0])
  except tf.errors.OpError:
    return None, None  # storage refused or unreachable: the gs:// check reports it
  record = _read_record(directory) if directory else None
  return (record[0] if record else None), directory and network_record.path(directory)


def _read_record(directory):
  """network_record.read(directory), or None with a warning when the storage refuses or does
  not answer (the gs:// check of the run reports that with what to do)."""
  try:
    return network_record.read(directory)
  except tf.errors.OpError as e:
    logging.warning('Could not read the network record in %s (%s): the network flags are used '
                    'as given.', directory, str(e).split('\n')[0][:200])
    return None


def with_recorded_network(f, given, model_dir):
  """`f` (the flags as a namespace) with the network flags the user did not give taken from the
  record of `model_dir` (every mode) and, in a warm start, the backbone flags from the record of
  the --init_checkpoint's run.

  Args:
    f: types.SimpleNamespace of the flag values.
    given: the names of the flags given on the command line (absl's `.present`); None: take
      nothing from records (callers that build a config from defaults, e.g. benchmarks).
    model_dir: str, the run's model_dir (local or gs://).

  Returns:
    types.SimpleNamespace: `f` with the recorded values.

  Raises:
    PipelineError: a given network flag disagrees with a record (naming the flag, both values,
      the record and what to do), or a record cannot be read.
  """
  if given is None or f.mode not in _RESUMING_MODES:
    return f
  record = _read_record(model_dir) if model_dir else None
  if record and record[0].is_model_fn:
    raise PipelineError(
        '%s records a legacy job (--model_fn=%s --input_fn=%s): pass both again to run on it.'
        % (network_record.path(model_dir), record[0].model, record[0].input_fn))
  if record:
    # The recipe the run trained with (a --recipe or optimizer flags of its own), for the flags
    # not given again: what evaluation restores (the moving average) and training resumes.
    f = types.SimpleNamespace(**dict(vars(f), recorded_recipe={
        name: getattr(record[0], name) for name in recipes.RECIPE_FIELDS}))
    f = _apply(f, given, record[0], NETWORK_FLAGS, network_record.path(model_dir),
               'Leave %(flag)s out to use the recorded network, or use a new --model_dir for '
               'another network (--init_checkpoint=' + model_dir + ' starts it from these '
               'weights).')
  elif f.init_checkpoint and f.mode in ('train', 'train_and_eval'):
    recorded, record_path = _record_of_checkpoint(f.init_checkpoint)
    if recorded:
      f = _apply(f, given, recorded, BACKBONE_FLAGS, record_path,
                 "--init_checkpoint's weights only fit that network: leave %(flag)s out, or "
                 'start from a checkpoint of this network.')
  return f
