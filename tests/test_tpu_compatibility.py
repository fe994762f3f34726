"""Every TPU a user can create today gets the documented answer from the start-up check
(trainer/tpu/compatibility.py): metadata from a stand-in GCE metadata server on 127.0.0.1, the
environment and TensorFlow version as given. docs/platforms.md lists the same answers."""

import pytest

from metadata_standin import MetadataServer
from trainer.errors import PipelineError
from trainer.tpu import compatibility

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


def test_the_metadata_server_is_read_over_http_and_its_absence_means_off_google_cloud():
  attributes = {'accelerator-type': 'v4-32', 'agent-worker-number': '3', 'other': 'x'}
  with MetadataServer(attributes) as server:
    found = compatibility.read_metadata({'GCE_METADATA_HOST': server.host})
  assert found == {'accelerator-type': 'v4-32', 'agent-worker-number': '3'}
  with MetadataServer({}) as server:  # a Google Cloud VM that is no TPU VM
    assert compatibility.read_metadata({'GCE_METADATA_HOST': server.host}) == {}
    host = server.host
  assert compatibility.read_metadata({'GCE_METADATA_HOST': host}, timeout=2) is None  # gone
