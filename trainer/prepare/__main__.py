"""`python -m trainer.prepare SOURCE --output_dir DIR [flags]`: converts a data set into TFRecord
shards (`train-*`, `validation-*`) plus dataset.json, which `python -m trainer.main` reads.

  imagenet         the ILSVRC-2012 train/ and val/ folders (trainer/prepare/imagenet.py)
  image_folder     a folder-per-class tree of JPEG/PNG     (trainer/prepare/image_folder.py)
  fashion_mnist    Fashion-MNIST's IDX files               (trainer/prepare/fashion_mnist.py)
  photos           benchmark JPEGs from scikit-image       (trainer/prepare/photos.py)
  text             your CSV/TSV files                      (trainer/prepare/text_csv.py)
  rotten_tomatoes  the Rotten Tomatoes snippets            (trainer/prepare/rotten_tomatoes.py)
  arrays           TFRecords of this pipeline as NumPy arrays, preprocessed, for
                   `trainer.train_keras` where TensorFlow is not installed (trainer/prepare/arrays.py)

imagenet, image_folder and photos run on Apache Beam (trainer/prepare/beam_convert.py; --runner,
--direct_num_workers, Dataflow options). Image records follow the ImageNet schema; imagenet's
labels are 1..1000 (label_offset 1), the other converters' 0-based (label_offset 0), and
dataset.json tells the trainer which (`trainer.data.records`).
"""

from absl import app
from absl import flags as absl_flags
from absl import logging

from trainer.cli import log_noise
from trainer.cli import outcome
from trainer.cloud import gcs_preflight
from trainer.data import dataset_json
from trainer.data import shards
from trainer.errors import PipelineError
from trainer.prepare import arrays
from trainer.prepare import fashion_mnist
from trainer.prepare import ilsvrc_layout
from trainer.prepare import prepare_flags
from trainer.prepare import rotten_tomatoes
from trainer.prepare import text_csv
from trainer.storage import lease as lease_lib
from trainer.storage import outputs
from trainer.storage import staged

FLAGS = absl_flags.FLAGS
SOURCES = ('imagenet', 'image_folder', 'fashion_mnist', 'text', 'rotten_tomatoes', 'photos',
           'arrays')


def _beam_converters():
  """(beam_convert, image_folder, imagenet, photos), imported here: only these converters need
  Apache Beam (the `prepare` extra), so the others run without it.

  Raises:
    PipelineError: Apache Beam is not installed.
  """
  try:
    from trainer.prepare import beam_convert  # pylint: disable=g-import-not-at-top
    from trainer.prepare import image_folder  # pylint: disable=g-import-not-at-top
    from trainer.prepare import imagenet  # pylint: disable=g-import-not-at-top
    from trainer.prepare import photos  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    if 'apache_beam' not in str(e):
      raise
    raise PipelineError('imagenet, image_folder and photos run on Apache Beam, which is not '
                        "installed: pip install '.[prepare]' (docs/data.md).")
  return beam_convert, image_folder, imagenet, photos


def beam_options(beam_convert):
  """PipelineOptions from the Beam flags (runner, workers, the Dataflow options)."""
  extra = ['--%s=%s' % (name, FLAGS[name].value)
           for name in ('project', 'region', 'temp_location', 'requirements_file', 'setup_file')
           if FLAGS[name].value]
  return beam_convert.pipeline_options_for(FLAGS.runner, FLAGS.direct_num_workers,
                                           extra + FLAGS.beam_option)


def _text_options(overwrite):
  return dict(vocab_size=FLAGS.vocab_size, min_count=FLAGS.min_count,
              max_seq_length=FLAGS.max_seq_length, train_shards=FLAGS.train_shards,
              validation_shards=FLAGS.validation_shards, overwrite=overwrite)


def prepare(source):
  """Runs the converter of `source` (one of SOURCES) with the parsed flags; returns the
  dataset.json dict it wrote.

  Raises:
    PipelineError: what was wrong with the input or the flags; --output_dir holds a conversion
      and --overwrite is not given; another command is writing --output_dir (`LeaseHeld`).
  """
  if source == 'arrays':
    arrays.check_paths(FLAGS.source_dir, FLAGS.output_dir)
  # One writer per output_dir (trainer.storage.lease), taken before the output is checked: a
  # killed conversion's files are only known for what they are once its lease is taken over.
  # Every file this process renames into output_dir checks the lease first (Beam's workers
  # check the lease's token: beam_convert).
  with lease_lib.held(FLAGS.output_dir, '--output_dir', command='trainer.prepare') as lease, \
      staged.commits_checked(FLAGS.output_dir, lambda path: lease.check()):
    overwrite = FLAGS.overwrite or _resumes_killed_conversion(lease)
    shards.check_output_dir(FLAGS.output_dir, overwrite)  # before reading any input
    return _convert(source, overwrite, lease)


def _resumes_killed_conversion(lease):
  """True (with a warning) when this run took the lease over from a `trainer.prepare` that died
  before it finished: the unfinished conversion it left (shards, plan, no dataset.json) is
  deleted and made again, as the same command with --overwrite would. A finished conversion
  (dataset.json) is refused as ever."""
  if not lease.took_over or lease.took_over.get('command') != 'trainer.prepare':
    return False
  left = shards.existing_conversion(FLAGS.output_dir)
  if not left or any(path.endswith('/' + dataset_json.FILENAME) for path in left):
    return False
  logging.warning('%s holds the unfinished conversion of a trainer.prepare that died (pid %s on '
                  '%s): deleting its %d files and converting again.', FLAGS.output_dir,
                  lease.took_over.get('pid'), lease.took_over.get('host'), len(left))
  return True


def _convert(source, overwrite, lease):
  if source in ('imagenet', 'image_folder', 'photos'):
    return _prepare_on_beam(source, overwrite, lease)
  if source == 'arrays':
    return arrays.prepare(FLAGS.source_dir, FLAGS.output_dir, FLAGS.image_size,
                          FLAGS.crop_padding, overwrite=overwrite)
  if source == 'fashion_mnist':
    return fashion_mnist.prepare(FLAGS.output_dir, FLAGS.source_dir, FLAGS.train_shards,
                                 FLAGS.validation_shards, overwrite=overwrite,
                                 holdout_fraction=FLAGS.validation_fraction)
  if source == 'text':
    return text_csv.prepare(
        FLAGS.input, FLAGS.output_dir, validation_input=FLAGS.validation_input,
        text_column=FLAGS.text_column, label_column=FLAGS.label_column,
        validation_fraction=FLAGS.validation_fraction or 0.2, seed=FLAGS.seed,
        **_text_options(overwrite))
  if FLAGS.input and len(FLAGS.input) > 1:
    raise PipelineError('rotten_tomatoes takes at most one --input (the .csv.bz2 file).')
  return rotten_tomatoes.prepare(
      FLAGS.output_dir, FLAGS.input[0] if FLAGS.input else None,
      validation_fraction=FLAGS.validation_fraction or 0.2, seed=FLAGS.seed,
      **_text_options(overwrite))


def _prepare_on_beam(source, overwrite, lease):
  """prepare() for the converters that run on Apache Beam, for the holder of `lease`."""
  beam_convert, image_folder, imagenet, photos = _beam_converters()
  options = beam_options(beam_convert)
  if source == 'imagenet':
    return imagenet.prepare(
        FLAGS.source_dir, FLAGS.output_dir, options,
        validation_labels=FLAGS.validation_labels, synsets=FLAGS.synsets,
        train_shards=(FLAGS.train_shards if FLAGS['train_shards'].present
                      else ilsvrc_layout.DEFAULT_TRAIN_SHARDS),
        validation_shards=(FLAGS.validation_shards if FLAGS['validation_shards'].present
                           else ilsvrc_layout.DEFAULT_VALIDATION_SHARDS),
        skip_unreadable=FLAGS.skip_unreadable, overwrite=overwrite, shuffle_seed=FLAGS.seed,
        lease=lease)
  if source == 'image_folder':
    return image_folder.prepare(FLAGS.source_dir, FLAGS.output_dir,
                                FLAGS.validation_fraction or 0.1, FLAGS.train_shards,
                                FLAGS.validation_shards, options=options,
                                skip_unreadable=FLAGS.skip_unreadable, overwrite=overwrite,
                                shuffle_seed=FLAGS.seed, lease=lease)
  if FLAGS.runner != 'DirectRunner':
    raise PipelineError('photos runs on this machine only (it cuts its images into a local '
                        'temporary folder): leave out --runner.')
  return photos.prepare(FLAGS.output_dir, FLAGS.num_images, FLAGS.train_shards,
                        FLAGS.validation_shards, options=options, overwrite=overwrite,
                        lease=lease)


def main(argv):
  if len(argv) != 2 or argv[1] not in SOURCES:
    raise app.UsageError('usage: python -m trainer.prepare {%s} --output_dir DIR [...]; see '
                         '--helpfull' % ','.join(SOURCES))
  log_noise.quiet_unless_verbose(FLAGS.verbosity)
  try:
    gcs_preflight.check_path_usable(FLAGS.output_dir, 'output_dir')
    outputs.check_directory_usable(FLAGS.output_dir, '--output_dir')
    info = prepare(argv[1])
  except PipelineError as e:
    outcome.refuse(e)
  print('%s: %d train / %d validation examples, %d classes -> %s' % (
      info['name'], info['num_train_examples'], info['num_eval_examples'], info['num_classes'],
      FLAGS.output_dir))


def run():
  """The console entry point (`tpu-pipeline-prepare`)."""
  outcome.start(__doc__, prepare_flags.define_prepare_flags(), main, 'docs/data.md')


if __name__ == '__main__':
  run()
