"""What the Vertex AI tests (tests/test_vertex_rules.py, tests/test_vertex_first_job.py) share: a
job's usual flags, `trainer.submit` run as a user runs it, a raw request sent to the stand-in
with the real client, and the one-line refusal both must give.

Import it after `pytest.importorskip` of google-cloud-aiplatform's REST transport: it imports
trainer.cloud.vertex_submit, which needs the library.
"""

import json
import subprocess
import sys

from trainer.cloud import vertex_submit
from trainer.errors import PipelineError

from helpers import REPO

IMAGE = 'us-central1-docker.pkg.dev/test-project/trainer/tp:gpu'
ARGS = ['--data_dir=gs://bkt/d']
FLAGS = ('--project=test-project', '--region=us-central1', '--display_name=j',
         '--base_output_dir=gs://bkt/out', '--container_uri=' + IMAGE)


def submit(tmp_path, *args):
  """`python -m trainer.submit ARGS` from the repository; the CompletedProcess."""
  return subprocess.run([sys.executable, '-m', 'trainer.submit',
                         '--dist_dir=' + str(tmp_path / 'dist')] + list(args), cwd=REPO,
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        universal_newlines=True, timeout=300)


def dry_run_body(proc):
  """The request JSON that a successful `trainer.submit --dry_run` prints first."""
  assert proc.returncode == 0, proc.stderr[-3000:]
  return json.loads(proc.stdout[:proc.stdout.index('\n}\n') + 2])


def send(standin, body, hptuning=False, region='us-central1'):
  """Sends `body` to the stand-in with the real client; returns None, or the service's
  refusal (an INVALID_ARGUMENT) message."""
  try:
    vertex_submit.send(body, hptuning, 'test-project', region, standin.endpoint,
                       wait_for_end=False, poll_interval=0.01)
  except PipelineError as e:
    assert 'InvalidArgument' in str(e), e
    return str(e)
  return None


def refused_in_one_line(proc, message):
  """trainer.submit stopped with exit status 2 and one `error:` line holding `message`."""
  errors = [l for l in proc.stderr.splitlines() if l.startswith('error: ')]
  assert proc.returncode == 2 and len(errors) == 1, proc.stderr[-3000:]
  assert message in errors[0], errors[0]
