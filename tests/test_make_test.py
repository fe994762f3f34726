"""`make test`'s own disk check (Makefile, test-disk): it clears TEST_TMPDIR (what a failed run
kept), then, with too little free space there, stops before any install or test and says how much
is free and what to do; with enough it goes on.

Runs on one runtime: the Makefile is the same for both, so the TF 1.15 run skips it.
"""

import subprocess
import sys

import pytest

from helpers import REPO

pytestmark = pytest.mark.skipif(
    sys.version_info < (3, 8),
    reason="make test's disk check is checked once, on the TF 2.15 runtime (.venv-tf2): the "
           'Makefile is the same for both runtimes')


def _test_disk(tmpdir, need_gb):
  return subprocess.run(
      ['make', '--no-print-directory', 'test-disk', 'TEST_TMPDIR=' + tmpdir,
       'TEST_DISK_GB=%d' % need_gb], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
      universal_newlines=True, timeout=60)


def test_too_little_free_space_stops_make_test_first_and_says_what_to_do(tmp_path):
  tmpdir = str(tmp_path / 'test-tmp')
  # More than any disk holds: 1 EB.
  proc = _test_disk(tmpdir, 10 ** 9)
  assert proc.returncode == 2, proc.stderr
  assert 'make test: ' in proc.stderr and 'GB free under %s' % tmpdir in proc.stderr
  assert ('the suites need 1000000000 GB: free some space or set TEST_TMPDIR to a larger disk'
          in proc.stderr)
  proc = _test_disk(tmpdir, 0)
  assert proc.returncode == 0, proc.stderr
  assert (tmp_path / 'test-tmp').is_dir()
