"""Which TensorFlow build this process runs, and the kernels of that build known to compute wrong
results, with the session setting that keeps a network off them.

intel-tensorflow 1.15 (oneDNN): grappler's remapper fuses Conv2D + BiasAdd + Elu into one oneDNN
convolution whose post-op applies ReLU instead of ELU: every negative pre-activation becomes 0
instead of exp(x) - 1. Intel fixed it for TF 2.1 ("[Intel MKL] Fixing a bug in Elu Op",
tensorflow/tensorflow#34535, cherry-picked to r2.1 as #34654), not in 1.15. Measured here on
intel-tensorflow 1.15.2: a 5x5 convolution with bias and ELU equals ReLU of its pre-activation
exactly (largest difference from ELU 0.9998); with the remapper off, or on tensorflow 1.15.5 and
TF 2.15.1, it equals ELU within 2e-7. The Colab CNN (models/cnn.py) is the network with that
pattern: its predictions on intel-tensorflow differed from the same checkpoint's on
tensorflow 1.15.5 by up to 2.8 in a logit.
"""

from absl import logging
import tensorflow.compat.v1 as tf
from tensorflow.core.protobuf import rewriter_config_pb2

# The networks whose graph has Conv2D -> BiasAdd -> Elu (models/cnn.py: conv2d with activation=elu).
CONV_ELU_NETWORKS = ('cnn',)
_warned = []


def mkl_enabled():
  """Whether this TensorFlow was built with oneDNN (MKL-DNN) kernels (intel-tensorflow 1.15;
  every TF 2.x x86 build reports its oneDNN build too)."""
  try:
    from tensorflow.python.util import _pywrap_util_port  # pylint: disable=g-import-not-at-top
    return bool(_pywrap_util_port.IsMklEnabled())  # TF >= 2.x
  except ImportError:
    from tensorflow.python import pywrap_tensorflow  # pylint: disable=g-import-not-at-top
    return bool(pywrap_tensorflow.IsMklEnabled())  # TF 1.15


def tensorflow_build():
  """The installed TensorFlow distribution: intel-tensorflow, tensorflow-cpu, tensorflow-gpu or
  tensorflow."""
  import pkg_resources  # pylint: disable=g-import-not-at-top  # importlib.metadata needs 3.8
  build = 'tensorflow'
  for name in ('intel-tensorflow', 'tensorflow-cpu', 'tensorflow-gpu'):
    try:
      pkg_resources.get_distribution(name)
      build = name
    except pkg_resources.DistributionNotFound:
      pass
  return build


def fuses_conv_elu_wrongly():
  """True on a oneDNN build of TensorFlow 1.x (the fix came with 2.1)."""
  return tf.__version__.startswith('1.') and mkl_enabled()


def avoid_wrong_kernels(session_config, network):
  """Turns grappler's remapper off in `session_config` (a tf.ConfigProto, changed in place) when
  `network` ('cnn', 'resnet', ...) would otherwise run this build's wrong fused Conv2D + BiasAdd
  + Elu, logging once why. The other graph rewrites stay; the CNN's convolutions run unfused
  (oneDNN's separate convolution, bias and ELU kernels). Returns session_config."""
  # A user's network (MODULE:CALLABLE) may hold the pattern too: its graph is not inspected.
  user_network = bool(network) and ':' in network
  if (network in CONV_ELU_NETWORKS or user_network) and fuses_conv_elu_wrongly():
    session_config.graph_options.rewrite_options.remapping = (
        rewriter_config_pb2.RewriterConfig.OFF)
    if not _warned:
      _warned.append(True)
      logging.warning(
          'intel-tensorflow %s fuses Conv2D + BiasAdd + Elu into a oneDNN convolution that '
          'computes ReLU, not ELU (fixed in TF 2.1: tensorflow/tensorflow#34535): grappler\'s '
          'remapper is off for the %s, whose convolutions then run unfused%s.', tf.__version__,
          network, ' (a network of yours may use ELU)' if user_network else '')
  return session_config
