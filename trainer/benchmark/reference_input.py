"""The Cloud TPU reference ResNet's training input (tensorflow/tpu, branch r1.15,
`models/official/resnet/imagenet_input.py`), loaded from a checkout the user gives, for the
side-by-side input benchmark (`python -m trainer.benchmark input --reference=PATH`).

None of its code is part of this project: PATH is a checkout of tensorflow/tpu (or a copy of its
`models/` folder) outside the repository. It is written for TF 1.x (`import tensorflow as tf`,
`tf.contrib.data`); on TF 2.x it is imported with `tensorflow` standing for `tensorflow.compat.v1`
plus the `tf.contrib.data` functions it calls, which TF 2.x keeps under `tf.data.experimental`
(the same kernels).
"""

import contextlib
import os
import sys
import types

import tensorflow.compat.v1 as tf

from trainer.data import shards
from trainer.errors import PipelineError

_MODULE = 'official.resnet.imagenet_input'


def _models_dir(path):
  """The folder holding `official/resnet/imagenet_input.py` in the checkout at `path`."""
  for candidate in (os.path.join(path, 'models'), path):
    if os.path.exists(os.path.join(candidate, 'official', 'resnet', 'imagenet_input.py')):
      return candidate
  raise PipelineError('--reference=%s holds no models/official/resnet/imagenet_input.py: pass a '
                      'checkout of tensorflow/tpu at branch r1.15 (`git clone -b r1.15 '
                      'https://github.com/tensorflow/tpu`), outside this repository.' % path)


class _CompatV1Module(types.ModuleType):
  """`tensorflow` as TF 1.x code sees it: tensorflow.compat.v1, plus tf.contrib.data."""

  def __init__(self):
    super(_CompatV1Module, self).__init__('tensorflow')
    experimental = tf.data.experimental
    self.contrib = types.SimpleNamespace(data=types.SimpleNamespace(
        map_and_batch=experimental.map_and_batch,
        parallel_interleave=experimental.parallel_interleave,
        shuffle_and_repeat=experimental.shuffle_and_repeat,
        AUTOTUNE=experimental.AUTOTUNE))

  def __getattr__(self, name):
    return getattr(tf, name)


@contextlib.contextmanager
def _tensorflow_for_tf1_code():
  """While importing the reference: on TF 2.x, `import tensorflow` gives _CompatV1Module."""
  if hasattr(tf, 'contrib'):  # TF 1.x: the reference runs as it is
    yield
    return
  saved = sys.modules['tensorflow']
  sys.modules['tensorflow'] = _CompatV1Module()
  try:
    yield
  finally:
    sys.modules['tensorflow'] = saved


def load_imagenet_input(path):
  """The reference's `ImageNetInput` class from the tensorflow/tpu checkout at `path`.

  Raises:
    PipelineError: `path` is not such a checkout.
  """
  models_dir = _models_dir(path)
  if models_dir not in sys.path:
    sys.path.insert(0, models_dir)
  with _tensorflow_for_tf1_code():
    module = __import__(_MODULE, fromlist=['ImageNetInput'])
  return module.ImageNetInput


def check_reference(path, data):
  """Refuses a `path` without the reference, or `data` (a DataConfig) whose training shards the
  reference would not find: it reads `<data_dir>/train-*` (this project's default pattern).

  Raises:
    PipelineError: either.
  """
  load_imagenet_input(path)
  if data.train_pattern != shards.TRAIN_PATTERN:
    raise PipelineError('the reference reads <data_dir>/train-*, but this dataset\'s training '
                        'shards are %s: compare on data with the default shard names.'
                        % data.train_pattern)


def reference_train_dataset(path, data_dir, image_size, batch_size):
  """The reference's training input_fn dataset on one host: JPEG records of `data_dir`,
  random-resized crop (bicubic), flip, no transpose; float32 images and no cache (r1.15's
  resnet_main.py defaults to bfloat16 and, in its ImageNet config, caching: both would change what
  is compared, so they are off here).
  Returns a tf.data.Dataset of (images float32 [batch, size, size, 3], labels int32 [batch])."""
  imagenet_input = load_imagenet_input(path)
  reference = imagenet_input(is_training=True, use_bfloat16=False, transpose_input=False,
                             data_dir=data_dir, image_size=image_size)
  return reference.input_fn({'batch_size': batch_size})
