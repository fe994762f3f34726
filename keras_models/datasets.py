"""This pipeline's input (trainer.data.input_fn: the same records, preprocessing and
augmentation) as the (inputs, labels[, sample weights]) batches Keras' fit and evaluate take."""

from trainer.data import arrays
from trainer.data import data_config as data_config_lib
from trainer.data import dataset_json
from trainer.data import input_fn as input_fn_lib
from trainer.errors import PipelineError
from trainer.keras_models import build
from trainer.models import features as features_lib


def data_config(data_dir, input_shape, seed=0, **preprocessing_overrides):
  """The DataConfig of `data_dir` (its dataset.json) for a model taking `input_shape`.

  Args:
    data_dir: directory of TFRecords written by `trainer.prepare`, with dataset.json.
    input_shape: the model's input shape without the batch: (size, size, 3) for images,
      (max_seq_length,) for token ids.
    seed: keys the training shuffles and augmentation.
    **preprocessing_overrides: DataConfig preprocessing fields (e.g. crop_padding) to use instead
      of dataset.json's.

  Raises:
    PipelineError: no dataset.json, arrays instead of TFRecords, or data the model cannot take.
  """
  info = dataset_json.read(data_dir)
  if not info:
    raise PipelineError('%s has no dataset.json: prepare the data with `python -m '
                        'trainer.prepare`.' % data_dir)
  arrays.check_not_arrays(data_dir, info)
  build.check_data_fits(data_dir, info, input_shape)
  return data_config_lib.from_dataset_json(data_dir, info, input_shape[0], seed,
                                           **preprocessing_overrides)


def _model_input(data):
  return features_lib.TOKEN_IDS if data.modality == 'text' else features_lib.IMAGE


def train_dataset(data, batch_size):
  """Endless shuffled, augmented training batches: (inputs, labels int32 [batch_size])."""
  key = _model_input(data)
  dataset = input_fn_lib.input_fn_builder(data, True)({'batch_size': batch_size})
  return dataset.map(lambda features, labels: (features[key], labels))


def eval_dataset(data, batch_size):
  """Every evaluation example once, in file order: (inputs, labels) batches of batch_size, the
  last one smaller. (The input_fn pads the last batch with mask-0 examples for TPUs; they are
  dropped here, as a Keras loss would count them in its mean.)"""
  key = _model_input(data)
  dataset = input_fn_lib.input_fn_builder(data, False, global_batch_size=batch_size)(
      {'batch_size': batch_size})
  dataset = dataset.unbatch().filter(lambda features, labels: features[features_lib.MASK] > 0)
  return dataset.map(lambda features, labels: (features[key], labels)).batch(batch_size)
