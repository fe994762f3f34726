"""This pipeline's input (trainer.data.input_fn: the same records, preprocessing and
augmentation) as the (inputs, labels[, sample weights]) batches Keras' fit and evaluate take."""

from models import features as features_lib
from trainer.data import dataset_json
from trainer.data import input_fn as input_fn_lib
from trainer.data.data_config import DataConfig
from trainer.errors import PipelineError

_PREPROCESSING = ('train_crop', 'crop_padding', 'eval_crop_fraction', 'random_flip',
                  'color_distortion')


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
    PipelineError: no dataset.json, or data the model cannot take.
  """
  info = dataset_json.read(data_dir)
  if not info:
    raise PipelineError('%s has no dataset.json: prepare the data with `python -m '
                        'trainer.prepare`.' % data_dir)
  modality = info.get('modality', 'image')
  if (modality == 'text') != (len(input_shape) == 1):
    raise PipelineError('%s holds %s data; the model takes %s.' % (
        data_dir, modality, 'token ids' if len(input_shape) == 1 else 'images'))
  if modality == 'text' and input_shape[0] != info['max_seq_length']:
    raise PipelineError('the model takes %d tokens, %s has max_seq_length %d.'
                        % (input_shape[0], data_dir, info['max_seq_length']))
  preprocessing = {k: v for k, v in info.get('preprocessing', {}).items() if k in _PREPROCESSING}
  preprocessing.update(preprocessing_overrides)
  return DataConfig(
      data_dir=data_dir, num_classes=info['num_classes'], label_offset=info.get('label_offset', 0),
      num_train_examples=info['num_train_examples'],
      num_eval_examples=info['num_eval_examples'],
      image_size=input_shape[0] if modality == 'image' else 0,
      train_pattern=info.get('train_pattern', DataConfig.train_pattern),
      eval_pattern=info.get('eval_pattern', DataConfig.eval_pattern), modality=modality,
      max_seq_length=info.get('max_seq_length', 0), vocab_size=info.get('vocab_size', 0),
      vocab_file=info.get('vocab_file', DataConfig.vocab_file), seed=seed, **preprocessing)


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
