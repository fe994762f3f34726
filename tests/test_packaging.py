"""setup.py's wheel (what AI Platform and the trainer image install): `trainer` is its one
top-level package (the repository's models/, flags/ and keras_models/ become trainer.models,
trainer.flags and trainer.keras_models), so it installs into a clean virtualenv beside a user's
own package named `models` and trains that package's network."""

import json
import os
import shutil
import site
import subprocess
import sys
import zipfile

from helpers import REPO

# A user's own package named `models` (the commonest name for one), with a network that keeps the
# network contract (docs/your-model.md): a linear classifier of the image's pixels.
_USER_NETWORK = '''
import tensorflow.compat.v1 as tf


def network(features, *, is_training, num_classes, params):
  del is_training, params
  pixels = tf.layers.flatten(tf.cast(features['image'], tf.float32) / 255.0)
  weights = tf.get_variable('weights', [pixels.shape[-1], num_classes])
  return tf.matmul(pixels, weights)
'''


def _wheel(tmp_path):
  """The project's wheel, built from a copy (the build leaves nothing in the checkout)."""
  source = tmp_path / 'src'
  for name in ('trainer', 'models', 'flags', 'keras_models'):
    shutil.copytree(os.path.join(REPO, name), str(source / name),
                    ignore=shutil.ignore_patterns('__pycache__'))
  shutil.copy(os.path.join(REPO, 'setup.py'), str(source))
  subprocess.run([sys.executable, '-m', 'pip', 'wheel', '--no-deps', '--no-build-isolation',
                  '--no-index', '-q', '-w', str(tmp_path / 'dist'), str(source)],
                 check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
  (wheel,) = os.listdir(str(tmp_path / 'dist'))
  return str(tmp_path / 'dist' / wheel)


def _clean_venv(path):
  """A new virtualenv whose only packages are pip's; TensorFlow and the other requirements come
  from this runtime's site-packages through a .pth line (no .pth of theirs runs there, so not the
  checkout's editable install either). Returns its python."""
  subprocess.run([sys.executable, '-m', 'venv', str(path)], check=True)
  python = str(path / 'bin' / 'python')
  venv_site = subprocess.check_output(
      [python, '-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])'],
      universal_newlines=True).strip()
  with open(os.path.join(venv_site, 'requirements.pth'), 'w') as f:
    f.write('\n'.join(site.getsitepackages()) + '\n')
  return python


def test_the_wheel_installs_beside_a_users_models_package_and_trains_its_network(tmp_path):
  wheel = _wheel(tmp_path)
  top = {name.split('/')[0] for name in zipfile.ZipFile(wheel).namelist()}
  assert {name for name in top if not name.endswith('.dist-info')} == {'trainer'}
  python = _clean_venv(tmp_path / 'venv')
  installed = subprocess.run([python, '-m', 'pip', 'install', '--no-deps', '--no-index', wheel],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             universal_newlines=True)
  assert installed.returncode == 0, installed.stdout[-3000:]

  user = tmp_path / 'user'  # the user's project: their `models` package, imported from here
  (user / 'models').mkdir(parents=True)
  (user / 'models' / '__init__.py').write_text('')
  (user / 'models' / 'linear.py').write_text(_USER_NETWORK)
  env = {k: v for k, v in os.environ.items() if k != 'PYTHONPATH'}
  for module, expected in (('trainer.main', '--use_tpu'), ('trainer.prepare', '--output_dir'),
                           ('trainer.benchmark', '--steps_per_window'),
                           ('trainer.submit', '--scale_tier')):
    proc = subprocess.run([python, '-m', module, '--helpfull'], cwd=str(user), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    # absl prints the help and exits with status 1 after --helpfull.
    assert proc.returncode in (0, 1) and 'Traceback' not in proc.stderr, proc.stderr[-2000:]
    assert expected in proc.stdout
  model_dir = tmp_path / 'run'
  trained = subprocess.run(
      [python, '-m', 'trainer.main', '--network=models.linear:network', '--fake_data',
       '--num_classes=10', '--image_size=8', '--num_train_examples=16', '--num_eval_examples=8',
       '--train_batch_size=8', '--eval_batch_size=8', '--train_steps=1',
       '--nopredict_step_time', '--model_dir=' + str(model_dir)],
      cwd=str(user), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
      universal_newlines=True, timeout=300)
  assert trained.returncode == 0, trained.stderr[-3000:]
  with open(str(model_dir / 'results.json')) as f:
    results = json.load(f)
  assert results['global_step'] == 1 and results['model'] == 'models.linear:network'
  # Both are the installed copies, the user's `models` is theirs: nothing from the checkout.
  where = subprocess.run(
      [python, '-c', 'import models, trainer.main, trainer.models.resnet; '
       'print(models.__file__, trainer.main.__file__, trainer.models.resnet.__file__)'],
      cwd=str(user), env=env, stdout=subprocess.PIPE, universal_newlines=True, check=True)
  users, main, resnet = where.stdout.split()
  assert users == str(user / 'models' / '__init__.py')
  assert main.startswith(str(tmp_path / 'venv')) and resnet.startswith(str(tmp_path / 'venv'))
