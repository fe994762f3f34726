"""What `--predict_input` names: its kind and files, and each input's name (and label, when the
records hold one) in input order, read in Python beside the tf.data input of
`trainer.data.input_fn.predict_input_fn_builder`, which reads the same files in the same order.

  images   files ending .jpg, .jpeg, .png or .bmp (any case, e.g. ImageNet's .JPEG)
  records  TFRecords in the training schema (`trainer.data.records`): image or text records
  lines    text models: .txt files, one text per line
  csv      text models: .csv files with a header row and a `text` column (or a single column)
"""

import csv
import dataclasses
from typing import Tuple

import tensorflow.compat.v1 as tf

from trainer.data import records
from trainer.errors import PipelineError

IMAGE_EXTENSIONS = ('.jpg', '.jpeg', '.png', '.bmp')
TEXT_EXTENSIONS = {'.txt': 'lines', '.csv': 'csv'}
TEXT_COLUMN = 'text'


@dataclasses.dataclass(frozen=True)
class PredictSource:
  """The inputs of one prediction run.

  Attributes:
    kind: 'images', 'records', 'lines' or 'csv'.
    paths: the matching files, sorted: the inputs' order.
    text_column: csv: the index of the text column.
  """
  kind: str
  paths: Tuple[str, ...]
  text_column: int = 0


def _kind_of(path):
  lower = path.lower()
  if lower.endswith(IMAGE_EXTENSIONS):
    return 'images'
  for extension, kind in TEXT_EXTENSIONS.items():
    if lower.endswith(extension):
      return kind
  return 'records'


def resolve(pattern, modality):
  """The PredictSource of `pattern` (a file glob, local or gs://) for a model of `modality`
  ('image' or 'text').

  Raises:
    PipelineError: nothing matches, the files are of several kinds, of a kind the model cannot
      read, or not what their names say (a TFRecord file that is not one, a CSV without a text
      column).
  """
  paths = tuple(sorted(tf.io.gfile.glob(pattern)))
  if not paths:
    raise PipelineError('--predict_input=%s matches no file. Pass a glob of image files '
                        '(%s), of TFRecords, or for text models of .txt/.csv files.'
                        % (pattern, ', '.join(IMAGE_EXTENSIONS)))
  kinds = {}
  for path in paths:
    kinds.setdefault(_kind_of(path), path)
  if len(kinds) > 1:
    raise PipelineError('--predict_input=%s matches files of several kinds (%s); predict one kind '
                        'per run.' % (pattern, ', '.join('%s such as %s' % kv
                                                         for kv in sorted(kinds.items()))))
  kind = next(iter(kinds))
  if modality == 'image' and kind in ('lines', 'csv'):
    raise PipelineError('--predict_input=%s holds text files, but this is an image model: pass '
                        'image files or TFRecords.' % pattern)
  if modality == 'text' and kind == 'images':
    raise PipelineError('--predict_input=%s holds image files, but this is a text model: pass '
                        '.txt (one text per line), .csv (a text column) or TFRecords.' % pattern)
  text_column = 0
  if kind == 'records':
    _check_is_tfrecord(paths[0])
  elif kind == 'csv':
    text_column = _text_column(paths)
  source = PredictSource(kind, paths, text_column)
  if kind == 'csv':  # refuse what the input pipeline would read differently before any work
    for _ in describe_inputs(source):
      pass
  return source


def _check_is_tfrecord(path):
  try:
    for _ in tf.io.tf_record_iterator(path):
      break
  except tf.errors.DataLossError as e:
    raise PipelineError('--predict_input file %s is not a TFRecord file (%s). Image files must end '
                        'in %s; text files in .txt or .csv.'
                        % (path, str(e).split('\n')[0], ', '.join(IMAGE_EXTENSIONS)))


def _csv_rows(path):
  try:
    with tf.io.gfile.GFile(path, 'r') as f:  # text mode: UTF-8 lines
      yield from csv.reader(f)
  except (UnicodeDecodeError, csv.Error) as e:
    raise PipelineError('--predict_input file %s cannot be read as a UTF-8 CSV file: %s.'
                        % (path, e))


def _text_column(paths):
  """The text column's index, the same in every file's header row."""
  columns = set()
  for path in paths:
    header = next(_csv_rows(path), None)
    if header is None:
      raise PipelineError('--predict_input file %s is empty: a CSV file needs a header row.' % path)
    names = [name.strip().lstrip('\ufeff').lower() for name in header]  # Excel writes a BOM
    if TEXT_COLUMN in names:
      columns.add(names.index(TEXT_COLUMN))
    elif len(names) == 1:
      columns.add(0)
    else:
      raise PipelineError('--predict_input file %s has columns %s but none named %r: name the '
                          'column of the texts %r.' % (path, header, TEXT_COLUMN, TEXT_COLUMN))
  if len(columns) > 1:
    raise PipelineError('--predict_input: the %r column is not in the same place in every CSV '
                        'file; predict them separately.' % TEXT_COLUMN)
  return columns.pop()


def describe_inputs(source, label_offset=0):
  """Yields (name, label or None, text or None) for each input of `source`, in input order:
  images: the file path; records: image/filename, else PATH:INDEX, with the label the record
  holds (minus label_offset) and a text record's raw text; lines and csv: PATH:LINE (1-based,
  as an editor shows it; csv counts its header) and the text.

  Raises:
    PipelineError: a CSV field spans lines (TensorFlow's CSV reader would count the inputs
      differently).
  """
  for path in source.paths:
    if source.kind == 'images':
      yield path, None, None
    elif source.kind == 'records':
      for index, serialized in enumerate(tf.io.tf_record_iterator(path)):
        name, label, text = records.describe_record(serialized, label_offset)
        yield name or '%s:%d' % (path, index), label, text
    elif source.kind == 'lines':
      with tf.io.gfile.GFile(path, 'rb') as f:
        for number, line in enumerate(f, 1):
          yield ('%s:%d' % (path, number), None,
                 line.decode('utf-8', 'replace').rstrip('\r\n'))
    else:
      rows = _csv_rows(path)
      next(rows)
      for number, row in enumerate(rows, 2):
        if source.text_column >= len(row):
          raise PipelineError('--predict_input %s, row %d has %d fields, no text column (%d): '
                              'give every row every column (no blank lines).'
                              % (path, number, len(row), source.text_column + 1))
        text = row[source.text_column]
        if '\n' in text or '\r' in text:
          raise PipelineError('--predict_input %s, row %d: the text spans several lines, which '
                              'the CSV reader of the input pipeline does not support. Put each '
                              'text on one line.' % (path, number))
        yield '%s:%d' % (path, number), None, text
