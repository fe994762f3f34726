"""The Keras commands never replace what a user has without --overwrite: the bad-input matrix's
rows (tests/refusals.py) for `trainer.export_keras` --output / --serving_dir and
`trainer.finetune_keras` --output that already exist. Each is refused before any work (no
checkpoint or model is read), exits 2 with one `error:` line, and leaves every file as it was.
The trainer's and converters' rows: tests/test_refusals_outputs.py."""

import os

import pytest

keras = pytest.importorskip('keras', minversion='3', reason='the Keras 3 runtime (.venv-keras)')

# pylint: disable=g-import-not-at-top,wrong-import-position
from refusals import Row, run_rows


def _files(*relative):
  def setup(root):
    for path in relative:
      full = os.path.join(root, path)
      os.makedirs(os.path.dirname(full), exist_ok=True)
      with open(full, 'w') as f:
        f.write('old')
  return setup


EXPORT_ROWS = [
    Row('export_keras: --output exists', 'export_keras',
        ['--model_dir={root}/run', '--output={root}/m.keras', '--serving_dir='],
        ['--output=', '/m.keras already exists', '--overwrite'], _files('m.keras')),
    Row('export_keras: --serving_dir holds an earlier export', 'export_keras',
        ['--model_dir={root}/run', '--output={root}/m.keras', '--serving_dir={root}/serving'],
        ['--serving_dir=', '/serving already holds', 'saved_model.pb', '--overwrite'],
        _files('serving/saved_model.pb')),
    Row('export_keras: the default serving directory next to --output holds something',
        'export_keras', ['--model_dir={root}/run', '--output={root}/m.keras'],
        ['--serving_dir=', '/m_serving already holds', '--overwrite'],
        _files('m_serving/variables/variables.index')),
]

FINETUNE_ROWS = [
    Row('finetune_keras: --output exists', 'finetune_keras',
        ['--model={root}/in.keras', '--data_dir={root}/data', '--output={root}/f.keras'],
        ['--output=', '/f.keras already exists', '--overwrite'], _files('f.keras', 'in.keras')),
    Row('finetune_keras: the results file of --output exists', 'finetune_keras',
        ['--model={root}/in.keras', '--data_dir={root}/data', '--output={root}/f.keras'],
        ['--output=', 'f.results.json already exists', '--overwrite'],
        _files('f.results.json', 'in.keras')),
]


def test_keras_commands_refuse_outputs_that_exist(tmp_path, monkeypatch):
  monkeypatch.setenv('KERAS_BACKEND', 'tensorflow')  # the backend that writes --serving_dir
  failures = []
  for name, rows in (('export_keras', EXPORT_ROWS), ('finetune_keras', FINETUNE_ROWS)):
    os.makedirs(str(tmp_path / name))
    failures += run_rows(rows, str(tmp_path / name))
  assert not failures, '\n'.join(failures)
