"""Which TPU `--use_tpu` means, and how fast and how clearly a missing one is reported."""

import time

import pytest

from trainer.tpu import resolver as tpu_resolver

from helpers import requires_isolation
from helpers import run_main
from metadata_standin import MetadataServer


@pytest.mark.parametrize('flag,environ,expected', [
    ('my-tpu', {'TPU_NAME': 'other'}, ('my-tpu', '--tpu')),
    ('grpc://10.0.0.2:8470', {}, ('grpc://10.0.0.2:8470', '--tpu')),
    (None, {'TPU_NAME': 'env-tpu', 'COLAB_TPU_ADDR': '10.0.0.3:8470'}, ('env-tpu', '$TPU_NAME')),
    (None, {'COLAB_TPU_ADDR': '10.0.0.3:8470'}, ('grpc://10.0.0.3:8470', '$COLAB_TPU_ADDR')),
    (None, {'KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS': 'grpc://10.0.0.4:8470'},
     ('grpc://10.0.0.4:8470', '$KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS')),
])
def test_tpu_name_takes_the_flag_then_the_environment_in_order(flag, environ, expected):
  assert tpu_resolver.tpu_name(flag, environ) == expected


def test_no_tpu_anywhere_names_what_was_tried():
  name, tried = tpu_resolver.tpu_name(None, {})
  assert name is None
  for source in ('--tpu', '$TPU_NAME', '$COLAB_TPU_ADDR', '$KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS'):
    assert source in tried


_TPU_RUN = ['--use_tpu', '--train_steps=1', '--fake_data', '--num_classes=10', '--image_size=16',
            '--train_batch_size=64', '--eval_batch_size=64', '--model_dir=gs://bkt/model',
            '--tpu_connect_timeout=5']
_NO_TPU_ENV = dict.fromkeys(['TPU_NAME', 'COLAB_TPU_ADDR', 'KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS'], '')


def test_use_tpu_without_any_tpu_is_refused_naming_the_sources():
  proc = run_main(*_TPU_RUN, env=_NO_TPU_ENV)
  assert proc.returncode == 2, proc.stderr[-3000:]
  assert 'none was given: tried --tpu, $TPU_NAME' in proc.stderr


@requires_isolation
@pytest.mark.parametrize('variable,value', [('TPU_NAME', 'no-such-tpu'),
                                            ('COLAB_TPU_ADDR', '10.240.1.2:8470')])
def test_a_tpu_from_the_environment_that_cannot_be_reached_fails_within_seconds(variable, value):
  start = time.time()
  proc = run_main(*_TPU_RUN, env=dict(_NO_TPU_ENV, **{variable: value}))
  assert proc.returncode == 2, proc.stderr[-3000:]
  assert 'from $%s' % variable in proc.stderr, proc.stderr[-3000:]
  assert time.time() - start < 45


@requires_isolation
def test_local_tpu_of_a_tpu_vm_is_taken_without_probing_an_address(monkeypatch):
  """On a TPU VM (TF 2.x; here the metadata stand-in of a v3-8) --tpu=local resolves to master ''
  (in-process): accepted at once, with no grpc address to probe. TF 1.15 has no TPU VMs and
  says so."""
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top

  from trainer.errors import PipelineError  # pylint: disable=g-import-not-at-top
  with MetadataServer({'accelerator-type': 'v3-8', 'agent-worker-number': '0'}) as server:
    monkeypatch.setenv('GCE_METADATA_HOST', server.host)
    if tf.__version__.startswith('2.'):
      start = time.time()
      resolver = tpu_resolver.resolve_tpu('local', timeout=5)
      assert resolver.master() == '' and time.time() - start < 5
    else:
      with pytest.raises(PipelineError, match='reaches a TPU only as a TPU Node'):
        tpu_resolver.resolve_tpu('local', timeout=5)
