"""Put on PYTHONPATH, makes every process of Python behave as on a machine where TensorFlow is not
installed (the GPU machines of the Keras trainer's arrays input): `importlib.util.find_spec`
finds no `tensorflow`, and `import tensorflow` raises ModuleNotFoundError."""

import importlib.machinery
import sys


class _PathFinderWithoutTensorFlow(importlib.machinery.PathFinder):
  """The standard path finder, blind to `tensorflow` and its sub-modules."""

  @classmethod
  def find_spec(cls, fullname, path=None, target=None):
    if fullname == 'tensorflow' or fullname.startswith('tensorflow.'):
      return None
    return super().find_spec(fullname, path, target)


sys.meta_path[:] = [_PathFinderWithoutTensorFlow if finder is importlib.machinery.PathFinder
                    else finder for finder in sys.meta_path]
