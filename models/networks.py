"""The four built-in networks, registered through the network contract (`models.network_contract`)
that a user's own network meets too, and the lookup of a config's network: a built-in name
('resnet', 'inception_v3', 'cnn', 'bilstm') or a user's MODULE:CALLABLE.

Each built-in reads its sizes from params (`models.specs.network_params.params_of`), which the run
fills from its ModelConfig.
"""

import tensorflow.compat.v1 as tf

from trainer.models import bilstm as bilstm_lib
from trainer.models import cnn as cnn_lib
from trainer.models import features as features_lib
from trainer.models import inception_v3 as inception_v3_lib
from trainer.models import network_contract
from trainer.models import resnet as resnet_lib


def _images(features, params):
  """The normalized images of `features` in the compute dtype of params."""
  images = network_contract.normalize_images(
      features[features_lib.IMAGE], params['mean_rgb'], params['stddev_rgb'])
  return tf.cast(images, network_contract.compute_dtype(params))


def resnet(features, *, is_training, num_classes, params):
  """ResNet v1.5 (`models.resnet`) of depth params['depth']."""
  return resnet_lib.resnet_v1_5(_images(features, params), params['depth'], num_classes,
                                is_training)


def inception_v3(features, *, is_training, num_classes, params):
  """InceptionV3 (`models.inception_v3`): (logits, aux_logits)."""
  return inception_v3_lib.inception_v3(_images(features, params), num_classes, is_training)


def cnn(features, *, is_training, num_classes, params):
  """The Colab Fashion-MNIST CNN (`models.cnn`)."""
  return cnn_lib.cnn(_images(features, params), num_classes, is_training)


def bilstm(features, *, is_training, num_classes, params):
  """The BiLSTM text classifier (`models.bilstm`); sizes in params."""
  return bilstm_lib.bilstm(
      features[features_lib.TOKEN_IDS], features[features_lib.LENGTH], params['vocab_size'],
      num_classes, is_training, embedding_dim=params['embedding_dim'],
      hidden_units=params['hidden_units'], num_layers=params['num_layers'],
      pooling=params['pooling'], dropout_rate=params['dropout_rate'],
      compute_dtype=network_contract.compute_dtype(params))


BUILT_IN = {'resnet': resnet, 'inception_v3': inception_v3, 'cnn': cnn, 'bilstm': bilstm}
_loaded = {}


def network_of(model):
  """The network callable of ModelConfig.model: a built-in, or the user's MODULE:CALLABLE
  (imported once per process).

  Raises:
    PipelineError: a user network that does not load (`models.network_contract.load`).
  """
  if model in BUILT_IN:
    return BUILT_IN[model]
  if model not in _loaded:
    _loaded[model] = network_contract.load(model)
  return _loaded[model]
