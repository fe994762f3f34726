"""The style gate (ruff.toml): pyflakes' checks and Google-style import order over every Python file
of the repository, by ruff (the `test` extra installs it). Static: once, on the TF 2.15 runtime."""

import subprocess
import sys

import pytest

from helpers import REPO

pytestmark = pytest.mark.one_runtime('the source text')


def test_the_code_passes_the_style_gate():
  pytest.importorskip('ruff', reason="no ruff: pip install '.[test]'")
  proc = subprocess.run([sys.executable, '-m', 'ruff', 'check', '--no-cache', REPO],
                        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                        universal_newlines=True, timeout=120)
  assert proc.returncode == 0, proc.stdout[-3000:] + '\n(`ruff check --fix .` fixes most)'
