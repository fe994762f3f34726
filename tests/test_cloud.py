"""AI Platform: `trainer.submit` (sdist + the exact gcloud command, through a recording fake
gcloud), the sdist installed into a fresh Python 3.7 venv that already has TF 1.15, --job-dir,
TF_CONFIG and the hyperparameter-tuning report."""

import glob
import json
import os
import re
import shlex
import subprocess
import sys
import tarfile

import pytest

from helpers import REPO
from helpers import results_of
from helpers import run_main
from helpers import TINY

_FAKE_GCLOUD = '''#!%s
import json, os, sys
with open(os.environ['GCLOUD_RECORD'], 'w') as f:
  json.dump(sys.argv[1:], f)
'''


def _submit(*args, env=None):
  return subprocess.run([sys.executable, '-m', 'trainer.submit'] + list(args), cwd=REPO,
                        env=dict(os.environ, **(env or {})), stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, universal_newlines=True, timeout=300)


@pytest.fixture
def fake_gcloud(tmp_path):
  """A `gcloud` first on PATH that records its arguments to a JSON file."""
  bin_dir = tmp_path / 'bin'
  bin_dir.mkdir()
  gcloud = bin_dir / 'gcloud'
  gcloud.write_text(_FAKE_GCLOUD % sys.executable)
  gcloud.chmod(0o755)
  record = tmp_path / 'gcloud.json'
  return record, {'PATH': '%s:%s' % (bin_dir, os.environ['PATH']), 'GCLOUD_RECORD': str(record)}


def _cloud_guide_commands(substitutions):
  """The `trainer.submit` command of docs/cloud.md's AI Platform section and the gcloud command
  it documents, each as an argument list (line continuations joined, `substitutions` applied to
  the text first)."""
  text = open(os.path.join(REPO, 'docs', 'cloud.md'), encoding='utf-8').read()
  section = text.split('## AI Platform Training', 1)[1].split('\n## ', 1)[0]
  blocks = re.findall(r'```bash\n(.*?)```', section, re.S)[:2]
  for old, new in substitutions:
    blocks = [b.replace(old, new) for b in blocks]
  commands = [shlex.split(b.replace('\\\n', ' ')) for b in blocks]
  submit, gcloud = commands
  assert submit[:3] == ['python', '-m', 'trainer.submit'] and gcloud[0] == 'gcloud', blocks
  return submit, gcloud


def test_cloud_guide_submit_command_runs_exactly_the_gcloud_command_it_documents(fake_gcloud,
                                                                                   tmp_path):
  """docs/cloud.md's example, run as written there (a fixed job name for its `$(date ...)`, the
  test bucket for BUCKET), hands gcloud exactly the command the guide says it runs."""
  record, env = fake_gcloud
  submit, gcloud = _cloud_guide_commands([('$(date +%Y%m%d_%H%M%S)', '20261121_120000'),
                                       ('BUCKET', 'bkt')])
  dist = tmp_path / 'dist'
  proc = _submit('--dist_dir=' + str(dist), *submit[3:], env=env)
  assert proc.returncode == 0, proc.stderr[-3000:]
  (package,) = glob.glob(str(dist / '*.tar.gz'))
  # The guide shows the default dist/ folder; the test builds into its own.
  expected = ['--packages=' + package if a.startswith('--packages=') else a for a in gcloud[1:]]
  assert 'dist/' + os.path.basename(package) in ' '.join(gcloud)
  assert json.loads(record.read_text()) == expected
  assert expected[-6:] == ['--', '--data_dir=gs://bkt/fashion_mnist', '--resnet_depth=18',
                           '--image_size=32', '--train_batch_size=256', '--train_epochs=9']
  with tarfile.open(package) as tar:
    names = tar.getnames()
  for module in ('trainer/main.py', 'trainer/submit.py', 'trainer/data/input_fn.py',
                 'trainer/prepare/__main__.py', 'trainer/benchmark/__main__.py',
                 'trainer/tpu/resolver.py', 'trainer/run/dry_run.py', 'models/resnet.py',
                 'flags/to_config.py', 'setup.py'):
    assert any(name.endswith('/' + module) for name in names), module


@pytest.mark.parametrize('config', ['basic_gpu', 'basic_tpu', 'custom_multiworker'])
def test_submit_with_a_shipped_config_yaml(config, fake_gcloud, tmp_path):
  record, env = fake_gcloud
  path = os.path.join(REPO, 'aiplatform', config + '.yaml')
  assert 'trainingInput:' in open(path).read()
  proc = _submit('--job_name=j', '--job_dir=gs://bkt/jobs/j', '--config=' + path,
                 '--dist_dir=' + str(tmp_path / 'dist'), '--', '--use_tpu', env=env)
  assert proc.returncode == 0, proc.stderr[-3000:]
  args = json.loads(record.read_text())
  assert '--config=' + path in args and args[-2:] == ['--', '--use_tpu']
  assert not any(a.startswith('--scale-tier') for a in args)


def test_dry_run_prints_the_command_and_runs_nothing(fake_gcloud, tmp_path):
  record, env = fake_gcloud
  proc = _submit('--dry_run', '--job_name=j', '--job_dir=gs://bkt/jobs/j', '--scale_tier=BASIC_TPU',
                 '--dist_dir=' + str(tmp_path / 'dist'), '--', '--use_tpu', env=env)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert proc.stdout.startswith('gcloud ai-platform jobs submit training j --region=us-central1 ')
  assert proc.stdout.rstrip().endswith('--scale-tier=BASIC_TPU -- --use_tpu')
  assert not record.exists()


@pytest.mark.parametrize('args,message', [
    (['--job_dir=/tmp/local', '--scale_tier=BASIC'], 'must be a gs:// path'),
    (['--job_dir=gs://bkt/j'], 'exactly one of --scale_tier'),
    (['--job_dir=gs://bkt/j', '--scale_tier=CUSTOM'], 'CUSTOM needs the machine types'),
    (['--job_dir=gs://bkt/j', '--scale_tier=BASIC', '--job_name=9bad-name'], 'is invalid'),
    (['--job_dir=gs://bkt/j', '--scale_tier=BASIC', '--', '--job-dir=gs://x'], 'not after `--`'),
    (['--job_dir=gs://bkt/j', '--scale_tier=BASIC', '--machine_type=n1-standard-8'],
     "--machine_type is Vertex AI's, but --job_dir --scale_tier submits to the legacy AI Platform: "
     'there, use --scale_tier or --config. To submit to Vertex AI instead, drop --job_dir '
     '--scale_tier'),  # not silently dropped
])
def test_submit_refuses_bad_requests_before_building(args, message, fake_gcloud, tmp_path):
  record, env = fake_gcloud
  proc = _submit('--dist_dir=' + str(tmp_path / 'dist'), *args, env=env)
  assert proc.returncode == 2 and message in proc.stderr, proc.stderr[-3000:]
  assert not record.exists() and not (tmp_path / 'dist').exists()


@pytest.mark.skipif(sys.version_info[:2] != (3, 7),
                    reason='the AI Platform 1.15 runtime is Python 3.7: checked with the TF 1.15 '
                           'venv')
def test_sdist_installs_into_a_python37_venv_that_has_tf115_without_touching_it(tmp_path):
  # The "runtime": a fresh venv that sees TF 1.15 and the other packages of the project's venv.
  subprocess.run([sys.executable, '-m', 'venv', str(tmp_path / 'runtime')], check=True)
  (site,) = glob.glob(str(tmp_path / 'runtime/lib/python3.7/site-packages'))
  (ours,) = [p for p in sys.path if p.endswith('site-packages') and 'python3.7' in p][:1]
  with open(os.path.join(site, 'runtime_tf.pth'), 'w') as f:
    f.write(ours + '\n')
  python = str(tmp_path / 'runtime/bin/python')
  built = _submit('--dry_run', '--job_dir=gs://bkt/j', '--scale_tier=BASIC',
                  '--dist_dir=' + str(tmp_path / 'dist'))
  assert built.returncode == 0, built.stderr[-3000:]
  (package,) = glob.glob(str(tmp_path / 'dist' / '*.tar.gz'))
  # --no-index: pip may not download anything, so nothing (TensorFlow above all) is replaced.
  proc = subprocess.run([python, '-m', 'pip', 'install', '--no-index', '--no-build-isolation',
                         package], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                        universal_newlines=True, cwd=str(tmp_path))
  assert proc.returncode == 0, proc.stdout[-3000:]
  installed = [l for l in proc.stdout.splitlines() if l.startswith('Successfully installed')]
  assert installed == ['Successfully installed tpu-estimator-pipeline-0.1.0'], proc.stdout
  check = subprocess.run(
      [python, '-c', 'import tensorflow as tf, trainer.main, trainer.data.input_fn, trainer.models.resnet, '
       'trainer.flags.to_config; '
       'print(tf.__version__, trainer.main.__file__)'], cwd=str(tmp_path),
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
  assert check.returncode == 0, check.stderr[-3000:]
  version, main_file = check.stdout.split()
  assert version.startswith('1.15') and main_file.startswith(site)


# ---- the trainer side: --job-dir, TF_CONFIG, hyperparameter tuning -------------------------------

def test_job_dir_is_the_default_model_dir_and_the_tuning_metric_is_reported(small_dir, tmp_path):
  job_dir = str(tmp_path / 'job')
  metrics = tmp_path / 'hypertune' / 'output.metrics'
  env = {'CLOUD_ML_HP_METRIC_TAG': 'top_1_accuracy', 'CLOUD_ML_HP_METRIC_FILE': str(metrics),
         'CLOUD_ML_TRIAL_ID': '3',
         'TF_CONFIG': json.dumps({'cluster': {'master': ['127.0.0.1:2222']},
                                  'task': {'type': 'master', 'index': 0, 'trial': '3'},
                                  'job': {'job_name': 'j'}})}
  proc = run_main('--job-dir', job_dir, '--train_steps=2', '--data_dir=' + small_dir, *TINY,
                  env=env)
  assert proc.returncode == 0, proc.stderr[-3000:]
  results = results_of(job_dir)
  (line,) = metrics.read_text().splitlines()
  reported = json.loads(line)
  assert float(reported['top_1_accuracy']) == pytest.approx(results['top_1_accuracy'])
  assert int(reported['global_step']) == results['global_step'] == 2


def test_unknown_tuning_metric_tag_is_refused_before_training(small_dir, tmp_path):
  proc = run_main('--model_dir=' + str(tmp_path / 'm'), '--train_steps=1',
                  '--data_dir=' + small_dir, *TINY, env={'CLOUD_ML_HP_METRIC_TAG': 'accuracy'})
  assert proc.returncode == 2 and "'accuracy'" in proc.stderr and 'top_1_accuracy' in proc.stderr
  assert not (tmp_path / 'm').exists()


def test_a_trial_that_cannot_write_its_metric_file_stops_before_training(small_dir, tmp_path):
  """As on a service whose metric directory the trainer may not write (the container test runs
  the real case, a root-owned /var/hypertune and uid 1000); here a path under a file, which no
  user can create, as these tests run as root."""
  blocker = tmp_path / 'not-a-directory'
  blocker.write_text('')
  proc = run_main('--model_dir=' + str(tmp_path / 'm'), '--train_steps=1',
                  '--data_dir=' + small_dir, *TINY,
                  env={'CLOUD_ML_HP_METRIC_TAG': 'top_1_accuracy',
                       'CLOUD_ML_HP_METRIC_FILE': str(blocker / 'output.metrics')})
  assert proc.returncode == 2, proc.stderr[-3000:]
  assert ('this hyperparameter-tuning trial cannot write its metric file %s'
          % (blocker / 'output.metrics')) in proc.stderr
  assert not (tmp_path / 'm').exists()


def test_missing_model_dir_and_job_dir_is_refused(small_dir):
  proc = run_main('--train_steps=1', '--data_dir=' + small_dir, *TINY)
  assert proc.returncode == 2 and '--model_dir is required' in proc.stderr


def test_the_sdist_build_lock_never_follows_a_planted_link(tmp_path):
  """The lock that makes sdist builds take turns lives in the repo, and a link planted in its
  place is refused rather than followed (the old /tmp lock, opened with 'w', truncated the
  link's target)."""
  from trainer.cloud import aiplatform_job  # pylint: disable=g-import-not-at-top
  from trainer.errors import PipelineError  # pylint: disable=g-import-not-at-top
  repo, victim = tmp_path / 'repo', tmp_path / 'precious.txt'
  repo.mkdir()
  victim.write_text('keep me')
  os.symlink(str(victim), str(repo / aiplatform_job.SDIST_LOCK))
  with pytest.raises(PipelineError, match='build lock .* link'):
    aiplatform_job.build_sdist(str(tmp_path / 'dist'), repo=str(repo))
  assert victim.read_text() == 'keep me'
