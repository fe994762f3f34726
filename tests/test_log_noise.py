"""A run's default output leaves out the libraries' deprecation notices and Estimator's config
dump; `-v 1` shows them again (trainer/cli/log_noise.py). The notices come from TF 2.15's
tf.estimator: run there only; google-auth's Python 3.7 notice exists only on TF 1.15's Python.
Each run is a fresh interpreter (run_main's `fresh`): what the import prints is under test. The
quiet runs are also the fake-data smoke test of each runtime (train, then count every example)."""

import sys

import pytest

from trainer.host import threads

from helpers import ok
from helpers import results_of
from helpers import run_main

# Fake data, evaluated in a last batch that is not full (20 examples in batches of 16): each
# runtime's quiet run checks that every example is counted.
FAKE = ['--fake_data', '--model=cnn', '--image_size=28', '--num_classes=10',
        '--num_train_examples=64', '--num_eval_examples=20', '--train_steps=2',
        '--train_batch_size=8', '--eval_batch_size=16', '--steps_per_eval=2', '--nokeep_best']


def _quiet_run(model_dir):
  """The default output of a fake-data run that trains and evaluates all 20 examples."""
  quiet = ok(run_main('--model_dir=' + model_dir, *FAKE, fresh=True))
  assert results_of(model_dir)['num_eval_examples'] == 20
  return quiet


@pytest.mark.one_runtime('TF 1.15 prints few notices; the filter is the same code on both')
def test_deprecation_notices_only_with_verbosity(tmp_path):
  quiet = _quiet_run(str(tmp_path / 'a'))
  assert 'is deprecated' not in quiet.stderr and 'Using config: {' not in quiet.stderr
  assert 'step 1/2 loss' in quiet.stderr  # the run's own progress stays
  assert '"top_1_accuracy"' in quiet.stdout  # and its result
  verbose = ok(run_main('--model_dir=' + str(tmp_path / 'b'), '-v', '1', *FAKE, fresh=True))
  assert 'is deprecated' in verbose.stderr


@pytest.mark.skipif(sys.version_info[:2] != (3, 7), reason='google-auth warns only on Python 3.7')
def test_google_auths_python37_notice_only_with_verbosity(tmp_path):
  """TF 1.15 loads google-auth with TensorFlow; its notice waits for the flags (and the run's
  own start-up line, the host settings, stays)."""
  quiet = _quiet_run(str(tmp_path / 'a'))
  assert 'Python37DeprecationWarning' not in quiet.stderr
  _, settings, _ = threads.current()
  assert 'host CPU: ' in quiet.stderr and 'inter-op %d' % settings.inter_op in quiet.stderr
  verbose = ok(run_main('--model_dir=' + str(tmp_path / 'b'), '-v', '1', *FAKE, fresh=True))
  # One notice each from google.auth and google.oauth2.
  assert verbose.stderr.count('Python37DeprecationWarning: After') == 2
