"""Warm start (--init_checkpoint): name-and-shape matching, the Cloud TPU reference ResNet's
layout, weight moving averages, the refusals, and fine-tuning through the CLI on real data."""

import json
import os

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from trainer.models import resnet
from trainer.models import warm_start

from helpers import ok
from helpers import refused
from helpers import results_of
from helpers import run_main

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'fixtures')


def _reference_checkpoint(depth, path):
  """A checkpoint with the variables (names, shapes, creation order) of the Cloud TPU reference
  ResNet (tensorflow/tpu r1.15 resnet_model.py, 1001 classes) after one momentum step, as listed
  in tests/fixtures from a checkpoint that code wrote; seeded random values.
  Returns {name: value}."""
  with open(os.path.join(FIXTURES, 'reference_resnet%d_variables.json' % depth)) as f:
    variables = json.load(f)
  rng = np.random.RandomState(depth)
  values = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in variables
            if name != 'global_step'}
  with tf.Graph().as_default():
    for name, value in values.items():
      tf.Variable(value, name=name)
    step = tf.train.get_or_create_global_step()
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(step.assign(1))
      tf.train.Saver().save(sess, path, global_step=1)
  return values


def _resnet_variables(depth, num_classes):
  variables = []

  def record(next_creator, **kwargs):
    variables.append(next_creator(**kwargs))
    return variables[-1]

  with tf.variable_creator_scope(record):
    resnet.resnet_v1_5(tf.zeros([1, 64, 64, 3]), depth, num_classes, is_training=True)
  return variables


@pytest.mark.tf1_share('the reference checkpoints are TF 1.x\'s; TF 2.15 warm-starts through the '
                       'CLI in test_fine_tuning_through_the_cli')
def test_a_reference_resnet50_checkpoint_initialises_every_weight(tmp_path):
  values = _reference_checkpoint(50, str(tmp_path / 'model.ckpt'))
  network = {n: v for n, v in values.items() if not n.endswith('/Momentum')}
  assert len(network) == 267
  with tf.Graph().as_default():
    variables = _resnet_variables(50, 1001)
    prefix, restore, skipped, layout = warm_start.assignment_map(str(tmp_path), variables,
                                                                 'resnet', 1001)
    assert prefix == str(tmp_path / 'model.ckpt-1')
    assert layout == 'Cloud TPU reference ResNet' and not skipped
    assert sorted(restore) == sorted(network)  # every reference weight lands, once
    tf.train.init_from_checkpoint(prefix, restore)
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      for name, variable in restore.items():
        np.testing.assert_array_equal(sess.run(variable), network[name], err_msg=name)
  # The layers pair up by role: the stem, stage 1's projection, the last block's last batch norm.
  by_name = {v.op.name: n for n, v in restore.items()}
  assert by_name['conv2d/kernel'] == 'conv2d/kernel'
  assert by_name['stage1_block1/conv2d/kernel'] == 'conv2d_1/kernel'
  assert by_name['stage4_block3/batch_normalization_2/gamma'] == 'batch_normalization_52/gamma'


def test_another_class_count_keeps_the_classifier_initialised(tmp_path):
  _reference_checkpoint(50, str(tmp_path / 'model.ckpt'))
  with tf.Graph().as_default():
    variables = _resnet_variables(50, 10)
    _, restore, skipped, _ = warm_start.assignment_map(str(tmp_path), variables, 'resnet', 10)
  assert len(restore) == 265
  assert [s.split(' ')[0] for s in skipped] == ['dense/kernel', 'dense/bias']


def test_a_reference_resnet18_checkpoint_is_refused_for_its_extra_projection(tmp_path):
  _reference_checkpoint(18, str(tmp_path / 'model.ckpt'))
  with tf.Graph().as_default():
    variables = _resnet_variables(18, 1001)
    with pytest.raises(ValueError, match=r'reference ResNet with 21 convolutions; this ResNet '
                                         r'has 20\. The reference ResNet-18/34 projects'):
      warm_start.assignment_map(str(tmp_path), variables, 'resnet', 1001)


def test_moving_averages_and_refusals(tmp_path):
  """--init_from_moving_average takes `<name>/ExponentialMovingAverage`; a checkpoint without
  averages, a path that is no checkpoint, and a checkpoint of another network are refused."""
  prefix = str(tmp_path / 'ema' / 'model.ckpt')
  with tf.Graph().as_default():
    tf.Variable(np.ones([3, 2], np.float32), name='dense/kernel')
    tf.Variable(np.full([3, 2], 7, np.float32), name='dense/kernel/ExponentialMovingAverage')
    tf.Variable(np.ones([2], np.float32), name='batch_normalization/moving_mean')
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      tf.train.Saver().save(sess, prefix)
  with tf.Graph().as_default():
    kernel = tf.get_variable('dense/kernel', [3, 2])
    mean = tf.get_variable('batch_normalization/moving_mean', [2])
    _, restore, _, _ = warm_start.assignment_map(prefix, [kernel, mean], 'cnn', 2, True)
    assert restore == {'dense/kernel/ExponentialMovingAverage': kernel,
                       'batch_normalization/moving_mean': mean}
    tf.train.init_from_checkpoint(prefix, restore)
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      assert (sess.run(kernel) == 7).all()
  with tf.Graph().as_default():
    other = [tf.get_variable('dense/kernel', [3, 2]), tf.get_variable('x', [4]),
             tf.get_variable('y', [5])]
    with pytest.raises(ValueError, match='matches only 1 of this network\'s 3 variables'):
      warm_start.assignment_map(prefix, other, 'cnn', 2)
  _reference_checkpoint(18, str(tmp_path / 'plain' / 'model.ckpt'))
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='holds no moving averages'):
      warm_start.assignment_map(str(tmp_path / 'plain'), [tf.get_variable('conv2d/kernel', [1])],
                                'cnn', 2, True)
  with pytest.raises(ValueError, match='is not a checkpoint: .*nothing.index does not exist'):
    warm_start.checkpoint_prefix(str(tmp_path / 'nothing'))
  with pytest.raises(ValueError, match='is a directory without a checkpoint'):
    warm_start.checkpoint_prefix(str(tmp_path))


@pytest.fixture(scope='module')
def four_classes_dir(fashion_mnist_dir, tmp_path_factory):
  """Real Fashion-MNIST images of classes 6-9 only, relabelled 0-3: another data set, with
  another class count, than the 10-class one a checkpoint is pre-trained on."""
  from trainer.data import dataset_json
  from trainer.data import shards

  from helpers import read_records
  out = str(tmp_path_factory.mktemp('four_classes'))
  for split, count in ((shards.TRAIN_SPLIT, 400), (shards.EVAL_SPLIT, 1000)):
    kept = []
    for record in read_records(os.path.join(fashion_mnist_dir, split + '-*')):
      example = tf.train.Example.FromString(record)
      label = example.features.feature['image/class/label'].int64_list.value[0]
      if label >= 6:
        example.features.feature['image/class/label'].int64_list.value[0] = label - 6
        kept.append(example.SerializeToString())
        if len(kept) == count:
          break
    shards.write_shards(out, split, kept, 2)
  info = dataset_json.read(fashion_mnist_dir)
  info.update(num_classes=4, class_names=info['class_names'][6:], num_train_examples=400,
              num_eval_examples=1000)
  dataset_json.write(out, info)
  return out


@pytest.mark.one_runtime('TF 1.15 maps a warm start onto the reference ResNet-50 (every weight) '
                         'and a TPU slice\'s scaffold_fn in this file\'s other tests; the CLI\'s '
                         'restore and resume logic is the same Python, trained here on TF 2.15')
def test_fine_tuning_through_the_cli(small_dir, four_classes_dir, tmp_path):
  """A CNN trained on 10-class Fashion-MNIST warm-starts a 4-class run: all but the classifier
  restored and logged; a re-run in the same model_dir resumes its own checkpoint instead; a
  checkpoint of another network is refused."""
  common = ['--model=cnn', '--image_size=28', '--train_batch_size=32', '--eval_batch_size=100',
            '--seed=1', '--log_every_n_secs=5']
  pretrained = str(tmp_path / 'pretrained')
  ok(run_main('--data_dir=' + small_dir, '--model_dir=' + pretrained, '--train_steps=20',
              '--mode=train', *common))
  model_dir = str(tmp_path / 'fine_tuned')
  args = ['--data_dir=' + four_classes_dir, '--model_dir=' + model_dir,
          '--init_checkpoint=' + pretrained, '--mode=train'] + common + ['--seed=2']
  first = ok(run_main('--train_steps=10', *args))
  # The weights started from the pre-trained ones: 10 Adam steps at 1e-3 move each by ~0.01,
  # while another seed's initial weights differ from them by far more.
  kernel = 'block2/conv2d/kernel'
  pre = tf.train.load_variable(pretrained, kernel)
  tuned = tf.train.load_variable(model_dir, kernel)
  fresh_dir = str(tmp_path / 'fresh')
  ok(run_main('--data_dir=' + four_classes_dir, '--model_dir=' + fresh_dir, '--mode=train',
              '--train_steps=1', *common, '--seed=2'))
  fresh = tf.train.load_variable(fresh_dir, kernel)
  assert np.abs(tuned - pre).max() < 0.02 < np.abs(fresh - pre).max()
  assert ('Warm start from %s/model.ckpt-20 (this project layout): 20 of 22 network variables '
          'restored' % pretrained) in first.stderr, first.stderr[-3000:]
  assert 'Warm start: 2 variables keep their initializers' in first.stderr
  assert 'logits/kernel [256, 4] (checkpoint: [256, 10])' in first.stderr
  # A restarted fine-tune resumes its own checkpoint, even when the init checkpoint is gone.
  os.rename(pretrained, pretrained + '-moved')
  resumed = ok(run_main('--train_steps=15', *args))
  os.rename(pretrained + '-moved', pretrained)
  assert 'holds a checkpoint of its own: resuming it' in resumed.stderr
  assert 'Restoring parameters from %s/model.ckpt-10' % model_dir in resumed.stderr
  assert results_of(model_dir)['global_step'] == 15
  # MirroredStrategy over two CPU replicas (the second replica's variables match too), with
  # --freeze_backbone: only the classifier trains (it alone has optimizer slots), every other
  # weight keeps the pre-trained value exactly.
  mirrored_dir = str(tmp_path / 'mirrored')
  mirrored = ok(run_main('--data_dir=' + four_classes_dir, '--model_dir=' + mirrored_dir,
                         '--init_checkpoint=' + pretrained, '--mode=train', '--train_steps=2',
                         '--mirrored_devices=/cpu:0,/cpu:1', '--freeze_backbone', *common,
                         '--seed=2'))
  assert 'Warm start from %s/model.ckpt-20' % pretrained in mirrored.stderr
  names = [n for n, _ in tf.train.list_variables(mirrored_dir)]
  assert sorted(n for n in names if n.endswith('/Adam')) == ['logits/bias/Adam',
                                                              'logits/kernel/Adam']
  for name in names:
    if name.endswith(('kernel', 'bias', 'gamma', 'beta')) and not name.startswith('logits/'):
      np.testing.assert_array_equal(tf.train.load_variable(mirrored_dir, name),
                                    tf.train.load_variable(pretrained, name), err_msg=name)
  refused(run_main('--data_dir=' + four_classes_dir, '--model_dir=' + str(tmp_path / 'r'),
                   '--init_checkpoint=' + pretrained, '--train_steps=1', '--model=resnet',
                   '--resnet_depth=18', '--image_size=28', '--train_batch_size=32'),
          '--model=resnet disagrees with the network recorded in %s/model_config.json '
          '(model=cnn)' % pretrained, "--init_checkpoint's weights only fit that network")


def test_warm_start_on_a_tpu_slice_goes_through_scaffold_fn(small_dir, tmp_path, monkeypatch):
  """The TPU training graph of a warm-started ResNet (v3-8 simulated, TPUEstimator with
  use_tpu=True): init_from_checkpoint runs in the scaffold_fn TPUEstimator calls on the host,
  with every network variable mapped, and the graph still has no op the TPU cannot run."""
  from trainer.run import driver
  from trainer.run import dry_run as dry_run_lib

  from helpers import config_from_args
  pretrained = str(tmp_path / 'pretrained')
  common = ['--data_dir=' + small_dir, '--model=resnet', '--resnet_depth=18', '--image_size=16',
            '--train_batch_size=32', '--eval_batch_size=32', '--train_steps=1']
  driver.run(config_from_args('--mode=train', '--model_dir=' + pretrained, *common))
  calls = []
  original = tf.train.init_from_checkpoint

  def recording(prefix, assignment):
    contexts = []
    context = tf.get_default_graph()._get_control_flow_context()  # pylint: disable=protected-access
    while context is not None:
      contexts.append(type(context).__name__)
      context = context.outer_context
    calls.append((prefix, len(assignment), contexts))
    return original(prefix, assignment)

  monkeypatch.setattr(tf.train, 'init_from_checkpoint', recording)
  config = config_from_args('--mode=dry_run', '--tpu_topology=v3-8', '--init_checkpoint=' +
                            pretrained, '--model_dir=' + str(tmp_path / 'tuned'), *common)
  report = dry_run_lib.dry_run(config, 'v3-8')
  assert report['unsupported_ops'] == []
  assert calls and all(c[:2] == (pretrained + '/model.ckpt-1', 102) for c in calls)
  # On the host: outside the TPU computation (and its training loop).
  assert all('TPUReplicateContext' not in c and 'WhileContext' not in c for _, _, c in calls)


def _own_resnet_checkpoint(depth, path):
  with tf.Graph().as_default():
    _resnet_variables(depth, 10)
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      tf.train.Saver().save(sess, path)
  return path


def test_a_checkpoint_of_another_depth_is_refused_either_way(tmp_path):
  """ResNet-18 into a ResNet-34 (its stages' extra blocks unmatched) and ResNet-34 into a
  ResNet-18 (weights the network lacks): both refused, not half used."""
  r18 = _own_resnet_checkpoint(18, str(tmp_path / 'r18' / 'model.ckpt'))
  r34 = _own_resnet_checkpoint(34, str(tmp_path / 'r34' / 'model.ckpt'))
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match=r'matches only 102 of this network\'s 182 variables .* '
                                         r'all but the classifier must match'):
      warm_start.assignment_map(r18, _resnet_variables(34, 10), 'resnet', 10)
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match=r'holds 80 weights this network does not have'):
      warm_start.assignment_map(r34, _resnet_variables(18, 10), 'resnet', 10)
