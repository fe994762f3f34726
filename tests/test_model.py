"""The networks (ResNet v1.5, InceptionV3, the Colab CNN) and their model_fn: sizes, schedules,
losses, weight decay, XLA compilation of the train step."""

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from trainer.models import cnn
from trainer.models import inception_v3
from trainer.models import model_fn as model_fn_lib
from trainer.models import optimization
from trainer.models import resnet
from trainer.models.model_config import ModelConfig
from trainer.models.recipes import MODEL_DEFAULTS

from helpers import INCEPTION_ON_TF2


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


def test_resnet_at_32px_runs_its_last_stage_3x3_convs_as_their_centre_tap():
  """At 32x32 the last stage's maps are 1x1: its stride-1 3x3 convolutions run as the 1x1
  convolution of their centre tap (models/resnet.py, _conv), with the same values and weight
  gradients as the full 3x3 convolution, and the same [3, 3, in, out] variables."""
  with tf.Graph().as_default():
    resnet.resnet_v1_5(tf.zeros([2, 32, 32, 3]), 18, 10, is_training=True)
    kernels = {v.name: v.shape.as_list() for v in tf.trainable_variables()
               if v.name.startswith('stage4_block2/')}
    assert kernels['stage4_block2/conv2d/kernel:0'] == [3, 3, 512, 512]
    centre_taps = [op for op in tf.get_default_graph().get_operations()
                   if op.type == 'Conv2D' and op.name.startswith('stage4_block2/')
                   and op.inputs[1].shape.as_list()[:2] == [1, 1]]
    assert len(centre_taps) == 2
  rng = np.random.RandomState(0)
  with tf.Graph().as_default():
    x = tf.constant(rng.normal(size=[4, 1, 1, 8]).astype(np.float32))
    centre = resnet._conv(x, 5, 3, 1, 'channels_last')  # pylint: disable=protected-access
    kernel, = tf.trainable_variables()
    full = tf.nn.conv2d(x, kernel, strides=1, padding='SAME')
    gradients = [tf.gradients(tf.reduce_sum(tf.sin(y)), kernel)[0] for y in (centre, full)]
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      centre_value, full_value, centre_grad, full_grad = sess.run([centre, full] + gradients)
  np.testing.assert_allclose(centre_value, full_value, rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(centre_grad, full_grad, rtol=1e-6, atol=1e-6)
  assert np.any(centre_grad[1, 1] != 0) and not np.any(centre_grad[0])  # only the centre learns


def test_unsupported_depth_is_refused():
  with pytest.raises(ValueError, match='resnet_depth must be one of'):
    ModelConfig(resnet_depth=20)


def test_learning_rate_warmup_scaling_and_step_decay():
  config = ModelConfig(train_batch_size=512, num_train_examples=51200, base_learning_rate=0.1,
                       warmup_epochs=2, lr_decay_epochs=(4, 6), lr_decay_factor=0.1)
  steps_per_epoch = 100
  with tf.Graph().as_default():
    step = tf.placeholder(tf.int64, [])
    lr = optimization.learning_rate_schedule(config, step)
    with tf.Session() as sess:
      values = [sess.run(lr, {step: e * steps_per_epoch}) for e in (0, 1, 2, 3.99, 4, 5, 6, 9)]
  peak = 0.1 * 512 / 256
  np.testing.assert_allclose(
      values, [0, peak / 2, peak, peak, peak / 10, peak / 10, peak / 100, peak / 100], rtol=1e-5)


def _features(batch=8, size=32):
  rng = np.random.RandomState(0)
  return ({'image': tf.constant(rng.randint(0, 256, (batch, size, size, 3)).astype(np.uint8)),
           'mask': tf.ones([batch])},
          tf.constant(rng.randint(0, 10, batch).astype(np.int32)))


def test_weight_decay_skips_batch_norm():
  config = ModelConfig(num_classes=10, weight_decay=1.0, skip_host_call=True)
  with tf.Graph().as_default():
    features, labels = _features()
    model_fn_lib.model_fn_builder(config)(features, labels, tf.estimator.ModeKeys.EVAL, {})
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      decay = sess.run(optimization.weight_decay_loss(config))
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


# A small text setting: vocabulary 50, 10 tokens per text.
_TEXT = dict(vocab_size=50, max_seq_length=10, embedding_dim=8, lstm_hidden_units=8)


def _inputs(model, batch, size, rng):
  """Static-shape features and labels for `model`: images, or token ids with their lengths."""
  labels = tf.constant(rng.randint(0, 10, batch).astype(np.int32))
  if model == 'bilstm':
    length = rng.randint(1, _TEXT['max_seq_length'] + 1, batch).astype(np.int32)
    ids = rng.randint(2, _TEXT['vocab_size'], (batch, _TEXT['max_seq_length'])).astype(np.int32)
    ids *= np.arange(_TEXT['max_seq_length']) < length[:, None]
    return {'token_ids': tf.constant(ids), 'length': tf.constant(length),
            'mask': tf.ones([batch])}, labels
  return {'image': tf.constant(rng.randint(0, 256, (batch, size, size, 3)).astype(np.uint8)),
          'mask': tf.ones([batch])}, labels


_XLA_STEPS = 10


@pytest.mark.parametrize('model,image_size', [
    ('resnet', 32), ('cnn', 28), pytest.param('inception_v3', 75, marks=INCEPTION_ON_TF2),
    ('bilstm', 0)])
def test_train_step_compiles_with_xla_on_cpu(model, image_size):
  """The whole train step (forward, loss, gradients, optimizer update, batch-norm updates and, for
  InceptionV3, the auxiliary loss and the weight EMA; for the BiLSTM, both masked recurrences and
  the gradient clipping) as one XLA computation with static shapes: the closest CPU proxy for TPU
  compatibility."""
  batch = 4
  recipe = dict(MODEL_DEFAULTS[model], warmup_epochs=0.0)
  if model == 'inception_v3':
    recipe['base_learning_rate'] = 0.3  # 0.165 * 4 / 256 barely moves the loss in a few steps
  if model == 'bilstm':
    recipe.update(_TEXT, base_learning_rate=0.01)
  config = ModelConfig(model=model, num_classes=10, image_size=image_size, train_batch_size=batch,
                       num_train_examples=40, skip_host_call=True, **recipe)
  with tf.Graph().as_default():
    tf.set_random_seed(0)  # initial weights; dropout inside the XLA cluster does not follow it
    features, labels = _inputs(model, batch, image_size, np.random.RandomState(0))

    def train_step(features, labels):
      spec = model_fn_lib.model_fn_builder(config)(
          features, labels, tf.estimator.ModeKeys.TRAIN, {})
      with tf.control_dependencies([spec.train_op]):
        return tf.identity(spec.loss)

    (loss,) = tf.xla.experimental.compile(train_step, [features, labels])
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      options = tf.RunOptions(output_partition_graphs=True)
      metadata = tf.RunMetadata()
      losses = [sess.run(loss, options=options, run_metadata=metadata) for _ in range(_XLA_STEPS)]
      step = sess.run(tf.train.get_global_step())
      averages = [v for v in tf.global_variables() if 'ExponentialMovingAverage' in v.name]
  executed = {node.op for graph in metadata.partition_graphs for node in graph.node}
  # What ran was an XLA cluster, not the individual TF kernels.
  assert executed & {'XlaLaunch', '_XlaCompile', '_XlaRun'}, sorted(executed)
  assert not executed & {'Conv2D', 'Conv2DBackpropFilter', 'MatMul'}, sorted(executed)
  assert step == _XLA_STEPS
  # Same batch: the loss must fall.
  # Dropout inside the XLA cluster is not reproducible from the graph
  # seed and single steps at batch 4 are noisy, so the mean of the last three steps is compared.
  assert all(np.isfinite(losses)) and np.mean(losses[-3:]) < losses[0], losses
  assert bool(averages) == (config.moving_average_decay > 0)


# ---- InceptionV3 and the Colab CNN ---------------------------------------------------------------

def _trainable_params(exclude=None):
  return sum(int(np.prod(v.shape.as_list())) for v in tf.trainable_variables()
             if exclude is None or exclude not in v.name)


def test_inception_v3_matches_the_published_size():
  # Keras applications InceptionV3 (weights=None, 1000 classes, no auxiliary head): 23,817,352
  # trainable parameters; the same trunk and classifier must hold exactly as many.
  with tf.Graph().as_default():
    logits, aux_logits = inception_v3.inception_v3(tf.zeros([1, 299, 299, 3]), 1000, True)
    assert logits.shape.as_list() == [1, 1000] and aux_logits.shape.as_list() == [1, 1000]
    assert _trainable_params(exclude=inception_v3.AUX_SCOPE) == 23817352
    # The auxiliary head of Szegedy et al. 2016, Sec. 4: 1x1 conv 128, 5x5 conv 768, classifier.
    assert _trainable_params() - 23817352 == (768 * 128 + 128) + (128 * 25 * 768 + 768) + (
        768 * 1000 + 1000)


def test_inception_v3_runs_at_75x75_and_refuses_smaller_inputs():
  with tf.Graph().as_default():
    logits, aux_logits = inception_v3.inception_v3(tf.zeros([2, 75, 75, 3]), 10, True)
    assert logits.shape.as_list() == [2, 10] and aux_logits.shape.as_list() == [2, 10]
  with tf.Graph().as_default():
    _, no_aux = inception_v3.inception_v3(tf.zeros([2, 75, 75, 3]), 10, False)
    assert no_aux is None  # the auxiliary head exists only for the training loss
  with tf.Graph().as_default(), pytest.raises(ValueError, match='at least 75x75'):
    inception_v3.inception_v3(tf.zeros([2, 74, 74, 3]), 10, True)
  with pytest.raises(ValueError, match='at least 75x75 pixels, got --image_size=74'):
    ModelConfig(model='inception_v3', image_size=74)


def test_cnn_has_the_colab_demo_layers():
  with tf.Graph().as_default():
    logits = cnn.cnn(tf.zeros([4, 28, 28, 3]), 10, is_training=True)
    assert logits.shape.as_list() == [4, 10]
    convs = [op for op in tf.get_default_graph().get_operations() if op.type == 'Conv2D']
    assert [op.inputs[1].shape.as_list() for op in convs] == [
        [5, 5, 3, 64], [5, 5, 64, 128], [5, 5, 128, 256]]
    # BN (beta, gamma) + 5x5 conv with bias, three times; Dense 2304->256 (28 / 2^3 = 3; 3*3*256);
    # Dense 256->10.
    expected = (2 * 3 + 5 * 5 * 3 * 64 + 64) + (2 * 64 + 5 * 5 * 64 * 128 + 128) + (
        2 * 128 + 5 * 5 * 128 * 256 + 256) + (2304 * 256 + 256) + (256 * 10 + 10)
    assert _trainable_params() == expected


def test_cnn_elu_matches_tf_nn_elu_in_value_and_gradient():
  x_values = np.array([-50., -3., -0.5, -1e-4, 0., 1e-4, 0.5, 3., 80.], np.float32)
  with tf.Graph().as_default():
    x = tf.constant(x_values)
    ours, reference = cnn.elu(x), tf.nn.elu(x)
    grads = tf.gradients(ours, x)[0], tf.gradients(reference, x)[0]
    with tf.Session() as sess:
      (value, ref_value), (grad, ref_grad) = sess.run([(ours, reference), grads])
  np.testing.assert_allclose(value, ref_value, rtol=1e-6, atol=1e-7)
  np.testing.assert_allclose(grad, ref_grad, rtol=1e-6, atol=1e-7)
  assert np.isfinite(grad).all()


def test_exponential_and_constant_schedules():
  config = ModelConfig(model='inception_v3', image_size=75, train_batch_size=512,
                       num_train_examples=51200, lr_schedule='exponential',
                       base_learning_rate=0.1, warmup_epochs=1, lr_decay_every_epochs=2,
                       lr_decay_factor=0.94)
  constant = ModelConfig(model='cnn', lr_schedule='constant', base_learning_rate=1e-3,
                         train_batch_size=512)
  with tf.Graph().as_default():
    step = tf.placeholder(tf.int64, [])
    lr = optimization.learning_rate_schedule(config, step)
    lr_constant = optimization.learning_rate_schedule(constant, step)
    with tf.Session() as sess:
      values = [sess.run(lr, {step: e * 100}) for e in (0, 0.5, 1, 2.99, 3, 5, 7)]
      constants = {float(sess.run(lr_constant, {step: s})) for s in (0, 1000, 10 ** 6)}
  peak = 0.1 * 512 / 256
  np.testing.assert_allclose(
      values, [0, peak / 2, peak, peak, peak * 0.94, peak * 0.94 ** 2, peak * 0.94 ** 3], rtol=1e-5)
  np.testing.assert_allclose(sorted(constants), [1e-3], rtol=1e-6)  # unscaled, never decays


def test_inception_loss_includes_the_weighted_auxiliary_loss():
  config = ModelConfig(model='inception_v3', image_size=75, num_classes=10, weight_decay=0.0,
                       label_smoothing=0.0, aux_loss_weight=0.4, skip_host_call=True)
  with tf.Graph().as_default():
    tf.set_random_seed(0)
    features, labels = _features(batch=4, size=75)
    spec = model_fn_lib.model_fn_builder(config)(features, labels, tf.estimator.ModeKeys.TRAIN, {})
    graph = tf.get_default_graph()
    logits = graph.get_tensor_by_name('logits/BiasAdd:0')
    aux = graph.get_tensor_by_name(inception_v3.AUX_SCOPE + '/Squeeze:0')
    xent = lambda l: tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=l))
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      # One run: dropout and batch statistics are the same for every fetched value.
      loss, main, auxiliary = sess.run([spec.loss, xent(logits), xent(aux)])
  np.testing.assert_allclose(loss, main + 0.4 * auxiliary, rtol=1e-5)


@pytest.mark.parametrize('model,image_size', [('resnet', 32), ('cnn', 28), ('inception_v3', 75),
                                              ('bilstm', 0)])
def test_tpu_variant_builds_in_bfloat16(model, image_size):
  """With use_tpu the gradients are summed across replicas (CrossShardOptimizer) and the network
  runs in bfloat16 with float32 variables; this builds that graph (running it needs a TPU)."""
  config = ModelConfig(model=model, image_size=image_size, use_tpu=True, precision='bfloat16',
                       skip_host_call=True, **dict(MODEL_DEFAULTS[model], **(
                           _TEXT if model == 'bilstm' else {})))
  with tf.Graph().as_default():
    features, labels = _inputs(model, 2, image_size, np.random.RandomState(0))
    spec = model_fn_lib.model_fn_builder(config)(features, labels, tf.estimator.ModeKeys.TRAIN,
                                                 {'batch_size': 2})
    ops = tf.get_default_graph().get_operations()
    assert any(op.type == 'CrossReplicaSum' for op in ops)
    assert any(op.type in ('Conv2D', 'MatMul') and op.inputs[0].dtype == tf.bfloat16 for op in ops)
    assert all(v.dtype.base_dtype == tf.float32 for v in tf.global_variables()
               if v.dtype.base_dtype.is_floating)
    assert spec.loss.dtype == tf.float32


@pytest.mark.parametrize('model,image_size', [('resnet', 32), ('bilstm', 0)])
def test_cpu_export_graph_of_a_bfloat16_tpu_model_is_float32(model, image_size):
  """TPUEstimator builds the SavedModel's CPU graph (export_to_tpu=False) with params['use_tpu']
  False: that graph must hold no bfloat16 op (CPU/GPU TensorFlow cannot run bfloat16 Conv2D or
  MatMul) and no cross-replica op. The same config with params['use_tpu'] True still builds the
  bfloat16 TPU graph."""
  config = ModelConfig(model=model, image_size=image_size, use_tpu=True, precision='bfloat16',
                       skip_host_call=True, **dict(MODEL_DEFAULTS[model], **(
                           _TEXT if model == 'bilstm' else {})))

  def predict_graph_dtypes(params):
    with tf.Graph().as_default() as graph:
      features, _ = _inputs(model, 2, image_size, np.random.RandomState(0))
      spec = model_fn_lib.model_fn_builder(config)(features, None, tf.estimator.ModeKeys.PREDICT,
                                                   params)
      assert spec.predictions['logits'].dtype == tf.float32
      return {t.dtype.base_dtype for op in graph.get_operations() for t in op.outputs}

  assert tf.bfloat16 not in predict_graph_dtypes({'use_tpu': False})
  assert tf.bfloat16 in predict_graph_dtypes({'use_tpu': True})


def test_host_call_writer_flushes_once_per_iterations_per_loop(tmp_path):
  """The host_call's summary writer queues iterations_per_loop steps of events between flushes
  (a gs:// events file is uploaded whole at each flush)."""
  config = ModelConfig(num_classes=10, model_dir=str(tmp_path), iterations_per_loop=37)
  with tf.Graph().as_default() as graph:
    features, labels = _features()
    spec = model_fn_lib.model_fn_builder(config)(features, labels, tf.estimator.ModeKeys.TRAIN,
                                                 {})
    host_call_fn, tensors = spec.host_call
    host_call_fn(*tensors)
    (writer,) = [op for op in graph.get_operations() if op.type == 'CreateSummaryFileWriter']
    with tf.Session() as sess:
      assert sess.run(writer.inputs[2]) == 37  # (writer, logdir, max_queue, ...)


def test_bfloat16_bilstm_keeps_its_cell_state_in_float32():
  """Under --precision=bfloat16 the LSTM's recurrence runs in float32 (its cell state would be
  rounded to 8 bits of mantissa at every step in bfloat16) while the classifier is bfloat16."""
  config = ModelConfig(model='bilstm', use_tpu=True, precision='bfloat16', skip_host_call=True,
                       **dict(MODEL_DEFAULTS['bilstm'], **_TEXT))
  with tf.Graph().as_default() as graph:
    features, labels = _inputs('bilstm', 2, 0, np.random.RandomState(0))
    model_fn_lib.model_fn_builder(config)(features, labels, tf.estimator.ModeKeys.EVAL,
                                          {'use_tpu': True})
    graph_def = graph.as_graph_def()
  # TF 2.x builds the recurrence as a functional While: its body is in the function library.
  nodes = list(graph_def.node) + [n for f in graph_def.library.function for n in f.node_def]
  matmuls = [(n.name, tf.as_dtype(n.attr['T'].type)) for n in nodes if n.op == 'MatMul']
  in_lstm = {dtype for name, dtype in matmuls if not name.startswith('logits/')}
  in_head = [dtype for name, dtype in matmuls if name.startswith('logits/')]
  assert in_lstm == {tf.float32}
  assert in_head == [tf.bfloat16]


@pytest.mark.parametrize('nesterov', [False, True])
def test_nesterov_momentum_is_used_when_asked(nesterov):
  config = ModelConfig(num_classes=10, nesterov=nesterov, skip_host_call=True)
  with tf.Graph().as_default() as graph:
    features, labels = _features()
    model_fn_lib.model_fn_builder(config)(features, labels, tf.estimator.ModeKeys.TRAIN, {})
    updates = [op for op in graph.get_operations() if 'ApplyMomentum' in op.type]
  assert updates and {op.get_attr('use_nesterov') for op in updates} == {nesterov}


@pytest.mark.parametrize('model, image_size', [('resnet', 32), ('inception_v3', 75), ('cnn', 28),
                                               ('bilstm', 0)])
def test_freeze_backbone_trains_only_the_classifier(model, image_size):
  """With freeze_backbone the optimizer gets (and makes slots for) the classifier's variables
  only: the scope each network names as its classifier holds its logits layer."""
  recipe = dict(MODEL_DEFAULTS[model], **(_TEXT if model == 'bilstm' else {}))
  config = ModelConfig(model=model, num_classes=7, image_size=image_size, train_batch_size=2,
                       skip_host_call=True, freeze_backbone=True, **recipe)
  with tf.Graph().as_default():
    features, labels = _inputs(model, 2, image_size, np.random.RandomState(0))
    spec = model_fn_lib.model_fn_builder(config)(features, labels % 7,
                                                 tf.estimator.ModeKeys.TRAIN, {})
    assert spec.train_op is not None
    trainable = {v.op.name for v in tf.trainable_variables()}
    # Optimizer slots are named <variable>/<optimizer name>; weight averages (InceptionV3's
    # recipe keeps them for every weight) are not slots.
    with_slots = {v.op.name.rsplit('/', 1)[0] for v in tf.global_variables()
                  if v.op.name not in trainable and v.op.name.rsplit('/', 1)[0] in trainable
                  and not v.op.name.endswith('ExponentialMovingAverage')}
  assert with_slots == {config.classifier_scope + '/kernel', config.classifier_scope + '/bias'}
  assert len(trainable) > 5  # the frozen backbone's weights are there, just not trained
