"""Your own text classification data from CSV/TSV files with a header row:
`python -m trainer.prepare text --input FILE[,FILE] --output_dir DIR [--validation_input FILE]`.
"""

import bz2
import csv
import gzip
import io
import os

import tensorflow.compat.v1 as tf

from trainer.errors import PipelineError
from trainer.prepare import text_dataset


def _open_text(path):
  """The (.gz / .bz2 compressed) UTF-8 file at `path`, local or gs://, as a text stream for csv
  (read whole: TF 1.15's GFile is not an io stream that gzip/bz2 can wrap)."""
  with tf.io.gfile.GFile(path, 'rb') as f:
    data = f.read()
  if path.endswith('.gz'):
    data = gzip.decompress(data)
  elif path.endswith('.bz2'):
    data = bz2.decompress(data)
  if b'\0' in data:  # Python 3.7's csv refuses NUL bytes with a traceback, 3.11's keeps them
    raise PipelineError('%s line %d holds a NUL byte: it is not a text CSV/TSV file (a binary or '
                        'UTF-16 file?). Remove the NUL bytes (`tr -d \'\\000\'`) or re-save it '
                        'as UTF-8 CSV.' % (path, data[:data.index(b'\0')].count(b'\n') + 1))
  try:
    return io.StringIO(data.decode('utf-8'), newline='')
  except UnicodeDecodeError as e:
    raise PipelineError('%s is not UTF-8 text: line %d has the byte 0x%02x, which UTF-8 does not '
                        'allow there (%s). Re-save it as UTF-8.'
                        % (path, data[:e.start].count(b'\n') + 1, data[e.start], e.reason))


def read_table(path, text_column, label_column):
  """Reads (text, label) string pairs from a CSV or TSV file with a header row.

  The delimiter is a tab for names containing '.tsv', else a comma. Blank labels are errors;
  blank texts are kept (they classify from no tokens).

  Raises:
    PipelineError: missing file or column, a row without a label, a file that is not UTF-8
      text or not CSV (a NUL byte), naming the file and line.
  """
  if not tf.io.gfile.exists(path):
    raise PipelineError('input file %s does not exist.' % path)
  delimiter = '\t' if '.tsv' in os.path.basename(path).lower() else ','
  with _open_text(path) as f:
    reader = csv.DictReader(f, delimiter=delimiter)
    try:
      return _rows(reader, path, text_column, label_column)
    except csv.Error as e:  # e.g. a field larger than csv.field_size_limit()
      raise PipelineError('%s line %d cannot be read as %s (%s): fix that line or re-save the '
                          'file as UTF-8 CSV.' % (path, reader.line_num,
                                                  'TSV' if delimiter == '\t' else 'CSV', e))


def _rows(reader, path, text_column, label_column):
  """The (text, label) pairs of a csv.DictReader over `path`.

  Raises:
    PipelineError: a column missing, or a row without a label.
    csv.Error: the file is not CSV.
  """
  header = reader.fieldnames or []
  for column in (text_column, label_column):
    if column not in header:
      raise PipelineError('%s has no column %r (header: %s); pass --text_column / '
                          '--label_column.' % (path, column, ', '.join(header)))
  rows = []
  for line, row in enumerate(reader, start=2):
    label = (row[label_column] or '').strip()
    if not label:
      raise PipelineError('%s row %d has an empty %r label.' % (path, line, label_column))
    rows.append((row[text_column] or '', label))
  return rows


def prepare(inputs, output_dir, validation_input=None, text_column='text',
            label_column='label', validation_fraction=0.2, seed=text_dataset.DEFAULT_SEED,
            **kwargs):
  """`python -m trainer.prepare text`: one or more CSV/TSV files (concatenated) as the training
  data, split with a fixed seed unless `validation_input` is given."""
  if not inputs:
    raise PipelineError('text needs --input FILE[,FILE...] (CSV or TSV with a header row).')
  rows = [row for path in inputs for row in read_table(path, text_column, label_column)]
  if validation_input:
    train_rows, validation_rows = rows, read_table(validation_input, text_column, label_column)
  else:
    train_rows, validation_rows = text_dataset.split_rows(rows, validation_fraction, seed)
  name = os.path.splitext(os.path.basename(inputs[0].rstrip('/')))[0].split('.')[0]
  return text_dataset.write_text_dataset(train_rows, validation_rows, output_dir, name,
                                         source=','.join(inputs), **kwargs)
