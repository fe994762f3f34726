"""The params dict every network is called with (the network contract, models/network_contract.py),
built from a run's ModelConfig without TensorFlow: the TF1 network (models/networks.py) and a
Keras 3 twin (keras_models/user_twin.py) of the same run get the same dict.

  'precision'                     'float32' or 'bfloat16'
  images: 'image_size'            int, pixels
          'mean_rgb', 'stddev_rgb'  3 floats each, the data set's statistics (0-255 scale)
  text:   'vocab_size', 'max_seq_length'  ints
  + a built-in network's sizes (BUILT_IN_PARAMS), or a user network's --network_params.
"""

import json

from trainer.errors import PipelineError

RUN_KEYS = ('precision', 'image_size', 'mean_rgb', 'stddev_rgb', 'vocab_size', 'max_seq_length')
# What each built-in reads from its ModelConfig: params key -> ModelConfig field.
BUILT_IN_PARAMS = {
    'resnet': {'depth': 'resnet_depth'},
    'inception_v3': {},
    'cnn': {},
    'bilstm': {'embedding_dim': 'embedding_dim', 'hidden_units': 'lstm_hidden_units',
               'num_layers': 'lstm_layers', 'pooling': 'lstm_pooling',
               'dropout_rate': 'dropout_rate'},
}


def user_params(network_params, flag='--network_params'):
  """The dict of a --network_params JSON object ('' -> {}).

  Raises:
    PipelineError: not a JSON object, or it sets one of RUN_KEYS (the run gives those).
  """
  if not network_params:
    return {}
  try:
    value = json.loads(network_params)
  except ValueError as e:
    raise PipelineError('%s is not JSON (%s): pass an object such as %s=\'{"width": 0.5}\'.'
                        % (flag, e, flag))
  if not isinstance(value, dict):
    raise PipelineError('%s must be a JSON object (name: value), got %s.' % (flag, network_params))
  taken = sorted(set(value) & set(RUN_KEYS))
  if taken:
    raise PipelineError('%s sets %s, which the run passes to the network itself (from the data '
                        'and --precision): drop %s.' % (flag, ', '.join(taken), ', '.join(taken)))
  return value


def params_of(config, precision=None):
  """The params dict of `config` (a `models.model_config.ModelConfig`).

  Args:
    config: the run's ModelConfig.
    precision: overrides config.precision (the CPU graphs of a TPU run are float32). Off TPU
      the network is built in float32 whatever config.precision says: bfloat16 there is a
      rewrite of that graph (trainer/run/cpu_bfloat16.py).
  """
  params = {'precision': precision or (config.precision if config.use_tpu else 'float32')}
  if config.modality == 'text':
    params.update(vocab_size=config.vocab_size, max_seq_length=config.max_seq_length)
  else:
    params.update(image_size=config.image_size, mean_rgb=list(config.mean_rgb),
                  stddev_rgb=list(config.stddev_rgb))
  if config.model in BUILT_IN_PARAMS:
    params.update({key: getattr(config, field)
                   for key, field in BUILT_IN_PARAMS[config.model].items()})
  else:
    params.update(json.loads(config.network_params or '{}'))
  return params
