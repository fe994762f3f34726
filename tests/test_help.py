"""Every entry point's --help lists its own flags under the titles of its groups, each with its
default, and none of absl's or TensorFlow's (--helpfull keeps those). The same code on both
runtimes: run on TF 2.15 only. The Keras commands' --help: their runtime only has them."""

import subprocess
import sys

import pytest

from helpers import REPO

ENTRIES = {
    'trainer.main': ['Model:', 'Output:', '--[no]overwrite', '--resnet_depth'],
    'trainer.prepare': ['Every converter:', 'imagenet, image_folder:', 'Apache Beam',
                        'text, rotten_tomatoes:', '--output_dir', '--[no]overwrite', '--runner'],
    'trainer.submit': ['Every platform:', 'Vertex AI:', 'AI Platform (shut down on 2025-01-31):',
                       '--container_uri', '--tensorboard', '--scale_tier'],
    'trainer.benchmark': ['Model:', 'Benchmark:', '--warmup_steps', '--steps_per_window'],
    'trainer.advise': ['Model:', 'Advise:', '--targets', '--road'],
}


@pytest.mark.one_runtime('the flags and their help are the same code on both')
@pytest.mark.parametrize('module', sorted(ENTRIES))
def test_help_lists_the_commands_own_flags_in_groups(module):
  proc = subprocess.run([sys.executable, '-m', module, '--help'], cwd=REPO,
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                        timeout=300)
  assert proc.returncode == 0, proc.stderr[-2000:]
  for expected in ENTRIES[module]:
    assert expected in proc.stdout, (module, expected)
  assert '(default: ' in proc.stdout
  for foreign in ('--logtostderr', '--flagfile', '--verbosity'):
    assert foreign not in proc.stdout, (module, foreign)
  assert proc.stdout.rstrip().endswith('.md.')
