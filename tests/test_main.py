"""`python -m trainer.main` end to end on real Fashion-MNIST, in fresh processes, tiny settings."""

import glob
import json
import os
import shutil
import subprocess
import sys
import time

import pytest
import tensorflow.compat.v1 as tf

from conftest import REPO, TINY, read_records, requires_isolation, results_of, run_main, write_subset


def _events_tags(model_dir):
  tags = set()
  for path in glob.glob(os.path.join(model_dir, 'events.out.tfevents.*')):
    for event in tf.train.summary_iterator(path):
      tags.update(v.tag for v in event.summary.value)
  return tags


def _ok(proc):
  assert proc.returncode == 0, proc.stderr[-3000:]
  return proc


def test_train_and_eval_resumes_and_a_finished_run_trains_nothing(small_dir, tmp_path):
  model_dir = str(tmp_path / 'model')
  common = TINY + ['--data_dir=' + small_dir, '--model_dir=' + model_dir, '--steps_per_eval=5']
  first = _ok(run_main('--train_steps=10', *common))
  results = results_of(model_dir)
  assert results['global_step'] == 10 and results['num_eval_examples'] == 300
  for key in ('top_1_accuracy', 'top_5_accuracy', 'loss', 'examples_per_sec', 'tensorflow_version'):
    assert results[key] is not None, key
  assert results['tensorflow_version'] == tf.__version__
  assert 'eval at step 5' in first.stderr  # the intermediate eval at the --steps_per_eval boundary
  assert 'examples/sec' in first.stderr and 'ETA' in first.stderr
  assert {'loss', 'learning_rate'} <= _events_tags(model_dir)  # host_call summaries

  second = _ok(run_main('--train_steps=15', *common))
  assert 'Resuming from the checkpoint at step 10 of 15' in second.stderr
  assert results_of(model_dir)['global_step'] == 15

  checkpoints = sorted(os.listdir(model_dir))
  third = _ok(run_main('--train_steps=15', *common))
  assert 'not training' in third.stderr
  assert results_of(model_dir)['global_step'] == 15
  assert [c for c in sorted(os.listdir(model_dir)) if 'ckpt' in c] == [
      c for c in checkpoints if 'ckpt' in c]


def test_train_then_eval_mode(small_dir, tmp_path):
  model_dir = str(tmp_path / 'model')
  common = TINY + ['--data_dir=' + small_dir, '--model_dir=' + model_dir, '--skip_host_call']
  _ok(run_main('--mode=train', '--train_steps=4', *common))
  assert results_of(model_dir)['global_step'] == 4
  assert 'top_1_accuracy' not in results_of(model_dir)
  assert not glob.glob(os.path.join(model_dir, 'eval*'))
  _ok(run_main('--mode=eval', *common))
  results = results_of(model_dir)
  assert results['mode'] == 'eval' and results['global_step'] == 4
  assert results['num_eval_examples'] == 300 and 0.0 <= results['top_1_accuracy'] <= 1.0


def test_eval_without_checkpoint_is_refused(small_dir, tmp_path):
  proc = run_main('--mode=eval', '--data_dir=' + small_dir, '--model_dir=' + str(tmp_path), *TINY)
  assert proc.returncode == 2 and 'no checkpoint in' in proc.stderr


def test_eval_counts_all_10000_test_images(fashion_mnist_dir, tmp_path):
  model_dir = str(tmp_path / 'model')
  # image_size 8 keeps the 10,000-image evaluation cheap; the count is what is under test.
  _ok(run_main('--train_steps=1', '--image_size=8', '--eval_batch_size=1024', '--skip_host_call',
               '--data_dir=' + fashion_mnist_dir, '--model_dir=' + model_dir,
               *[a for a in TINY if not a.startswith(('--image_size', '--eval_batch_size'))]))
  assert results_of(model_dir)['num_eval_examples'] == 10000


def test_export_predicts_real_images_in_a_fresh_process(small_dir, tmp_path):
  model_dir, export_dir = str(tmp_path / 'model'), str(tmp_path / 'export')
  _ok(run_main('--train_steps=20', '--data_dir=' + small_dir, '--model_dir=' + model_dir,
               '--export_dir=' + export_dir, '--skip_host_call', *TINY))
  results = results_of(model_dir)
  records = read_records(os.path.join(small_dir, 'validation-*'))
  examples = [tf.train.Example.FromString(r).features.feature for r in records]
  request = {'images': [e['image/encoded'].bytes_list.value[0].hex() for e in examples],
             'labels': [e['image/class/label'].int64_list.value[0] for e in examples]}
  (tmp_path / 'request.json').write_text(json.dumps(request))
  script = '''
import json, sys
import numpy as np
import tensorflow.compat.v1 as tf
request = json.load(open(sys.argv[2]))
images = [bytes.fromhex(h) for h in request['images']]
with tf.Graph().as_default(), tf.Session() as sess:
  meta = tf.saved_model.load(sess, ['serve'], sys.argv[1])
  sig = meta.signature_def['serving_default']
  out = sess.run({k: v.name for k, v in sig.outputs.items()},
                 {sig.inputs['image_bytes'].name: images})
print(json.dumps({'classes': out['classes'].tolist(),
                  'prob_sums': out['probabilities'].sum(axis=1).tolist()}))
'''
  proc = _ok(subprocess.run([sys.executable, '-c', script, results['export_path'],
                             str(tmp_path / 'request.json')], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, universal_newlines=True, cwd=str(tmp_path)))
  out = json.loads(proc.stdout.strip().splitlines()[-1])
  assert len(out['classes']) == 300
  assert all(abs(s - 1.0) < 1e-4 for s in out['prob_sums'])
  correct = sum(c == l for c, l in zip(out['classes'], request['labels']))
  # Same weights and the same eval preprocessing as evaluation: the same accuracy.
  assert correct == round(results['top_1_accuracy'] * 300)


def test_fake_data_smoke(tmp_path):
  _ok(run_main('--fake_data', '--num_classes=10', '--num_eval_examples=100',
               '--num_train_examples=1000', '--train_steps=2', '--model_dir=' + str(tmp_path),
               *[a for a in TINY if a != '--model=resnet']))
  assert results_of(str(tmp_path))['num_eval_examples'] == 100


# ---- Bad input: a clear message, exit status 2, nothing lost --------------------------------------

def _refused(proc, *fragments):
  assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
  for fragment in fragments:
    assert fragment in proc.stderr, proc.stderr[-2000:]
  assert 'Traceback' not in proc.stderr


def test_missing_data_dir_flag_is_an_error_not_fake_data(tmp_path):
  _refused(run_main('--model_dir=' + str(tmp_path), '--train_steps=1'), '--data_dir is required')


def test_missing_and_empty_data_dir(tmp_path):
  _refused(run_main('--data_dir=' + str(tmp_path / 'nope'), '--model_dir=' + str(tmp_path / 'm'),
                    '--train_steps=1', '--num_classes=10', '--label_offset=0', '--image_size=28',
                    '--num_train_examples=1', '--num_eval_examples=1'), 'does not exist')
  (tmp_path / 'empty').mkdir()
  _refused(run_main('--data_dir=' + str(tmp_path / 'empty'), '--model_dir=' + str(tmp_path / 'm'),
                    '--train_steps=1'), '--num_classes', 'no dataset.json')
  _refused(run_main('--data_dir=' + str(tmp_path / 'empty'), '--model_dir=' + str(tmp_path / 'm'),
                    '--train_steps=1', '--num_classes=10', '--label_offset=0', '--image_size=28',
                    '--num_train_examples=1', '--num_eval_examples=1'), 'no TFRecord files match')


def test_corrupt_tfrecord_is_reported_and_checkpoints_survive(small_dir, tmp_path):
  data_dir = str(tmp_path / 'data')
  shutil.copytree(small_dir, data_dir)
  model_dir = str(tmp_path / 'model')
  common = TINY + ['--data_dir=' + data_dir, '--model_dir=' + model_dir, '--skip_host_call']
  _ok(run_main('--mode=train', '--train_steps=2', *common))
  shard = sorted(glob.glob(os.path.join(data_dir, 'validation-*')))[0]
  blob = bytearray(open(shard, 'rb').read())
  blob[4000:4010] = b'\xff' * 10  # flips bytes inside a record: its CRC no longer matches
  open(shard, 'wb').write(bytes(blob))
  _refused(run_main('--mode=eval', *common), 'corrupt TFRecord data in the eval split', shard)
  assert tf.train.latest_checkpoint(model_dir).endswith('-2')


def test_labels_that_need_an_offset_are_refused(small_dir, tmp_path):
  data_dir = write_subset(small_dir, str(tmp_path / 'data'), 64, 64, label_offset=1)
  _refused(run_main('--train_steps=1', '--data_dir=' + data_dir,
                    '--model_dir=' + str(tmp_path / 'm'), *TINY), 'out of range')


def test_bfloat16_without_tpu_is_refused(small_dir, tmp_path):
  _refused(run_main('--precision=bfloat16', '--train_steps=1', '--data_dir=' + small_dir,
                    '--model_dir=' + str(tmp_path), *TINY), 'bfloat16 needs --use_tpu')


def test_batch_not_divisible_by_cores_is_refused_before_any_work(tmp_path):
  model_dir = tmp_path / 'model'
  start = time.time()
  _refused(run_main('--use_tpu', '--tpu=my-tpu', '--num_cores=8', '--train_batch_size=100',
                    '--train_steps=1', '--data_dir=gs://bkt/data', '--model_dir=gs://bkt/m'),
           '--train_batch_size=100 is not divisible by --num_cores=8')
  assert time.time() - start < 60 and not model_dir.exists()


def test_tpu_with_local_paths_is_refused(small_dir, tmp_path):
  _refused(run_main('--use_tpu', '--tpu=my-tpu', '--train_steps=1', '--data_dir=' + small_dir,
                    '--model_dir=' + str(tmp_path), *TINY), 'a Cloud TPU cannot read')


def test_tpu_flags_without_use_tpu_are_refused(small_dir, tmp_path):
  _refused(run_main('--tpu=my-tpu', '--train_steps=1', '--data_dir=' + small_dir,
                    '--model_dir=' + str(tmp_path), *TINY), '--tpu is only used with --use_tpu')


@requires_isolation
@pytest.mark.parametrize('tpu', ['no-such-tpu', 'grpc://10.240.1.2:8470'])
def test_unreachable_tpu_fails_within_seconds(tpu, tmp_path):
  # Local paths would be refused first: use gs:// ones; nothing is reachable in this namespace.
  start = time.time()
  proc = run_main('--use_tpu', '--tpu=' + tpu, '--train_steps=1', '--fake_data',
                  '--num_classes=10', '--image_size=16', '--train_batch_size=64',
                  '--eval_batch_size=64', '--model_dir=gs://bkt/model', '--tpu_connect_timeout=5')
  elapsed = time.time() - start
  assert proc.returncode == 2, proc.stderr[-3000:]
  assert 'TPU' in proc.stderr and ('unreachable' in proc.stderr or 'resolving' in proc.stderr)
  assert elapsed < 45, elapsed


@requires_isolation
def test_unreachable_bucket_fails_fast_with_a_clear_message(tmp_path):
  # TensorFlow's own gs:// client would retry for ~90 s; the google-cloud-storage check does not.
  start = time.time()
  proc = run_main('--data_dir=gs://no-such-bucket/data', '--model_dir=' + str(tmp_path),
                  '--train_steps=1', '--num_classes=10', '--label_offset=0', '--image_size=16',
                  '--num_train_examples=10', '--num_eval_examples=10', *TINY[:1])
  _refused(proc, 'gs://no-such-bucket')
  assert time.time() - start < 60
