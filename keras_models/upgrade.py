"""Upgrades a .keras file of this pipeline written with the old layer names ('block1.conv2d', the
TF1 scope separator '.') to the current ones ('block1-conv2d', `layers.SCOPE_SEPARATOR`).

The torch backend cannot load the old names (torch.nn.ParameterDict refuses keys with '.'); the
TensorFlow and JAX backends load both. Only the architecture (config.json in the .keras zip) names
layers: the weights (model.weights.h5) are stored by position ('layers/conv2d_1/vars/0'), not by
layer name, so they are copied byte for byte and the upgraded model computes exactly the same.
"""

import io
import json
import zipfile

import tensorflow as tf

from trainer.keras_models import layers as layers_lib

_CONFIG = 'config.json'


class NotAKerasFile(ValueError):
  """The file is not a Keras 3 .keras archive of a functional model."""


def _layer_names(config):
  """The names of the functional model's layers in the parsed config.json."""
  try:
    return [layer['config']['name'] for layer in config['config']['layers']]
  except (KeyError, TypeError):
    raise NotAKerasFile('its config.json describes no functional model (no config.layers)')


def _renamed(value, renames):
  """`value` (parsed JSON) with every string equal to a key of `renames` replaced."""
  if isinstance(value, str):
    return renames.get(value, value)
  if isinstance(value, list):
    return [_renamed(v, renames) for v in value]
  if isinstance(value, dict):
    return {k: _renamed(v, renames) for k, v in value.items()}
  return value


def upgrade_config(config):
  """The config with the legacy layer names renamed.

  Args:
    config: dict, the parsed config.json of a .keras file (a keras_models.build model).

  Returns:
    (new config dict, {old name: new name}); the map is empty for a config already current.

  Raises:
    NotAKerasFile: not a functional model's config, or a renamed layer would clash with another.
  """
  names = _layer_names(config)
  renames = {n: n.replace(layers_lib.LEGACY_SCOPE_SEPARATOR, layers_lib.SCOPE_SEPARATOR)
             for n in names if layers_lib.LEGACY_SCOPE_SEPARATOR in n}
  clashes = sorted(set(renames.values()) & set(names))
  if clashes:
    raise NotAKerasFile('renaming its layers would give two layers the name %s' % clashes[0])
  return (_renamed(config, renames) if renames else config), renames


def upgrade(source, destination):
  """Writes the .keras file `source` with current layer names to `destination`.

  Args:
    source: path (local or gs://) of a .keras file.
    destination: path of the file to write (its directory must exist; not checked here).

  Returns:
    int: the number of layers renamed (0: `source` was current; the copy is written anyway).

  Raises:
    NotAKerasFile: `source` is not a .keras archive with a functional model's config.json.
    OSError / tf.errors.OpError: reading or writing failed.
  """
  with tf.io.gfile.GFile(source, 'rb') as f:
    data = f.read()
  try:
    archive = zipfile.ZipFile(io.BytesIO(data))
    config = json.loads(archive.read(_CONFIG))
  except (zipfile.BadZipFile, KeyError, ValueError) as e:
    raise NotAKerasFile('not a .keras archive with a %s (%s)' % (_CONFIG, e))
  config, renames = upgrade_config(config)
  out = io.BytesIO()
  with zipfile.ZipFile(out, 'w') as written:
    for info in archive.infolist():
      content = archive.read(info.filename)
      if info.filename == _CONFIG:
        content = json.dumps(config).encode('utf-8')
      written.writestr(info, content)
  with tf.io.gfile.GFile(destination, 'wb') as f:
    f.write(out.getvalue())
  return len(renames)
