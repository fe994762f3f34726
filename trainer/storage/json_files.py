"""JSON files of the pipeline (dataset.json, model_config.json, best.json, results.json, ...),
local or gs://: written indented with sorted keys, aside and renamed into place
(`trainer.storage.staged.staged_file`), and read back as Python values. Each caller checks the
value's shape and words its own error."""

import json

from trainer.storage import gfile
from trainer.storage import staged

# What `read` returns for a file that does not exist (a file may well hold JSON's null).
MISSING = object()


def text(value):
  """`value` as the text `write` writes: indented JSON with sorted keys and a final newline."""
  return json.dumps(value, indent=2, sort_keys=True) + '\n'


def write(path, value):
  """Writes `value` as `text` gives it to `path`, never half a file under that name. The folder
  must exist (or be a gs:// prefix).

  Raises:
    gfile.OpError: the storage refused the write.
  """
  with staged.staged_file(path) as f:
    f.write(text(value))


def read(path):
  """The JSON value in `path`, or `MISSING` when there is no such file.

  Raises:
    ValueError: the file is not UTF-8 JSON (json's errors and UnicodeDecodeError are
      ValueErrors).
    gfile.OpError: the storage refused the read.
  """
  if not gfile.exists(path):
    return MISSING
  with gfile.GFile(path, 'rb') as f:
    return json.loads(f.read().decode('utf-8'))
