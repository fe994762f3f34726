"""Every TPU a user can create today gets the documented answer from the start-up check
(trainer/tpu/compatibility.py): metadata from a stand-in GCE metadata server on 127.0.0.1, the
environment and TensorFlow version as given. docs/platforms.md lists the same answers. And the
dry run of a job on worker 0 of a TPU VM slice, as a real one would resolve it."""

import socket

import pytest
import tensorflow.compat.v1 as tf

from trainer.errors import PipelineError
from trainer.run import dry_run as dry_run_lib
from trainer.tpu import compatibility
from trainer.tpu import simulated_slice

from helpers import config_from_args
from metadata_standin import MetadataServer

_PJRT = {'NEXT_PLUGGABLE_DEVICE_USE_C_API': 'true',
         'TF_PLUGGABLE_DEVICE_LIBRARY_PATH': '/lib/libtpu.so'}
_POD = {'TPU_LOAD_LIBRARY': '0'}
TF2, TF1 = '2.15.1', '1.15.5'


# (metadata: None = off Google Cloud, {} = a Google Cloud VM that is no TPU VM), environment,
# TF version, --tpu, and the answer: None (runs), 'warn: ...' or the refusal's fragment.
@pytest.mark.parametrize('metadata, environ, version, tpu, answer', [
    # TPU Node (TF 1.15's only way): the VM next to the TPU is no TPU VM; the TPU is named.
    ({}, {}, TF1, 'my-node', None),
    ({}, {}, TF2, 'grpc://10.0.0.2:8470', None),
    (None, {}, TF1, 'my-node', None),
    # TPU VMs, one host: --tpu=local, StreamExecutor (tpu-vm-tf-2.15.1-se).
    ({'accelerator-type': 'v2-8', 'agent-worker-number': '0'}, {}, TF2, 'local', None),
    ({'accelerator-type': 'v3-8', 'agent-worker-number': '0'}, {}, TF2, 'local', None),
    ({'accelerator-type': 'v4-8', 'agent-worker-number': '0'}, {}, TF2, 'local', None),
    ({'accelerator-type': 'v3-8', 'agent-worker-number': '0'}, {}, TF2, 'my-vm',
     'warn: pass --tpu=local'),
    # TPU VM slices: worker 0, the TPU's name, TPU_LOAD_LIBRARY=0 (tpu-vm-tf-2.15.1-pod-se).
    ({'accelerator-type': 'v3-32', 'agent-worker-number': '0'}, _POD, TF2, 'my-slice', None),
    ({'accelerator-type': 'v4-32', 'agent-worker-number': '0'}, _POD, TF2, 'my-slice', None),
    ({'accelerator-type': 'v4-32', 'agent-worker-number': '0'}, {}, TF2, 'my-slice',
     'warn: `export TPU_LOAD_LIBRARY=0`'),
    ({'accelerator-type': 'v4-32', 'agent-worker-number': '2'}, _POD, TF2, 'my-slice',
     'worker 2 of the 4-host slice v4-32: a TPUEstimator job runs on worker 0 only'),
    ({'accelerator-type': 'v2-32', 'agent-worker-number': '0'}, _POD, TF2, 'local',
     '--tpu=local takes only this host\'s TPU, but v2-32 is a slice of 4 hosts'),
    # PJRT: selected on a generation that has StreamExecutor, or the only runtime there is.
    ({'accelerator-type': 'v4-8', 'agent-worker-number': '0'}, _PJRT, TF2, 'local',
     'selects TensorFlow\'s PJRT TPU runtime'),
    ({'accelerator-type': 'v5litepod-8', 'agent-worker-number': '0'}, _PJRT, TF2, 'local',
     'v5e has the PJRT runtime only'),
    ({'accelerator-type': 'v5p-8', 'agent-worker-number': '0'}, _PJRT, TF2, 'local',
     'v5p has the PJRT runtime only'),
    ({'accelerator-type': 'v6e-4', 'agent-worker-number': '0'}, _PJRT, TF2, 'local',
     'v6e (Trillium) has the PJRT runtime only'),
    ({'accelerator-type': 'v5litepod-16', 'agent-worker-number': '0'}, _POD, TF2, 'my-slice',
     'v5e has the PJRT runtime only'),
    # TF 1.15 on a TPU VM, --tpu=local off Google Cloud.
    ({'accelerator-type': 'v3-8', 'agent-worker-number': '0'}, {}, TF1, 'local',
     'TensorFlow 1.15.5 reaches a TPU only as a TPU Node'),
    (None, {}, TF2, 'local', 'this machine is not on Google Cloud'),
])
def test_each_tpu_gets_its_documented_answer(metadata, environ, version, tpu, answer):
  host = compatibility.host_of(metadata, environ, version)
  if answer is None or answer.startswith('warn: '):
    warnings = compatibility.check(host, tpu, environ)
    assert warnings == [] if answer is None else (
        len(warnings) == 1 and answer[len('warn: '):] in warnings[0]), warnings
  else:
    with pytest.raises(PipelineError) as refusal:
      compatibility.check(host, tpu, environ)
    assert answer in str(refusal.value)
    if 'PJRT' in answer:  # the way out names the software version to use
      assert 'tpu-vm-tf-2.15.1-se' in str(refusal.value)


def test_the_metadata_server_is_read_over_http_and_its_absence_means_off_google_cloud(
    monkeypatch):
  # A proxy in the environment is not used: the metadata server is this VM's own.
  monkeypatch.setenv('http_proxy', 'http://127.0.0.1:9')
  monkeypatch.setenv('HTTP_PROXY', 'http://127.0.0.1:9')
  attributes = {'accelerator-type': 'v4-32', 'agent-worker-number': '3', 'other': 'x'}
  with MetadataServer(attributes) as server:
    found = compatibility.read_metadata({'GCE_METADATA_HOST': server.host})
  assert found == {'accelerator-type': 'v4-32', 'agent-worker-number': '3'}
  with MetadataServer({}) as server:  # a Google Cloud VM that is no TPU VM
    assert compatibility.read_metadata({'GCE_METADATA_HOST': server.host}) == {}
    host = server.host
  assert compatibility.read_metadata({'GCE_METADATA_HOST': host}, timeout=2) is None  # gone


def test_the_metadata_read_has_a_total_deadline_and_needs_the_metadata_flavor_header():
  attributes = {'accelerator-type': 'v4-32', 'agent-worker-number': '0'}
  # Each byte comes well within a per-read timeout, the whole answer does not within 1 s.
  with MetadataServer(attributes, trickle_seconds=0.3) as server:
    assert compatibility.read_metadata({'GCE_METADATA_HOST': server.host}, timeout=1.0) is None
  with MetadataServer(attributes, flavor=False) as server:  # something else on that address
    assert compatibility.read_metadata({'GCE_METADATA_HOST': server.host}) is None


def test_dry_run_on_a_tpu_vm_slice_takes_its_slice_from_worker_0(pod_dir, tmp_path, monkeypatch):
  """`--mode=dry_run --use_tpu --tpu=NAME` on worker 0 of a TPU VM slice (stand-ins: the metadata
  server of a v4-32's worker 0, a TPUClusterResolver whose TPU answers on 127.0.0.1 as the
  slice's 4 hosts and 16 devices would): the start-up check passes, the TPU is resolved by name
  and the graphs are built for the slice it reports. --tpu=local there is refused, and so is
  TF 1.15 (TPU VMs run TF 2.x)."""
  tpu_port = socket.socket()  # the TPU's grpc port: reachable, never spoken to
  tpu_port.bind(('127.0.0.1', 0))
  tpu_port.listen(16)
  resolved = []

  class TPUClusterResolver(object):
    def __init__(self, tpu=None, zone=None, project=None):
      resolved.append(tpu)

    def master(self):
      return 'grpc://127.0.0.1:%d' % tpu_port.getsockname()[1]

    def cluster_spec(self):
      return None

  monkeypatch.setattr(tf.distribute.cluster_resolver, 'TPUClusterResolver', TPUClusterResolver)
  monkeypatch.setenv('TPU_LOAD_LIBRARY', '0')
  args = ['--mode=dry_run', '--use_tpu', '--data_dir=' + pod_dir, '--model_dir=' + str(tmp_path),
          '--model=cnn', '--image_size=28', '--train_batch_size=64', '--eval_batch_size=64',
          '--eval_on_tpu=false']
  config = config_from_args('--tpu=my-slice', *args)
  assert config.num_cores is None  # taken from the TPU
  with MetadataServer({'accelerator-type': 'v4-32', 'agent-worker-number': '0'}) as server:
    monkeypatch.setenv('GCE_METADATA_HOST', server.host)
    if tf.__version__.startswith('1.'):  # TPU VMs run TF 2.x
      with pytest.raises(PipelineError, match='TensorFlow 1.15.* reaches a TPU only as a TPU Node'):
        dry_run_lib.dry_run(config)
      tpu_port.close()
      return
    with simulated_slice.simulated_slice(4, 16):  # what the TPU answers
      report = dry_run_lib.dry_run(config)
    with pytest.raises(PipelineError, match='v4-32 is a slice of 4 hosts: pass the TPU\'s name'):
      dry_run_lib.dry_run(config_from_args('--tpu=local', *args))
  assert set(resolved) == {'my-slice'}  # once per graph built
  assert report['simulated'] is False and report['topology'].startswith('grpc://127.0.0.1:')
  assert (report['num_hosts'], report['num_cores'], report['per_core_batch_size']) == (4, 16, 4)
  assert [len(h['train_files']) for h in report['per_host']] == [2, 2, 2, 2]
  assert report['infeed']['enqueue_ops'] == 16 and report['unsupported_ops'] == []
  assert report['evaluation']['eval_examples_read'] == 300  # on the CPU: --eval_on_tpu=false
  assert 'one host only' in report['prediction']['refused']
  with simulated_slice.simulated_slice(4, 16), pytest.raises(
      PipelineError, match='--eval_batch_size=40 is not divisible by the 16 cores'):
    dry_run_lib.dry_run(config_from_args(
        '--mode=dry_run', '--use_tpu', '--tpu=my-slice', '--data_dir=' + pod_dir,
        '--model_dir=' + str(tmp_path), '--model=cnn', '--image_size=28',
        '--train_batch_size=64', '--eval_batch_size=40'))
  tpu_port.close()
