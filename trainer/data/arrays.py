"""Preprocessed examples as NumPy arrays: the input of `trainer.train_keras` where TensorFlow
(and so tf.data) is not installed, such as a GPU machine with JAX or PyTorch alone.

`python -m trainer.prepare arrays` writes them from a TFRecord data directory with the pipeline's
own preprocessing (trainer/prepare/arrays.py), for recipes whose training preprocessing is not
random (make train's: no flip, no crop offset), so that one stored view of each image is what
tf.data would give at every epoch. The directory holds:

  dataset.json    the source's, with "format": "arrays" and the preprocessing applied;
  train.npz       inputs: uint8 [N, size, size, 3] (0-255, not normalized: the model normalizes;
                  [N, size, size, 1] for grey images, whose three channels are equal: `load`
                  repeats it) or int32 [N, max_seq_length] token ids; labels: int32 [N] in
                  [0, num_classes);
  validation.npz  the same for the evaluation split, in the order the pipeline's evaluation
                  reads the source's shards.

Training reads an endless stream of batches: epoch e is the permutation of the N examples drawn
by NumPy's Generator seeded with (seed, e), the epochs follow each other without a gap, and a
batch may take the last examples of one epoch and the first of the next; so batch b is a function
of (seed, b) alone and a resumed run reads the batches an uninterrupted run reads.
"""

import zipfile

import numpy as np

from trainer.data import dataset_json
from trainer.errors import PipelineError
from trainer.storage import gfile

FORMAT = dataset_json.ARRAYS_FORMAT
TRAIN_FILE = 'train.npz'
EVAL_FILE = 'validation.npz'
INPUTS = 'inputs'
LABELS = 'labels'


def is_arrays(info):
  """Whether dataset.json `info` describes an arrays directory (not TFRecord shards)."""
  return info.get('format') == FORMAT


def check_not_arrays(data_dir, info):
  """Refuses an arrays directory where TFRecords are read (`trainer.main`, tf.data in
  `keras_models.datasets`): `data_dir` and its dataset.json `info`.

  Raises:
    PipelineError: naming the TFRecord directory the arrays came from.
  """
  if is_arrays(info):
    raise PipelineError('--data_dir=%s holds NumPy arrays of `trainer.prepare arrays`, which only '
                        '`trainer.train_keras` reads, not TFRecords: give the TFRecord directory '
                        'they came from (%s).' % (data_dir, info.get('source', 'its "source"')))


def path_of(data_dir, is_training):
  """<data_dir>/train.npz or <data_dir>/validation.npz (str), local or gs://."""
  return '%s/%s' % (data_dir.rstrip('/'), TRAIN_FILE if is_training else EVAL_FILE)


def load(data_dir, info, is_training):
  """(inputs, labels) of a split of the arrays directory `data_dir` with dataset.json `info`.

  Returns:
    inputs: uint8 [N, size, size, 3] or int32 [N, max_seq_length]; labels: int32 [N].

  Raises:
    PipelineError: the file is missing or unreadable, or its arrays disagree with dataset.json
      (count, dtype, image size or max_seq_length, label range).
  """
  path = path_of(data_dir, is_training)
  expected = info['num_train_examples' if is_training else 'num_eval_examples']
  if not gfile.exists(path):
    raise PipelineError('%s is missing: write the arrays again with `python -m trainer.prepare '
                        'arrays --source_dir=<TFRecord data> --output_dir=%s --overwrite`.'
                        % (path, data_dir))
  try:
    with gfile.GFile(path, 'rb') as f:
      npz = np.load(f, allow_pickle=False)
      if not isinstance(npz, np.lib.npyio.NpzFile):
        raise ValueError('one array, not an .npz archive')
      with npz:
        inputs, labels = npz[INPUTS], npz[LABELS]
  except (KeyError, ValueError, OSError, EOFError, zipfile.BadZipFile, gfile.OpError) as e:
    raise PipelineError('%s is not an arrays file of trainer.prepare (%s): write it again.'
                        % (path, e))
  text = info.get('modality', 'image') == 'text'
  want = (np.int32, 2) if text else (np.uint8, 4)
  problems = []
  if (inputs.dtype, inputs.ndim) != want:
    problems.append('inputs are %s of rank %d, not %s of rank %d'
                    % (inputs.dtype, inputs.ndim, np.dtype(want[0]), want[1]))
  if not text and inputs.ndim == 4 and inputs.shape[-1] not in (1, 3):
    problems.append('images have %d channels, not 3 (or 1 for grey)' % inputs.shape[-1])
  if not text and inputs.ndim == 4 and inputs.shape[1:3] != (info.get('image_size'),) * 2:
    problems.append('images are %dx%d, dataset.json says image_size %s'
                    % (inputs.shape[1], inputs.shape[2], info.get('image_size')))
  if text and inputs.ndim == 2 and inputs.shape[1] != info.get('max_seq_length'):
    problems.append('%d token ids per text, dataset.json says max_seq_length %s'
                    % (inputs.shape[1], info.get('max_seq_length')))
  if labels.dtype != np.int32 or labels.shape != (len(inputs),):
    problems.append('labels are %s %s, not int32 [%d]' % (labels.dtype, labels.shape,
                                                          len(inputs)))
  elif len(labels) and (labels.min() < 0 or labels.max() >= info['num_classes']):
    problems.append('labels run from %d to %d, outside [0, %d)'
                    % (labels.min(), labels.max(), info['num_classes']))
  if len(inputs) != expected:
    problems.append('%d examples, dataset.json says %d' % (len(inputs), expected))
  if problems:
    raise PipelineError('%s does not match %s: %s. Write the arrays again.'
                        % (path, dataset_json.path_of(data_dir), '; '.join(problems)))
  if not text and inputs.shape[-1] == 1:
    inputs = inputs.repeat(3, axis=-1)
  return inputs, labels


class TrainBatches:
  """The endless training batches of (inputs, labels) arrays; see the module docstring.

  Args:
    inputs, labels: a split of `load`.
    batch_size: examples per batch.
    seed: keys the epochs' permutations.
  """

  def __init__(self, inputs, labels, batch_size, seed):
    self.inputs = inputs
    self.labels = labels
    self.batch_size = batch_size
    self.seed = seed
    self._orders = {}

  def _order(self, epoch):
    if epoch not in self._orders:
      self._orders = {e: o for e, o in self._orders.items() if e >= epoch - 1}
      rng = np.random.default_rng([self.seed, epoch])
      self._orders[epoch] = rng.permutation(len(self.labels))
    return self._orders[epoch]

  def indices(self, batch):
    """The example indices of batch number `batch` of the run (int64 [batch_size])."""
    n = len(self.labels)
    positions = np.arange(batch * self.batch_size, (batch + 1) * self.batch_size)
    epochs, within = np.divmod(positions, n)
    out = np.empty(self.batch_size, np.int64)
    for epoch in np.unique(epochs):
      chosen = epochs == epoch
      out[chosen] = self._order(int(epoch))[within[chosen]]
    return out

  def batches(self, first, rows=slice(None)):
    """Batches number `first`, `first` + 1, ... as (inputs [batch_size, ...], int32 labels);
    `rows`: a slice of each batch to read alone (one process's share of it)."""
    batch = first
    while True:
      chosen = self.indices(batch)[rows]
      yield self.inputs[chosen], self.labels[chosen]
      batch += 1


def eval_batches(inputs, labels, batch_size):
  """Every example once, in order: (inputs [b, ...] as `load` gives them, int32 labels [b])
  batches of b = batch_size examples, the last one smaller."""
  for start in range(0, len(labels), batch_size):
    yield inputs[start:start + batch_size], labels[start:start + batch_size]
