"""gs:// end to end through TensorFlow's built-in GCS filesystem and google-cloud-storage, against
a local fake-gcs-server (`scripts/gcs-sandbox`, which `make test` runs the suite in as root).

Bucket `bkt` exists, `readonly` exists but refuses writes (403), `denied` answers 403 to everything,
any other bucket does not exist.
"""

import json
import os
import re
import sys
import time
import urllib.parse
import uuid

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from trainer.run import results as results_lib

from helpers import BackgroundRun
from helpers import directory_files
from helpers import needs_gcs
from helpers import ok
from helpers import predict_in_fresh_process
from helpers import read_records
from helpers import refused
from helpers import results_of
from helpers import run_main
from helpers import run_prepare
from helpers import split_cases
from helpers import TINY_BY_MODEL
from helpers import write_subset

pytestmark = needs_gcs


@pytest.fixture
def gcs_dir():
  """A fresh gs:// prefix in the emulator's bucket."""
  return 'gs://bkt/%s' % uuid.uuid4().hex[:12]


def _image_folder(small_dir, root, per_class=6):
  """A folder-per-class tree of real Fashion-MNIST PNGs (the input `prepare image_folder` takes)."""
  counts = {}
  for record in read_records(os.path.join(small_dir, 'train-*')):
    feature = tf.train.Example.FromString(record).features.feature
    label = feature['image/class/label'].int64_list.value[0]
    if label > 2 or counts.get(label, 0) >= per_class:
      continue
    counts[label] = counts.get(label, 0) + 1
    folder = root / ('class%d' % label)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ('%d.png' % counts[label])).write_bytes(feature['image/encoded'].bytes_list.value[0])
  return root


# Each runtime's gs:// filesystem runs the whole road once: the image road on TF 2.15, the text
# road (its vocabulary on gs:// too) on TF 1.15; both ran on both runtimes when written.
@pytest.mark.parametrize('model', split_cases(
    ['bilstm'], ['resnet'], 'the other runtime runs the other network\'s road on gs://'))
def test_prepare_train_eval_resume_export_and_predict_all_on_gcs(model, small_dir, gcs_dir,
                                                                 tmp_path):
  args, _ = TINY_BY_MODEL[model]
  data_dir, model_dir = gcs_dir + '/data', gcs_dir + '/model'
  export_dir = gcs_dir + '/export'
  if model == 'bilstm':
    ok(run_prepare('rotten_tomatoes', '--output_dir=' + data_dir, '--train_shards=2',
                   '--validation_shards=1'))
  else:
    source = _image_folder(small_dir, tmp_path / 'photos')
    ok(run_prepare('image_folder', '--source_dir=' + str(source), '--output_dir=' + data_dir,
                   '--validation_fraction=0.3', '--train_shards=2', '--validation_shards=1'))
  with tf.io.gfile.GFile(data_dir + '/dataset.json') as f:
    info = json.load(f)
  assert tf.io.gfile.glob(data_dir + '/train-*') and tf.io.gfile.glob(data_dir + '/validation-*')

  common = ['--data_dir=' + data_dir, '--model_dir=' + model_dir, '--skip_host_call'] + list(args)
  first = ok(run_main('--train_steps=3', *common))
  assert 'Saving checkpoints for 3' in first.stderr
  assert results_of(model_dir)['global_step'] == 3
  # Evaluation alone, in a new process, of the checkpoint on gs://: the same numbers.
  evaluated = json.loads(ok(run_main('--mode=eval', *common)).stdout)
  assert evaluated['global_step'] == 3
  assert evaluated['num_eval_examples'] == info['num_eval_examples']
  # Resume from gs:// in a new process, then export to gs://.
  resumed = ok(run_main('--train_steps=5', '--export_dir=' + export_dir, *common))
  # A gs:// run names itself in its checkpoints (trainer/run/fenced_saver.py).
  assert re.search(r'Restoring parameters from %s/model\.ckpt-[0-9a-f]{8}-3\b'
                   % re.escape(model_dir), resumed.stderr), resumed.stderr[-3000:]
  results = results_of(model_dir)
  assert results['global_step'] == 5 and results['export_path'].startswith(export_dir + '/')
  assert tf.io.gfile.exists(results['export_path'] + '/saved_model.pb')
  # A SavedModel copied on gs:// (the best export, when the best checkpoint is the exported one).
  copy = results_lib.copy_saved_model(results['export_path'], gcs_dir + '/copied')
  assert copy == gcs_dir + '/copied/' + os.path.basename(results['export_path'])
  assert directory_files(copy) == directory_files(results['export_path'])
  assert not tf.io.gfile.glob(gcs_dir + '/copied/temp-*')
  # The SavedModel is loaded from gs:// in a fresh process and classifies the gs:// eval records.
  labels, classes, probabilities, _ = predict_in_fresh_process(results['export_path'], data_dir,
                                                                tmp_path)
  assert len(classes) == len(labels) == results['num_eval_examples']
  np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-4)
  assert (classes == labels).sum() == round(results['top_1_accuracy'] * len(labels))
  # The best checkpoint was kept on gs:// too, where TensorFlow's lookup finds it (the state
  # file names it in best/), and --mode=predict reads and writes gs://.
  assert tf.io.gfile.exists(model_dir + '/best/best.json')
  assert tf.train.latest_checkpoint(model_dir + '/best') == results['best']['checkpoint']
  if model == 'resnet':
    output = gcs_dir + '/predictions/validation.jsonl'
    ok(run_main('--mode=predict', '--predict_input=' + data_dir + '/validation-*',
                 '--predict_output=' + output, *common))
    with tf.io.gfile.GFile(output) as f:
      lines = [json.loads(line) for line in f]
    assert [line['class'] for line in lines] == list(classes)
    assert [line['label'] for line in lines] == list(labels)


# ---- preflight: clear errors within seconds, before TensorFlow touches a bucket ------------------

def _fast(proc_fn):
  start = time.time()
  proc = proc_fn()
  assert time.time() - start < 60, 'took %.0f s' % (time.time() - start)
  return proc


def test_missing_bucket_for_model_dir(small_dir):
  args, _ = TINY_BY_MODEL['resnet']
  proc = _fast(lambda: run_main('--train_steps=1', '--data_dir=' + small_dir,
                                '--model_dir=gs://no-such-bucket/run', *args))
  refused(proc, 'bucket gs://no-such-bucket (from --model_dir) does not exist')


def test_missing_bucket_for_prepare_output():
  proc = _fast(lambda: run_prepare('rotten_tomatoes', '--output_dir=gs://no-such-bucket/data'))
  refused(proc, 'bucket gs://no-such-bucket (from --output_dir) does not exist')


def test_data_dir_without_shards_or_dataset_json(gcs_dir, tmp_path):
  args, _ = TINY_BY_MODEL['resnet']
  with tf.io.gfile.GFile(gcs_dir + '/empty/README', 'w') as f:
    f.write('no shards here')
  proc = _fast(lambda: run_main('--train_steps=1', '--data_dir=%s/empty' % gcs_dir,
                                '--model_dir=' + str(tmp_path), *args))
  assert proc.returncode == 2, proc.stderr[-3000:]
  assert 'dataset.json' in proc.stderr or 'no TFRecord files match' in proc.stderr, proc.stderr


def test_permission_denied_names_the_identity_to_grant(small_dir):
  args, _ = TINY_BY_MODEL['resnet']
  proc = _fast(lambda: run_main('--train_steps=1', '--data_dir=' + small_dir,
                                '--model_dir=gs://denied/run', *args))
  refused(proc, 'permission denied on bucket gs://denied for --model_dir')
  assert 'roles/storage.objectAdmin' in proc.stderr and 'Grant ' in proc.stderr
  assert 'cloud-tpu.iam.gserviceaccount.com' not in proc.stderr  # no TPU in this run


def test_a_bucket_granted_only_the_object_roles_passes_the_checks_and_trains():
  """gs://objects-only answers 403 to its own metadata (`storage.buckets.get`), as GCS does for an
  identity holding only roles/storage.objectAdmin: the start-up checks ask only object
  permissions, so the role a 403 names (test above) is one that lets the run through, and
  TensorFlow's own client trains and checkpoints there. A denied data path names objectViewer."""
  from trainer.cloud import gcs_preflight  # pylint: disable=g-import-not-at-top
  from trainer.errors import PipelineError  # pylint: disable=g-import-not-at-top
  directory = 'gs://objects-only/run-%s' % uuid.uuid4().hex[:8]
  gcs_preflight.check_path_usable(directory + '/data', 'data_dir')
  gcs_preflight.check_path_usable(directory + '/model', 'model_dir')
  proc = run_main('--fake_data', '--model=cnn', '--image_size=28', '--num_classes=10',
                  '--train_batch_size=8', '--train_steps=2', '--mode=train',
                  '--model_dir=%s/model' % directory)
  ok(proc)
  assert tf.io.gfile.glob(directory + '/model/model.ckpt-*2.index'), proc.stderr[-3000:]
  with pytest.raises(PipelineError, match=r'Grant .* roles/storage.objectViewer on the bucket'):
    gcs_preflight.check_path_usable('gs://denied/data', 'data_dir')
  with pytest.raises(PipelineError, match=r'bucket gs://no-such-bucket \(from --data_dir\) does '
                     r'not exist'):
    gcs_preflight.check_path_usable('gs://no-such-bucket/data', 'data_dir')


def test_permission_denied_with_use_tpu_names_the_tpu_service_account():
  proc = _fast(lambda: _prepare_denied_tpu_run())
  refused(proc, 'permission denied on bucket gs://denied for --data_dir')
  assert 'service-PROJECT_NUMBER@cloud-tpu.iam.gserviceaccount.com' in proc.stderr


def _prepare_denied_tpu_run():
  # The data_dir is checked while the flags become a config, before the TPU is resolved.
  return run_main('--use_tpu', '--tpu=grpc://127.0.0.1:1', '--train_steps=1',
                  '--data_dir=gs://denied/data', '--model_dir=gs://bkt/run', '--model=resnet')


def test_read_only_model_dir_is_refused_before_training(small_dir):
  # The bucket exists and can be read: only the write check finds the problem.
  args, _ = TINY_BY_MODEL['resnet']
  proc = _fast(lambda: run_main('--train_steps=1', '--data_dir=' + small_dir,
                                '--model_dir=gs://readonly/run', *args))
  refused(proc, 'permission denied on bucket gs://readonly for --model_dir')
  assert 'Saving checkpoints' not in proc.stderr


def test_model_dir_write_check_leaves_nothing_behind(gcs_dir):
  from trainer.cloud import gcs_preflight
  gcs_preflight.check_path_usable(gcs_dir + '/model', 'model_dir')
  assert not tf.io.gfile.glob(gcs_dir + '/*')


# ---- a storage outage in the middle of a gs:// training run --------------------------------------

# Seconds of outage: within the retries of both runtimes (a request gives up after ~90 s on
# TF 1.15.5, ~200 s on TF 2.15.1); BENCHMARKS.md's fault table has the longer ones measured.
OUTAGE_SECS = float(os.environ.get('GCS_OUTAGE_SECS', '10'))


# Each runtime's gs:// client rides out one outage: the input's reads answered 503 on TF 1.15, a
# checkpoint's writes dropped on TF 2.15; both ran on both runtimes when written.
@pytest.mark.parametrize('meets,mode', split_cases(
    [('input', '503')], [('checkpoint', 'drop')], 'the other runtime rides out the other outage'))
def test_a_storage_outage_is_ridden_out_and_no_partial_checkpoint_is_listed(
    meets, mode, small_dir, gcs_dir, tmp_path):
  """From step 20 on, the run's GCS requests fail for OUTAGE_SECS: answered 503, or the connection
  closed unanswered (scripts/gcs_tls_front.py), with TensorFlow's production retry settings.
  It `meets` the input pipeline (data on gs:// in 32 shards, so that files are opened all the
  time; model_dir local) or the next checkpoint save (model_dir on gs://, data local; only the
  checkpoint's requests fail); the sandbox's list of refused requests shows which. The run
  stalls, rides the outage out and finishes; every checkpoint the state lists is intact."""
  from trainer.run import checkpoints
  if meets == 'input':
    data_dir = write_subset(small_dir, gcs_dir + '/data', 640, 300, num_shards=32)
    model_dir = str(tmp_path / 'model')
  else:
    data_dir, model_dir = small_dir, gcs_dir + '/model'
  args = ['--data_dir=' + data_dir, '--model_dir=' + model_dir, '--model=cnn', '--image_size=28',
          '--train_batch_size=32', '--eval_batch_size=100', '--seed=5', '--mode=train',
          '--log_every_n_secs=0.5', '--save_checkpoints_steps=10', '--train_steps=60']
  # The sandbox shortens the retries so that the other tests fail fast; a real job has these.
  env = {k: v for k, v in os.environ.items() if not k.startswith('GCS_RETRY_CONFIG_')}
  # Only this test's requests fail: the other tests share the emulator (scripts/gcs_tls_front.py).
  prefix = gcs_dir.rsplit('/', 1)[1]
  outage = os.path.join(os.environ['GCS_SANDBOX_DIR'], 'outage.' + prefix)
  refused_log = outage + '-requests.log'
  if os.path.exists(refused_log):
    os.remove(refused_log)
  with BackgroundRun(*args, env=env) as run:
    run.wait_for_step(20)
    try:
      # Written whole, then renamed: the front never reads a half-written mode.
      pending = os.path.join(os.path.dirname(outage), 'pending-' + prefix)
      with open(pending, 'w') as f:
        # The checkpoint's files only: an events file upload stalled first would hold the
        # training loop through the outage, and the save would come after it.
        f.write(mode + (' model.ckpt' if meets == 'checkpoint' else ''))
      os.rename(pending, outage)
      started = time.time()
      during = run.logged_step()
      while time.time() - started < OUTAGE_SECS and run.proc.poll() is None:
        time.sleep(0.2)
    finally:
      os.remove(outage)
    after = run.logged_step()
    assert run.wait(600) == 0, run.stderr[-3000:]
  with open(refused_log) as f:
    refused_requests = f.read()
  print('outage %s meeting the %s for %.0f s: step %d at its start, %d at its end; %d requests '
        'refused' % (mode, meets, OUTAGE_SECS, during, after, len(refused_requests.split('\n'))))
  assert ('train-000' if meets == 'input' else 'model.ckpt') in refused_requests
  # It stalled (without the outage, step 60 is seconds away; the log shows a step every 0.5 s, so
  # the outage can begin some steps past 20): on a save at the checkpoint whose requests the
  # outage refused (the log's step lags the run's: the outage may meet the save after the next
  # one the log suggests); on its input once the batches already read are used up (one run went on
  # 10 steps).
  # Its checkpoints are run-named on gs:// (model.ckpt-RUNID-STEP, the state fence's).
  stalled_save = min([int(n) for n in re.findall(r'model\.ckpt-(?:[0-9a-f]+-)?(\d+)(?=[_.%/])',
                                                 urllib.parse.unquote(refused_requests))] or [60])
  assert after <= (stalled_save if meets == 'checkpoint' else during + 15) < 60, (
      during, after, stalled_save)
  assert results_of(model_dir)['global_step'] == 60
  listed = tf.train.get_checkpoint_state(model_dir).all_model_checkpoint_paths
  assert listed and all(checkpoints.checkpoint_damage(p) is None for p in listed)


def test_imagenet_from_gcs_to_gcs(gcs_dir, tmp_path):
  """The ILSVRC tree read from gs:// and converted to gs:// (as on Dataflow), in a child process."""
  sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
  from ilsvrc_tree import write_ilsvrc_tree  # pylint: disable=g-import-not-at-top
  local = str(tmp_path / 'ILSVRC')
  truth, _ = write_ilsvrc_tree(local, 40, validation_per_class=1)
  source = gcs_dir + '/ILSVRC'
  for folder, _, names in os.walk(local):
    for name in names:
      path = os.path.join(folder, name)
      tf.io.gfile.copy(path, source + '/' + os.path.relpath(path, local))
  output = gcs_dir + '/imagenet'
  ok(run_prepare('imagenet', '--source_dir=' + source, '--output_dir=' + output,
                 '--direct_num_workers=1', '--train_shards=3', '--validation_shards=2'))
  with tf.io.gfile.GFile(output + '/dataset.json') as f:
    info = json.load(f)
  assert (info['num_train_examples'], info['num_eval_examples']) == (30, 10)
  assert sorted(os.path.basename(p) for p in tf.io.gfile.glob(output + '/*')) == [
      'dataset.json', 'train-00000-of-00003', 'train-00001-of-00003', 'train-00002-of-00003',
      'validation-00000-of-00002', 'validation-00001-of-00002']  # no plan or temporary left
  names = [tf.train.Example.FromString(r).features.feature['image/filename'].bytes_list.value[0]
           for r in read_records(output + '/*-of-*')]
  assert sorted(n.decode() for n in names) == sorted(truth)


def test_gs_paths_with_special_characters_are_data_not_patterns(gcs_dir):
  """On gs:// as on disk: the shards of `d b[1]*?é` are found through the escaped pattern and a
  sibling it would match as a pattern is not; the checkpoint listing of a prefix matches only
  its own objects."""
  from trainer.data.data_config import DataConfig  # pylint: disable=g-import-not-at-top
  from trainer.run import checkpoints  # pylint: disable=g-import-not-at-top
  from trainer.storage import patterns  # pylint: disable=g-import-not-at-top
  for name in ('d b[1]*?é', 'd b1xé'):
    for file_name in ('train-00000-of-00001', 'model.ckpt-1.index'):
      with tf.io.gfile.GFile('%s/%s/%s' % (gcs_dir, name, file_name), 'w') as f:
        f.write(name)
  own = gcs_dir + '/d b[1]*?é'
  data = DataConfig(data_dir=own, num_classes=2, num_train_examples=1, num_eval_examples=1,
                    image_size=8)
  assert tf.io.gfile.glob(data.file_pattern(True)) == [own + '/train-00000-of-00001']
  assert patterns.files_matching(own, 'train-*') == [own + '/train-00000-of-00001']
  assert checkpoints.checkpoint_files(own + '/model.ckpt-1') == [own + '/model.ckpt-1.index']
