"""setup.py ships all three packages (what AI Platform installs): the entry points work from an
installed copy outside the source tree."""

import os
import shutil
import subprocess
import sys
import zipfile

from helpers import REPO


def test_installed_wheel_runs_the_entry_points(tmp_path):
  source = tmp_path / 'src'  # a copy, so the build leaves nothing in the checkout
  for name in ('trainer', 'models', 'flags'):
    shutil.copytree(os.path.join(REPO, name), str(source / name),
                    ignore=shutil.ignore_patterns('__pycache__'))
  shutil.copy(os.path.join(REPO, 'setup.py'), str(source))
  subprocess.run([sys.executable, '-m', 'pip', 'wheel', '--no-deps', '--no-build-isolation',
                  '--no-index', '-q', '-w', str(tmp_path / 'dist'), str(source)],
                 check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
  (wheel,) = os.listdir(str(tmp_path / 'dist'))
  site = tmp_path / 'site'
  zipfile.ZipFile(str(tmp_path / 'dist' / wheel)).extractall(str(site))
  assert {'trainer', 'models', 'flags'} <= set(os.listdir(str(site)))
  env = dict(os.environ, PYTHONPATH=str(site))
  for module, expected in (('trainer.main', '--use_tpu'), ('trainer.prepare', '--output_dir'),
                           ('trainer.benchmark', '--steps_per_window'),
                           ('trainer.submit', '--scale_tier')):
    proc = subprocess.run([sys.executable, '-m', module, '--helpfull'], cwd=str(tmp_path), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    # absl prints the help and exits with status 1 after --helpfull.
    assert proc.returncode in (0, 1) and 'Traceback' not in proc.stderr, proc.stderr[-2000:]
    assert expected in proc.stdout
  proc = subprocess.run(
      [sys.executable, '-c', 'import trainer, models, flags; '
       'print(trainer.__file__, models.__file__, flags.__file__)'],
      cwd=str(tmp_path), env=env, stdout=subprocess.PIPE, universal_newlines=True, check=True)
  assert all(path.startswith(str(site)) for path in proc.stdout.split())  # not the checkout
