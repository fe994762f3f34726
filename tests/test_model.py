"""ResNet v1.5 and its model_fn: shapes, schedule, weight decay, XLA compilation of the train step."""

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from models import model_fn as model_fn_lib
from models import resnet
from models.config import ModelConfig


def _count_params():
  return sum(int(np.prod(v.shape.as_list())) for v in tf.trainable_variables())


@pytest.mark.parametrize('depth,params_millions', [(18, 11.69), (50, 25.56)])
def test_resnet_matches_the_published_sizes(depth, params_millions):
  # He et al. 2016 / torchvision: ResNet-18 11.69M, ResNet-50 25.56M parameters at 1000 classes.
  with tf.Graph().as_default():
    logits = resnet.resnet_v1_5(tf.zeros([2, 224, 224, 3]), depth, 1000, is_training=True)
    assert logits.shape.as_list() == [2, 1000]
    assert abs(_count_params() / 1e6 - params_millions) < 0.01


def test_v1_5_puts_the_stride_on_the_3x3_conv():
  with tf.Graph().as_default():
    resnet.resnet_v1_5(tf.zeros([1, 64, 64, 3]), 50, 10, is_training=False)
    graph = tf.get_default_graph()
    first_block_of_stage2 = [op for op in graph.get_operations()
                             if op.type == 'Conv2D' and op.name.startswith('stage2_block1/')]
    strides = {tuple(op.get_attr('strides')): op.inputs[1].shape.as_list()[:2]
               for op in first_block_of_stage2 if op.get_attr('strides')[1] == 2}
    # Only the 3x3 conv and the 1x1 projection shortcut are strided; the first 1x1 is not.
    kernels = sorted(op.inputs[1].shape.as_list()[:2] for op in first_block_of_stage2
                     if op.get_attr('strides')[1] == 2)
    assert kernels == [[1, 1], [3, 3]], strides


def test_unsupported_depth_is_refused():
  with pytest.raises(ValueError, match='resnet_depth must be one of'):
    ModelConfig(resnet_depth=20)


def test_learning_rate_warmup_scaling_and_step_decay():
  config = ModelConfig(train_batch_size=512, num_train_examples=51200, base_learning_rate=0.1,
                       warmup_epochs=2, lr_decay_epochs=(4, 6), lr_decay_factor=0.1)
  steps_per_epoch = 100
  with tf.Graph().as_default():
    step = tf.placeholder(tf.int64, [])
    lr = model_fn_lib.learning_rate_schedule(config, step)
    with tf.Session() as sess:
      values = [sess.run(lr, {step: e * steps_per_epoch}) for e in (0, 1, 2, 3.99, 4, 5, 6, 9)]
  peak = 0.1 * 512 / 256
  np.testing.assert_allclose(
      values, [0, peak / 2, peak, peak, peak / 10, peak / 10, peak / 100, peak / 100], rtol=1e-5)


def _features(batch=8, size=32):
  rng = np.random.RandomState(0)
  return ({'image': tf.constant(rng.randn(batch, size, size, 3).astype(np.float32)),
           'mask': tf.ones([batch])},
          tf.constant(rng.randint(0, 10, batch).astype(np.int32)))


def test_weight_decay_skips_batch_norm():
  config = ModelConfig(num_classes=10, weight_decay=1.0, skip_host_call=True)
  with tf.Graph().as_default():
    features, labels = _features()
    model_fn_lib.model_fn_builder(config)(features, labels, tf.estimator.ModeKeys.EVAL, {})
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      decay = sess.run(model_fn_lib._weight_decay(config))  # pylint: disable=protected-access
      expected = sum(np.sum(sess.run(v) ** 2) / 2 for v in tf.trainable_variables()
                     if 'batch_normalization' not in v.name)
      with_bn = sum(np.sum(sess.run(v) ** 2) / 2 for v in tf.trainable_variables())
  np.testing.assert_allclose(decay, expected, rtol=1e-4)
  assert with_bn > expected  # BN gammas (ones) would have added to it


def test_masked_metrics_ignore_padding():
  with tf.Graph().as_default():
    labels = tf.constant([0, 1, 2, 3])
    logits = tf.one_hot([0, 1, 0, 0], 4) * 10.  # right, right, wrong (padding), wrong (padding)
    mask = tf.constant([1., 1., 0., 0.])
    metrics = model_fn_lib.metric_fn(labels, logits, mask)
    with tf.Session() as sess:
      sess.run(tf.local_variables_initializer())
      sess.run({k: v[1] for k, v in metrics.items()})
      values = sess.run({k: v[0] for k, v in metrics.items()})
  assert values['top_1_accuracy'] == 1.0 and values['num_examples'] == 2


def test_resnet_train_step_compiles_with_xla_on_cpu():
  """The whole train step (forward, loss, gradients, momentum update, batch-norm updates) as one
  XLA computation with static shapes: the closest CPU proxy for TPU compatibility."""
  config = ModelConfig(num_classes=10, image_size=32, train_batch_size=8, num_train_examples=80,
                       warmup_epochs=0, skip_host_call=True)
  with tf.Graph().as_default():
    rng = np.random.RandomState(0)
    images = tf.constant(rng.randn(8, 32, 32, 3).astype(np.float32))
    labels = tf.constant(rng.randint(0, 10, 8).astype(np.int32))

    def train_step(images, labels):
      spec = model_fn_lib.model_fn_builder(config)(
          {'image': images, 'mask': tf.ones([8])}, labels, tf.estimator.ModeKeys.TRAIN, {})
      with tf.control_dependencies([spec.train_op]):
        return tf.identity(spec.loss)

    (loss,) = tf.xla.experimental.compile(train_step, [images, labels])
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      options = tf.RunOptions(output_partition_graphs=True)
      metadata = tf.RunMetadata()
      losses = [sess.run(loss, options=options, run_metadata=metadata) for _ in range(4)]
      step = sess.run(tf.train.get_global_step())
  executed = {node.op for graph in metadata.partition_graphs for node in graph.node}
  # What ran was an XLA cluster, not the individual TF kernels.
  assert executed & {'XlaLaunch', '_XlaCompile', '_XlaRun'}, sorted(executed)
  assert 'Conv2D' not in executed and 'Conv2DBackpropFilter' not in executed
  assert step == 4
  assert all(np.isfinite(losses)) and losses[-1] < losses[0]  # same batch: the loss must fall
