"""absl flags for `python -m trainer.prepare {fashion_mnist,image_folder}`."""

from absl import flags

flags.DEFINE_string('output_dir', None, 'Where the TFRecord shards and dataset.json are written '
                    '(local or gs://).')
flags.DEFINE_string('source_dir', None,
                    'fashion_mnist: directory holding the four IDX .gz files (default: '
                    '/usr/share/datasets/fashion-mnist). image_folder: the folder-per-class tree.')
flags.DEFINE_integer('train_shards', 16, 'Number of train-* shards.')
flags.DEFINE_integer('validation_shards', 4, 'Number of validation-* shards.')
flags.DEFINE_float('validation_fraction', 0.1,
                   'image_folder without train/ and validation/ subfolders: fraction of each '
                   'class held out for validation (chosen by a stable hash of the file name).')
flags.mark_flag_as_required('output_dir')
