"""`make test`'s own disk check (Makefile, test-disk): it empties TEST_TMPDIR/test-tmp (what a
failed run kept) and nothing else of TEST_TMPDIR, then, with too little free space there, stops
before any install or test and says how much is free and what to do; with enough it goes on. An
empty TEST_TMPDIR is refused before anything is deleted. Its PyPI check (make check-pypi) says
when a recent pass of the same inputs stands and resolves nothing; bad settings are refused.

Runs on one runtime: the Makefile is the same for both, so the TF 1.15 run skips it.
"""

import os
import subprocess

import pytest

from helpers import REPO

pytestmark = pytest.mark.one_runtime("make test's disk check: the Makefile is the same for "
                                     'both runtimes')


def _test_disk(tmpdir, need_gib):
  return subprocess.run(
      ['make', '--no-print-directory', 'test-disk', 'TEST_TMPDIR=' + tmpdir,
       'TEST_DISK_GIB=%d' % need_gib], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
      universal_newlines=True, timeout=60)


def test_make_test_clears_its_own_directory_and_stops_first_without_the_space(tmp_path):
  (tmp_path / 'test-tmp').mkdir()
  (tmp_path / 'test-tmp' / 'kept-by-a-failed-run').write_text('x')
  (tmp_path / 'users-file').write_text('x')
  proc = _test_disk(str(tmp_path), 10 ** 9)  # more than any disk holds: 1 EiB
  assert proc.returncode == 2, proc.stderr
  assert 'make test: ' in proc.stderr
  assert 'GiB free in %s/test-tmp, the suites need 1000000000 GiB: free some space or set ' \
         'TEST_TMPDIR to a directory on a larger disk' % tmp_path in proc.stderr
  proc = _test_disk(str(tmp_path), 0)
  assert proc.returncode == 0, proc.stderr
  assert sorted(p.name for p in tmp_path.iterdir()) == ['test-tmp', 'users-file']
  assert list((tmp_path / 'test-tmp').iterdir()) == []
  proc = _test_disk('', 0)
  assert proc.returncode == 2 and 'TEST_TMPDIR is empty: give a directory' in proc.stderr


def _check_pypi(cache, *settings):
  # As from a shell: not the settings of the make test that may be running this (its MAKEFLAGS
  # and exported variables, e.g. make test PYPI_CHECK=again).
  env = {k: v for k, v in os.environ.items()
         if k not in ('MAKEFLAGS', 'MFLAGS', 'MAKELEVEL') and not k.startswith('PYPI_CHECK')}
  return subprocess.run(
      ['make', '--no-print-directory', '-s', 'check-pypi'] + list(settings), cwd=REPO,
      env=dict(env, XDG_CACHE_HOME=str(cache)), stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, universal_newlines=True, timeout=60)


def test_a_recent_pypi_pass_of_the_same_inputs_stands_and_bad_settings_are_refused(tmp_path):
  """With a pass recorded for these inputs, make check-pypi says so and exits 0 without pip (the
  sandbox has no PyPI: a resolution would fail here)."""
  key = _check_pypi(tmp_path, 'PYPI_CHECK=key')
  assert key.returncode == 0 and len(key.stdout.strip()) == 16, key.stderr
  passes = tmp_path / 'tpu-estimator-pipeline' / 'pypi-check'
  passes.mkdir(parents=True)
  (passes / key.stdout.strip()).write_text('passed\n')
  proc = _check_pypi(tmp_path)
  assert proc.returncode == 0, proc.stderr
  assert ('check-pypi: these inputs (key %s) resolved with PyPI alone at' % key.stdout.strip()
          in proc.stdout)
  assert 'not resolved again within 24 h (PYPI_CHECK=again resolves now)' in proc.stdout
  for setting, message in (('PYPI_CHECK=now', "got 'now'"),
                           ('PYPI_CHECK_MAX_AGE_HOURS=1.5', "whole hours, got '1.5'")):
    proc = _check_pypi(tmp_path, setting)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
