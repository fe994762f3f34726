"""`make test`'s own disk check (Makefile, test-disk): it empties TEST_TMPDIR/test-tmp (what a
failed run kept) and nothing else of TEST_TMPDIR, then, with too little free space there, stops
before any install or test and says how much is free and what to do; with enough it goes on. An
empty TEST_TMPDIR is refused before anything is deleted.

Runs on one runtime: the Makefile is the same for both, so the TF 1.15 run skips it.
"""

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
