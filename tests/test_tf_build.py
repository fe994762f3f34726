"""trainer/run/tf_build.py: the sessions in which the CNN would run intel-tensorflow 1.15's wrong
fused Conv2D + BiasAdd + Elu get grappler's remapper turned off, and no other session changes.
(The fault itself, and the fix on the real build, are tested end to end by the Keras conversion
test of the CNN trained by intel-tensorflow on an image folder: tests/test_keras_convert.py.)"""

import pytest
import tensorflow.compat.v1 as tf
from tensorflow.core.protobuf import rewriter_config_pb2

from trainer.run import estimator as estimator_lib
from trainer.run import tf_build

from helpers import config_from_args

OFF = rewriter_config_pb2.RewriterConfig.OFF


@pytest.fixture(params=[True, False], ids=['wrong build', 'other build'])
def wrong_build(request, monkeypatch):
  monkeypatch.setattr(tf_build, 'fuses_conv_elu_wrongly', lambda: request.param)
  return request.param


@pytest.mark.parametrize('network', ['cnn', 'resnet', 'inception_v3', 'bilstm', None])
def test_only_the_cnn_on_the_wrong_build_runs_without_the_remapper(wrong_build, network):
  rewrites = estimator_lib.host_session_config(network).graph_options.rewrite_options
  assert (rewrites.remapping == OFF) == (wrong_build and network == 'cnn')
  assert rewrites.meta_optimizer_iterations == rewriter_config_pb2.RewriterConfig.ONE


def test_the_mirrored_estimator_of_the_cnn_gets_it_too(wrong_build, tmp_path):
  config = config_from_args('--fake_data', '--model=cnn', '--image_size=28', '--num_classes=10',
                            '--model_dir=%s' % tmp_path, '--train_steps=1',
                            '--mirrored_devices=/cpu:0,/cpu:1')
  session_config = estimator_lib.build_estimator(config).config.session_config
  assert (session_config.graph_options.rewrite_options.remapping == OFF) == wrong_build


def test_this_build_is_named():
  assert tf_build.tensorflow_build() in ('intel-tensorflow', 'tensorflow-cpu', 'tensorflow-gpu',
                                         'tensorflow')
  assert tf_build.fuses_conv_elu_wrongly() == (
      tf.__version__.startswith('1.') and tf_build.mkl_enabled())
