"""Keeps the libraries' routine notices out of a command's default output, so that its own
progress lines and its result stand out: TensorFlow's deprecation notices (TF 2.15 marks every
Estimator class deprecated), Estimator's dump of its RunConfig, Python's Deprecation/Future
warnings of the client libraries, and Apache Beam's INFO lines. With absl's `-v 1` (or higher)
everything is shown again."""

import logging as std_logging
import sys
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


# Warnings caught while the libraries loaded (hold_import_notices), shown again with -v 1.
_HELD = []


def hold_import_notices():
  """Loads google-auth with its import-time notice held back (Python 3.7 only).

  google-auth warns at import that it is dropping Python 3.7 (Python37DeprecationWarning, once
  from google.auth and once from google.oauth2), and TF 1.15 imports it with TensorFlow (its GCE
  cluster resolver loads googleapiclient), before any flag is parsed; its own filter ("once",
  put first) beats an "ignore" set beforehand. So it is loaded here, before TensorFlow, with the
  warnings recorded instead of printed; `quiet_unless_verbose` shows them at -v 1.
  """
  if sys.version_info[:2] != (3, 7):
    return
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    try:
      import google.auth  # noqa: F401  # pylint: disable=g-import-not-at-top,unused-import
      import google.oauth2  # noqa: F401  # pylint: disable=g-import-not-at-top,unused-import
    except ImportError:
      pass
  for held in caught:
    if held.category.__name__ == 'Python37DeprecationWarning':
      _HELD.append(held)
    else:  # anything else google-auth says at import is shown as it would have been
      warnings.warn_explicit(held.message, held.category, held.filename, held.lineno)


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
    for held in _HELD:
      warnings.showwarning(held.message, held.category, held.filename, held.lineno)
    return
  std_logging.getLogger('tensorflow').addFilter(_DropNoise())
  std_logging.getLogger('apache_beam').setLevel(std_logging.WARNING)
  for category in (DeprecationWarning, PendingDeprecationWarning, FutureWarning):
    warnings.filterwarnings('ignore', category=category)
  # tf.layers.* warn with UserWarning on TF 2.x.
  warnings.filterwarnings('ignore', message='.*is deprecated and will be removed',
                          category=UserWarning)
