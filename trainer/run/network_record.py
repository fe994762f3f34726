"""The record of the network a run trains: <model_dir>/model_config.json, written by
`trainer.run.driver` when a training run starts (train, train_and_eval; on the chief of a TF_CONFIG
cluster), so tools that rebuild the network outside Estimator (`trainer.export_keras`) need not be
told its settings again:

  {"data": <trainer.data.data_config.DataConfig as a dict>, "format": 1,
   "model": <models.model_config.ModelConfig as a dict>}

Keys sorted, tuples as JSON lists. This module imports no tf.estimator and no network code beyond
the two config modules: the Keras 3 runtime (TF 2.21, without tf.estimator) imports it too.
"""

import dataclasses

from absl import logging
import tensorflow.compat.v1 as tf

from trainer.data.data_config import DataConfig
from trainer.errors import PipelineError
from trainer.models.model_config import ModelConfig
from trainer.storage import json_files

FILE = 'model_config.json'
FORMAT = 1  # the layout above; a reader refuses a higher one
_SECTIONS = (('model', ModelConfig), ('data', DataConfig))


def path(model_dir):
  """<model_dir>/model_config.json, for a local or gs:// model_dir (str)."""
  return '%s/%s' % (model_dir.rstrip('/'), FILE)


def write(model_dir, config):
  """Writes the network record of `config` into model_dir, replacing any earlier one.

  Args:
    model_dir: str, the run's directory (local or gs://); created when missing.
    config: the run's `trainer.run.run_config.Config`; its `model` (ModelConfig) and `data`
      (DataConfig) are recorded.

  Raises:
    tf.errors.OpError: model_dir cannot be written.
  """
  record = {'format': FORMAT}
  for section, _ in _SECTIONS:
    record[section] = dataclasses.asdict(getattr(config, section))
  tf.io.gfile.makedirs(model_dir)
  json_files.write(path(model_dir), record)
  logging.info('Recorded the network in %s', path(model_dir))


def read(model_dir):
  """The network record of the run in model_dir.

  Args:
    model_dir: str, the run's directory (local or gs://).

  Returns:
    (ModelConfig, DataConfig) as written, the tuple-typed fields (mean_rgb, stddev_rgb,
    lr_decay_epochs) as tuples; None when model_dir holds no model_config.json (runs of earlier
    versions). Settings this version does not know (a newer writer) are dropped with a warning
    naming them.

  Raises:
    PipelineError: the file is not a record this version can read (not JSON, a newer format, a
      section or required setting missing, a value the config refuses), naming the file and what
      to do.
    tf.errors.OpError: the file cannot be read (permissions, storage).
  """
  file_path = path(model_dir)
  try:
    record = json_files.read(file_path)
    if record is json_files.MISSING:
      return None
    if not isinstance(record, dict):
      raise ValueError('not a JSON object')
    version = record.get('format')
    if isinstance(version, int) and version > FORMAT:
      raise PipelineError(
          '%s is a network record of format %d, written by a newer version of this pipeline; '
          'this one reads format %d: use the newer version, or delete it and pass the '
          "network's settings as flags." % (file_path, version, FORMAT))
    if version != FORMAT:
      raise ValueError('"format" is %r, not %d' % (version, FORMAT))
    _warn_unknown(file_path, '', set(record) - {'format'} - {s for s, _ in _SECTIONS})
    return tuple(_config(cls, record.get(section), section, file_path)
                 for section, cls in _SECTIONS)
  except (ValueError, TypeError) as e:  # json's errors and UnicodeDecodeError are ValueErrors
    raise PipelineError(
        '%s is not a network record of this pipeline (%s): restore it from the run (training on '
        "in its model_dir writes it again), or delete it and pass the network's settings as "
        'flags.' % (file_path, e))


def _config(cls, values, section, file_path):
  """cls (ModelConfig or DataConfig) built from the record's dict `values`.

  Raises:
    ValueError, TypeError: `values` is not a dict, lacks a required field, or holds a value cls
      refuses.
  """
  if values is None:
    raise ValueError('no "%s" section' % section)
  if not isinstance(values, dict):
    raise ValueError('"%s" is not a JSON object' % section)
  fields = {field.name: field for field in dataclasses.fields(cls)}
  _warn_unknown(file_path, section + '.', set(values) - set(fields))
  kwargs = {}
  for name, value in values.items():
    if name in fields:
      kwargs[name] = tuple(value) if _is_tuple(fields[name]) and isinstance(value, list) else value
  try:
    return cls(**kwargs)
  except TypeError as e:  # a required field missing
    raise TypeError('"%s": %s' % (section, e))
  except ValueError as e:  # the config's own checks
    raise ValueError('"%s": %s' % (section, e))


def _is_tuple(field):
  """Whether a dataclass field is typed Tuple[...] (also with postponed annotations)."""
  return (getattr(field.type, '__origin__', None) is tuple or
          str(field.type).startswith(('Tuple', 'tuple', 'typing.Tuple')))


def _warn_unknown(file_path, prefix, names):
  if names:
    logging.warning('%s: ignoring settings this version does not know (written by a newer '
                    'version?): %s', file_path, ', '.join(prefix + n for n in sorted(names)))
