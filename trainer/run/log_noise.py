"""Keeps the libraries' routine notices out of a command's default output, so that its own
progress lines and its result stand out: TensorFlow's deprecation notices (TF 2.15 marks every
Estimator class deprecated), Estimator's dump of its RunConfig, Python's Deprecation/Future
warnings of the client libraries, and Apache Beam's INFO lines. With absl's `-v 1` (or higher)
everything is shown again."""

import logging as std_logging
import warnings

# Substrings of the TensorFlow log records dropped by default.
TENSORFLOW_NOISE = (
    'is deprecated and will be removed',   # tensorflow/python/util/deprecation.py
    'is deprecated. Please use',           # module_wrapper's tf.* renames
    'Instructions for updating',
    'includes params argument, but params are not passed to Estimator',
    'eval_on_tpu ignored because use_tpu is False',
    'Using config: {',                     # Estimator's RunConfig dump
)


class _DropNoise(std_logging.Filter):

  def filter(self, record):
    message = record.getMessage()
    return not any(noise in message for noise in TENSORFLOW_NOISE)


def quiet_unless_verbose(verbosity):
  """Installs the filters unless `verbosity` (absl's --verbosity, -v) is 1 or more.

  Args:
    verbosity: int, absl's FLAGS.verbosity (0 is INFO, the commands' default).
  """
  if verbosity >= 1:
    return
  std_logging.getLogger('tensorflow').addFilter(_DropNoise())
  std_logging.getLogger('apache_beam').setLevel(std_logging.WARNING)
  for category in (DeprecationWarning, PendingDeprecationWarning, FutureWarning):
    warnings.filterwarnings('ignore', category=category)
  # tf.layers.* warn with UserWarning on TF 2.x.
  warnings.filterwarnings('ignore', message='.*is deprecated and will be removed',
                          category=UserWarning)
