"""Put on PYTHONPATH, makes `import tensorflow` fail in every process as on a machine where
TensorFlow is not installed (the GPU machines of the Keras trainer's arrays input)."""

import importlib.abc
import sys


class _NoTensorFlow(importlib.abc.MetaPathFinder):

  def find_spec(self, name, path=None, target=None):
    del path, target
    if name == 'tensorflow' or name.startswith('tensorflow.'):
      raise ModuleNotFoundError('No module named %r (tests/without_tensorflow)' % name,
                                name=name)
    return None


sys.meta_path.insert(0, _NoTensorFlow())
