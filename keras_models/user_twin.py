"""The Keras 3 twin of a user's network (docs/your-model.md), named MODULE:CALLABLE:

  keras_network(*, num_classes, params) -> keras.Model

`params` is the dict the TF network of the run got (`models.specs.network_params`); the model
takes `image` (uint8 or float [batch, size, size, 3], 0-255 pixels) or `token_ids` (int32
[batch, max_seq_length]) and returns logits [batch, num_classes]. Its weights load from the run's
checkpoint by name (`keras_models.checkpoint_map`): the Keras weight `<layer name>/<weight name>`
reads the checkpoint tensor of the same name with each '-' of the layer name read as '/' (layer
`block1-depthwise`, weight `kernel`: tensor `block1/depthwise/kernel`).
"""

import keras

from trainer.errors import PipelineError
from trainer.models import user_code
from trainer.models.specs import features as feature_names
from trainer.models.specs import network_params

CONTRACT = 'keras_network(*, num_classes, params) -> keras.Model'


def build_model(spec, config, flag='--keras_network'):
  """The twin `spec` names, built for the run of `config` (a ModelConfig).

  Raises:
    PipelineError: it does not load, does not return a keras.Model, or its input or output does
      not fit the run (image size, sequence length, classes), in one line.
  """
  build = user_code.load(spec, flag, (), dict(num_classes=2, params={}), CONTRACT)
  params = network_params.params_of(config)
  try:
    model = build(num_classes=config.num_classes, params=params)
  except Exception as e:  # pylint: disable=broad-except  # the user's code failed
    raise PipelineError('%s=%s raised %s when built with num_classes=%d and params %s: %s'
                        % (flag, spec, type(e).__name__, config.num_classes, params, e))
  if not isinstance(model, keras.Model):
    raise PipelineError('%s=%s returned %s; the contract is %s.'
                        % (flag, spec, type(model).__name__, CONTRACT))
  if config.modality == 'text':
    want_input, key = (config.max_seq_length,), feature_names.TOKEN_IDS
  else:
    want_input, key = (config.image_size, config.image_size, 3), feature_names.IMAGE
  shapes = [tuple(t.shape[1:]) for t in model.inputs]
  outputs = [tuple(t.shape[1:]) for t in model.outputs]
  if shapes != [want_input]:
    raise PipelineError('%s=%s takes inputs %s; the run\'s network takes one %r input %s.'
                        % (flag, spec, shapes, key, want_input))
  if outputs[:1] != [(config.num_classes,)]:
    raise PipelineError('%s=%s returns %s; the logits must be [batch, %d] (the run\'s classes).'
                        % (flag, spec, outputs, config.num_classes))
  return model
