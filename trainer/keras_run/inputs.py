"""The training and evaluation input of a Keras 3 run (`trainer.keras_run.job`), from one of two
sources with the same interface:
  TFRecordInput  the pipeline's TFRecords through tf.data (keras_models/datasets.py: the
                 pipeline's preprocessing and augmentation);
  ArrayInput     a data directory of `trainer.prepare arrays` (trainer/data/arrays.py), read with
                 NumPy: no TensorFlow needed.
Each has num_classes, num_train_examples, kind ('tfrecord' or 'arrays'), config (the DataConfig
of the serving export, or None), train(model, batch_size, first) (what `fit` takes: batches from
the run's batch number `first` on, with one-hot targets) and evaluation(batch_size) (NumPy
(inputs, int labels) batches of every evaluation example once).
"""

import keras
from keras import tree
import numpy as np

from trainer.data import arrays
from trainer.data import dataset_json
from trainer.errors import PipelineError
from trainer.keras_models import build
from trainer.keras_run import recipe


class TFRecordInput:
  """The pipeline's TFRecords through tf.data (the pipeline's preprocessing and augmentation)."""
  kind = dataset_json.TFRECORD_FORMAT

  def __init__(self, config, input_shape, under_strategy=False):
    # Imported here: tf.data is needed for TFRecords alone, so arrays run without TensorFlow.
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    from trainer.data import input_fn  # pylint: disable=g-import-not-at-top
    from trainer.keras_models import datasets  # pylint: disable=g-import-not-at-top
    self._tf = tf
    self._datasets = datasets
    self._input_fn = input_fn
    self._under_strategy = under_strategy
    overrides = {'cache_decoded': config.cache_decoded}
    if config.crop_padding is not None:
      overrides['crop_padding'] = config.crop_padding
    self.config = datasets.data_config(config.data_dir, input_shape, config.seed, **overrides)
    self.num_classes = self.config.num_classes
    self.num_train_examples = self.config.num_train_examples
    self._as_dataset = keras.backend.backend() == 'tensorflow'
    self._multi_host = config.multi_host

  def train(self, model, batch_size, first):
    # A new dataset object per fit call: a second iterator of the same one would draw another
    # shuffle order (tf.data reshuffles per iteration), not continue the run's.
    def stream(_=None):
      return recipe.one_hot_labels(model, self._datasets.train_dataset(self.config, batch_size),
                                   self.num_classes).skip(first)
    if self._under_strategy:
      # Keras' `fit` under a strategy builds the model from a batch of a first iteration, then
      # trains on a second, which raced the first for the shuffles' seeds (BENCHMARKS.md,
      # "Resuming under MirroredStrategy"). Inside flat_map each iteration has its own pipeline;
      # an inner dataset's options are not applied, so the outer one gets them.
      return self._input_fn.with_host_options(
          self._tf.data.Dataset.from_tensors(0).flat_map(stream))
    dataset = stream()
    if self._as_dataset:
      return dataset
    if self._multi_host:
      dataset = _process_share(dataset, batch_size)
    return _copied(dataset)

  def evaluation(self, batch_size):
    return self._datasets.eval_dataset(self.config, batch_size).as_numpy_iterator()


class ArrayInput:
  """A data directory of `trainer.prepare arrays` (trainer/data/arrays.py): no TensorFlow. Each
  process of a multi-process run loads the arrays whole (they are for data sets that fit in
  memory) and trains on its share of every global batch."""
  kind = arrays.FORMAT
  config = None

  def __init__(self, config, info, input_shape, under_strategy=False):
    build.check_data_fits(config.data_dir, info, input_shape)
    self._under_strategy = under_strategy
    if config.crop_padding:
      raise PipelineError('--crop_padding=%d: %s holds arrays, preprocessed once without a crop '
                          'offset; train from the TFRecords (%s) to augment.'
                          % (config.crop_padding, config.data_dir, info.get('source')))
    size = info.get('image_size')
    if len(input_shape) == 3 and size != input_shape[0]:
      raise PipelineError('the model takes %d px images, the arrays in %s are %s px: write them '
                          'at %d px (trainer.prepare arrays --image_size=%d) or train at %s.'
                          % (input_shape[0], config.data_dir, size, input_shape[0], input_shape[0],
                             size))
    self.num_classes = info['num_classes']
    self.num_train_examples = info['num_train_examples']
    self._train = arrays.load(config.data_dir, info, True)
    self._eval = arrays.load(config.data_dir, info, False)
    self._seed = config.seed
    self._multi_host = config.multi_host

  def train(self, model, batch_size, first):
    rows = slice(None)
    if self._multi_host:  # examples [p B/P, (p+1) B/P) of each batch, as `_process_share`
      index, count = _process_of(batch_size)
      rows = slice(index * batch_size // count, (index + 1) * batch_size // count)
    stream = arrays.TrainBatches(*self._train, batch_size, self._seed)

    def batches():
      return recipe.one_hot_batches(model, stream.batches(first, rows), self.num_classes)
    if self._under_strategy:
      # Keras' first batch under a strategy comes from an iteration of its own (TFRecordInput):
      # from a generator function, each iteration begins the stream at `first` again.
      import tensorflow as tf  # pylint: disable=g-import-not-at-top
      spec = tree.map_structure(lambda a: tf.TensorSpec(a.shape, a.dtype), next(batches()))
      return tf.data.Dataset.from_generator(batches, output_signature=spec).prefetch(
          tf.data.AUTOTUNE)
    return batches()

  def evaluation(self, batch_size):
    return arrays.eval_batches(*self._eval, batch_size)


def _process_share(dataset, batch_size):
  """This process's part of every global batch of `dataset` in a multi-process JAX run: process
  p of P reads examples [p B/P, (p+1) B/P) of each batch of B, the split keras.distribution's
  DataParallel.distribute_dataset makes (rebatch, then shard), which Keras' JAX trainer assembles
  into the global batch (jax.make_array_from_process_local_data). Given to `fit` as batches of
  one iterator (`_copied`), not as a dataset that Keras would iterate anew at every logged
  period: every process reads one stream in order, the stream one process reads whole.

  Raises:
    PipelineError: a batch the processes cannot share evenly.
  """
  index, processes = _process_of(batch_size)
  return dataset.rebatch(batch_size // processes).shard(processes, index)


def _process_of(batch_size):
  """(this process's index, the number of processes) of a multi-process JAX run.

  Raises:
    PipelineError: a batch the processes cannot share evenly.
  """
  import jax  # pylint: disable=g-import-not-at-top
  processes, index = jax.process_count(), jax.process_index()
  if batch_size % processes:
    raise PipelineError('--train_batch_size=%d does not split over the %d processes of the run.'
                        % (batch_size, processes))
  return index, processes


def _copied(dataset):
  """The NumPy batches of a tf.data `dataset` from one iterator, each array copied.

  Given the dataset itself, Keras' JAX and PyTorch trainers begin a new iteration of it at each
  "epoch" of `fit` (each logged period of a run), and a training dataset reshuffles per
  iteration: measured here, 3 periods of 2 steps trained on other images than the stream's first
  6 batches; with two JAX devices on a loaded CPU one run in three also trained on other batches
  than the rest. A generator over one iterator, its arrays copied out of tf.data's buffers, gives
  them the stream's batches in order. The TensorFlow trainer iterates a dataset once per `fit`
  on one device (twice under a strategy: TFRecordInput.train) and takes it as it is.
  """
  for batch in dataset.as_numpy_iterator():
    yield tree.map_structure(np.array, batch)


def input_of(config, info, input_shape, under_strategy=False):
  """The input of a run of `config` (trainer.keras_run.run_config.KerasRunConfig) from
  config.data_dir (its dataset.json `info`) for a model taking `input_shape` (without the
  batch); `under_strategy`: the model trains under a tf.distribute strategy.

  Raises:
    PipelineError: data the model cannot take, or flags the data cannot honour.
  """
  if arrays.is_arrays(info):
    return ArrayInput(config, info, input_shape, under_strategy)
  return TFRecordInput(config, input_shape, under_strategy)
