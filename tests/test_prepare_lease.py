"""trainer.prepare under its writer's lease (issue 56): a conversion that lost the lease of its
--output_dir makes nothing more visible there, in this process (every staged rename checks the
lease: trainer/storage/staged.py) or in a Beam worker (the holder's token: writer_token.py); and
a Dataflow job its launcher started is named in the lease until it ends, so that no run takes
the directory over while the job's workers may write (trainer/prepare/beam_job.py).

No Dataflow job runs here: the lease's record and the refusal are tested with the lease the
launcher writes; the DoFns are Beam's own, called as a worker calls them."""

import json
import os
import subprocess
import uuid

import numpy as np
import pytest
from stalled_runs import storage_blob
import tensorflow.compat.v1 as tf
from test_lease import needs_gcs

from trainer.data import dataset_json
from trainer.prepare import beam_convert
from trainer.storage import lease as lease_lib
from trainer.storage import lease_stores
from trainer.storage import staged
from trainer.storage import writer_token

pure_python = pytest.mark.one_runtime('the lease and the staged write are pure Python')


def _dead_pid():
  proc = subprocess.Popen(['true'])
  proc.wait()
  return proc.pid


def _taken_over(directory, holder):
  """What a run that took `holder`'s lease over leaves in the store: its own token."""
  content = dict(lease_stores.this_process('trainer.prepare'), token=uuid.uuid4().hex, beats=0,
                 expiry_secs=holder.expiry_secs)
  gcs = lease_stores.object_path(directory)
  if gcs:
    store = lease_stores.GcsStore('%s/%s' % (gcs, lease_lib.LEASE_FILE))
    store.replace(content, store.read()[1])
  else:  # the holder's process died (its lock went with it); the taker's lease file
    holder.release()
    with open(os.path.join(directory, lease_lib.LEASE_FILE), 'w') as f:
      json.dump(content, f)
  return content


def _directory(where, tmp_path):
  return str(tmp_path / 'out') if where == 'local' else 'gs://bkt/prepare-%s' % uuid.uuid4().hex[:12]


@pure_python
@pytest.mark.parametrize('where', ['local', pytest.param('gs', marks=needs_gcs)])
def test_a_conversion_that_lost_its_lease_renames_nothing_into_the_directory(where, tmp_path):
  """While the lease is the conversion's, its staged writes and its workers' token checks pass;
  once another run holds it, dataset.json is refused (LeaseLost) and the directory keeps what
  was there, and a worker's check names the new holder."""
  directory = _directory(where, tmp_path)
  holder = lease_lib.Lease(directory, '--output_dir', 12, 'trainer.prepare').acquire()
  token = writer_token.WriterToken(holder.directory, holder.token, '--output_dir')
  with staged.commits_checked(directory, lambda path: holder.check()):
    dataset_json.write(directory, {'name': 'first'})
    token.check(dataset_json.path_of(directory))
    taker = _taken_over(directory, holder)
    with pytest.raises(lease_lib.LeaseLost, match='lost the writer\'s lease'):
      dataset_json.write(directory, {'name': 'second'})
  with tf.io.gfile.GFile(dataset_json.path_of(directory)) as f:
    assert json.load(f) == {'name': 'first'}
  assert not [n for n in tf.io.gfile.listdir(directory) if staged.final_name(n)]
  with pytest.raises(lease_lib.LeaseLost, match='another run holds it: .*pid %d' % taker['pid']):
    token.check(dataset_json.path_of(directory))
  holder.release()


def _png(value):
  with tf.Graph().as_default(), tf.Session() as session:
    return session.run(tf.image.encode_png(np.full((8, 8, 3), value, np.uint8)))


def test_a_beam_worker_of_a_conversion_that_lost_its_lease_writes_no_shard_and_no_dataset_json(
    tmp_path):
  """Beam's WriteShard and the pipeline's last step, called as a worker calls them with the
  holder's token: they write while the lease is the holder's, and once another run took it over
  write nothing (no shard, no dataset.json, no file left aside) and fail with LeaseLost."""
  source = tmp_path / 'images'
  source.mkdir()
  items = []
  for i in range(2):
    (source / ('%d.png' % i)).write_bytes(_png(40 * i))
    items.append(beam_convert.Item(str(source / ('%d.png' % i)), i, 'c%d' % i, '%d.png' % i))
  out = str(tmp_path / 'out')
  holder = lease_lib.Lease(out, '--output_dir', 12, 'trainer.prepare').acquire()
  token = writer_token.WriterToken(holder.directory, holder.token, '--output_dir')
  writer = beam_convert.WriteShard(out, False, False, False, token)
  writer.setup()
  try:
    shard = {'split': 'train', 'index': 0, 'num_shards': 1, 'items': [tuple(items[0])]}
    (summary,) = list(writer.process(shard))
    assert summary['count'] == {'train': 1}
    _taken_over(out, holder)
    with pytest.raises(lease_lib.LeaseLost, match='validation-00000-of-00001 was not written'):
      list(writer.process(dict(shard, split='validation', items=[tuple(items[1])])))
  finally:
    writer.teardown()
  info = {'name': 'x', 'class_names': ['c0', 'c1'], 'num_classes': 2}
  both = dict(summary, count={'train': 1, 'validation': 1})  # as if the second shard landed
  with pytest.raises(lease_lib.LeaseLost, match='dataset.json was not written'):
    beam_convert.write_dataset_json(both, out, info, token)
  assert sorted(os.listdir(out)) == ['train-00000-of-00001', lease_lib.LEASE_FILE]


@pure_python
@pytest.mark.parametrize('where', ['local', pytest.param('gs', marks=needs_gcs)])
def test_a_dataflow_job_named_in_a_dead_launchers_lease_keeps_the_directory(where, tmp_path):
  """The launcher records its Dataflow job in the lease (beam_job.run_to_end). On gs:// (where
  Dataflow writes) a run that finds the lease of a dead launcher still naming a job refuses,
  naming the job with the gcloud commands to see and cancel it; once the record says the job
  ended, it takes over as from any dead holder."""
  directory = _directory(where, tmp_path)
  holder = lease_lib.Lease(directory, '--output_dir', 12, 'trainer.prepare').acquire()
  job = {'dataflow_job': '2026-11-29_10_11_12-123', 'dataflow_project': 'proj',
         'dataflow_region': 'us-central1'}
  holder.record(**job)
  if where == 'local':
    with open(os.path.join(directory, lease_lib.LEASE_FILE)) as f:
      assert {k: v for k, v in json.load(f).items() if k in job} == job
    holder.release()
    return
  blob = storage_blob(directory, lease_lib.LEASE_FILE)
  dead = dict(json.loads(blob.download_as_bytes()), pid=_dead_pid())
  assert {k: dead[k] for k in job} == job
  blob.upload_from_string(json.dumps(dead))
  taker = lease_lib.Lease(directory, '--output_dir', 12, 'trainer.prepare')
  with pytest.raises(lease_lib.LeaseHeld) as refusal:
    taker.acquire()
  message = str(refusal.value)
  assert 'Dataflow job 2026-11-29_10_11_12-123' in message
  assert ('gcloud dataflow jobs cancel 2026-11-29_10_11_12-123 --project=proj '
          '--region=us-central1') in message
  assert 'gcloud storage rm %s/%s' % (directory, lease_lib.LEASE_FILE) in message
  blob.upload_from_string(json.dumps(dict(dead, dataflow_job=None)))
  taker.acquire()
  assert taker.took_over['pid'] == dead['pid']
  taker.release()
