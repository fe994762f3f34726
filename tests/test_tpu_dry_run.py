"""`--mode=dry_run`: the real use_tpu=True graphs of every model, built for simulated Cloud TPU
slices of one and of four hosts, and the per-host input they read from real data."""

import json
import os

import pytest
import tensorflow.compat.v1 as tf
from tensorflow.core.framework import attr_value_pb2
from tensorflow.core.framework import node_def_pb2

from trainer.data import input_fn as input_fn_lib
from trainer.data import records
from trainer.errors import PipelineError
from trainer.run import dry_run as dry_run_lib
from trainer.tpu import simulated_slice
from trainer.tpu import topologies
from trainer.tpu import tpu_graph

from helpers import config_from_args
from helpers import INCEPTION_ON_TF2
from helpers import ok
from helpers import predict_in_fresh_process
from helpers import refused
from helpers import run_main
from helpers import USER_NETWORK
from helpers import write_subset


@pytest.fixture(scope='module')
def text_pod_dir(rotten_tomatoes_dir, tmp_path_factory):
  """256 real train / 90 real validation snippets in 8 shards each."""
  return write_subset(rotten_tomatoes_dir, str(tmp_path_factory.mktemp('text_pod')), 256, 90,
                      num_shards=8)


# Tiny settings per model; the batches divide over 32 cores. ResNet runs in bfloat16, as TPU jobs
# usually do.
_MODELS = {
    'resnet': (['--model=resnet', '--resnet_depth=18', '--image_size=16', '--precision=bfloat16'],
               'pod_dir', ['bfloat16', 'float32', 'int32']),
    'cnn': (['--model=cnn', '--image_size=28'], 'pod_dir', ['float32', 'int32']),
    'inception_v3': (['--model=inception_v3', '--image_size=75'], 'pod_dir',
                     ['float32', 'int32']),
    'bilstm': (['--model=bilstm', '--embedding_dim=16', '--lstm_hidden_units=16'], 'text_pod_dir',
               ['float32', 'int32']),
    # A user's network through the same contract, in bfloat16 on the TPU.
    USER_NETWORK: (['--network=' + USER_NETWORK, '--image_size=28', '--precision=bfloat16'],
                   'pod_dir', ['bfloat16', 'float32', 'int32']),
}


# Every built-in network on one host; the pod split (the input code is the same for every
# network) for all but the slowest to build, InceptionV3, and for a user's network.
@pytest.mark.parametrize('model, topology', [
    pytest.param(m, 'v3-8', marks=INCEPTION_ON_TF2 if m == 'inception_v3' else ())
    for m in sorted(_MODELS) if m != USER_NETWORK] + [
        (m, 'v3-32') for m in sorted(_MODELS) if m != 'inception_v3'])
def test_dry_run_builds_the_tpu_graph_and_splits_the_input_between_hosts(model, topology,
                                                                          request, tmp_path):
  args, data_fixture, infeed_dtypes = _MODELS[model]
  data_dir = request.getfixturevalue(data_fixture)
  config = config_from_args(
      '--mode=dry_run', '--tpu_topology=' + topology, '--data_dir=' + data_dir,
      '--model_dir=' + str(tmp_path), '--train_batch_size=64', '--eval_batch_size=64', *args)
  report = dry_run_lib.dry_run(config, topology)
  num_hosts, num_cores = topologies.slice_shape(topology)
  assert (report['num_hosts'], report['num_cores']) == (num_hosts, num_cores)
  hosts = report['per_host']
  # TPUEstimator called the input_fn once per host, with that host's params['context'].
  assert [(h['host_id'], h['num_hosts']) for h in hosts] == [
      (i, num_hosts) for i in range(num_hosts)]
  assert all(h['per_core_batch_size'] == 64 // num_cores for h in hosts)
  # The 8 training shards are split between the hosts: each read by exactly one.
  train_files = [f for h in hosts for f in h['train_files']]
  assert sorted(train_files) == sorted(tf.io.gfile.glob(os.path.join(data_dir, 'train-*')))
  assert len(set(train_files)) == len(train_files) and all(h['train_files'] for h in hosts)
  assert report['infeed']['dtypes'] == infeed_dtypes
  assert report['infeed']['enqueue_ops'] == num_cores
  assert report['cross_replica_sums'] > 0 and report['tpu_ops'] > 100
  assert report['unsupported_ops'] == []
  prediction = report['prediction']
  if num_hosts > 1:
    assert 'predicts on a TPU of one host only' in prediction['refused']
  else:
    assert prediction['unsupported_ops'] == [] and prediction['tpu_ops'] > 50
    assert prediction['infeed']['enqueue_ops'] == prediction['outfeed_dequeues'] == num_cores
    # --mode=predict's input: the serving features (images, or token ids and lengths: no float32
    # mask), with TPUEstimator's stopping signal (bool) and padding mask (int32).
    assert prediction['infeed']['dtypes'] == sorted(
        {'bool', 'int32'} | (set() if model == 'bilstm' else {infeed_dtypes[0]}))
  evaluation = report['evaluation']
  if num_hosts > 1 and tf.__version__.startswith('1.'):
    assert 'evaluates on a TPU of one host only' in evaluation['refused']
    return
  # Every eval example is read exactly once across the hosts, each host padding to the same
  # number of batches: eval_steps x its cores.
  num_eval = config.data.num_eval_examples
  assert evaluation['eval_examples_read'] == num_eval
  assert [h['eval_examples'] for h in evaluation['per_host']] == [
      records.host_shard(num_eval, i, num_hosts) for i in range(num_hosts)]
  assert evaluation['batches_match_eval_steps']
  assert evaluation['tpu_ops'] > 100 and evaluation['unsupported_ops'] == []


def test_dry_run_of_a_v3_32_job_on_all_of_fashion_mnist(fashion_mnist_dir, tmp_path):
  """The CLI on the full real data: 16 train shards over 4 hosts, bfloat16 images on the infeed
  (half the bytes of float32) and, where the runtime can evaluate on 4 hosts (TF 2.x), all
  10,000 test images read once."""
  model_dir = tmp_path / 'model'
  ok(run_main('--mode=dry_run', '--tpu_topology=v3-32', '--data_dir=' + fashion_mnist_dir,
              '--model_dir=' + str(model_dir), '--model=resnet', '--resnet_depth=18',
              '--image_size=32', '--train_batch_size=256', '--eval_batch_size=1024',
              '--precision=bfloat16', '--predict_step_time'))
  report = json.loads((model_dir / dry_run_lib.REPORT_FILE).read_text())
  # The step predicted for the slice (trainer.advise's model; the input is not timed).
  step = report['step_time']
  assert step['target'] == 'TPU v3-32' and step['fits'] is True and step['flops_per_step'] > 0
  assert 0 < step['lower_seconds'] <= step['predicted_seconds'] <= step['upper_seconds']
  assert not (model_dir / 'model_config.json').exists()  # written by training runs only
  assert [len(h['train_files']) for h in report['per_host']] == [4, 4, 4, 4]
  # 256 images of 32x32x3 in bfloat16, plus a float32 mask and an int32 label each.
  assert report['infeed']['bytes_per_step'] == 256 * (32 * 32 * 3 * 2 + 4 + 4)
  assert report['unsupported_ops'] == []
  evaluation = report['evaluation']
  if tf.__version__.startswith('1.'):
    assert '--eval_on_tpu=false' in evaluation['refused']
  else:
    assert [h['eval_examples'] for h in evaluation['per_host']] == [2500] * 4
    assert evaluation['eval_examples_read'] == 10000 and evaluation['batches_match_eval_steps']


@pytest.mark.parametrize('args,message', [
    (['--mode=dry_run'], '--mode=dry_run needs --tpu_topology, the slice to simulate'),
    (['--mode=dry_run', '--tpu_topology=v9-99'], 'not a Cloud TPU accelerator type this pipeline'),
    (['--mode=dry_run', '--tpu_topology=v3-12'],
     'v3-12 is not a v3 slice: its size is a multiple of 8'),
    (['--mode=dry_run', '--tpu_topology=v5litepod-8'],
     ('v5litepod-8: TPUEstimator needs the StreamExecutor TPU runtime '
      'and v5e has the PJRT runtime only')),
    (['--mode=dry_run', '--tpu_topology=v5p-8'], 'v5p-8: .* v5p has the PJRT runtime only'),
    (['--mode=dry_run', '--tpu_topology=v6e-4'],
     'v6e-4: .* v6e \\(Trillium\\) has the PJRT runtime'),
    (['--tpu_topology=v3-8', '--train_steps=1'], '--tpu_topology is read by --mode=dry_run only'),
    (['--mode=dry_run', '--tpu_topology=v3-8', '--use_tpu'], 'not both'),
    (['--mode=dry_run', '--tpu_topology=v3-8', '--tpu=my-tpu'], 'contacts no TPU: drop --tpu'),
    (['--mode=dry_run', '--tpu_topology=v3-32', '--train_batch_size=48'],
     '--train_batch_size=48 is not divisible by --num_cores=32'),
    (['--mode=dry_run', '--tpu_topology=v3-32', '--num_cores=8'],
     '--num_cores=8 is not the number of cores of a v3-32 \\(32\\)'),
    (['--use_tpu', '--tpu=my-tpu', '--num_cores=1', '--train_steps=1'], '--num_cores=1'),
    (['--num_cores=8', '--train_steps=1'], '--num_cores is only used with --use_tpu'),
    (['--model=inception_v3', '--nesterov', '--train_steps=1'],
     '--nesterov is read by the momentum optimizer only'),
])
def test_dry_run_flags_are_checked(small_dir, tmp_path, args, message):
  with pytest.raises(PipelineError, match=message):
    config_from_args('--data_dir=' + small_dir, '--model_dir=' + str(tmp_path), *args)


def test_dry_run_cli_refuses_without_a_topology(small_dir, tmp_path):
  refused(run_main('--mode=dry_run', '--data_dir=' + small_dir, '--model_dir=' + str(tmp_path)),
          '--mode=dry_run needs --tpu_topology')


def test_unsupported_ops_inside_the_tpu_computation_are_found():
  """Ops without an XLA kernel, or holding strings or float64, are reported; ops outside the TPU
  computation and XLA-compilable ones are not."""
  def node(op, replicated=True, **types):
    attrs = {k: attr_value_pb2.AttrValue(type=tf.as_dtype(v).as_datatype_enum)
             for k, v in types.items()}
    if replicated:
      attrs['_tpu_replicate'] = attr_value_pb2.AttrValue(s=b'cluster')
    return node_def_pb2.NodeDef(name=op, op=op, attr=attrs)

  found = tpu_graph.unsupported_ops([
      node('DecodeJpeg'), node('StringToNumber', out_type=tf.float32),
      node('Cast', DstT=tf.float32, SrcT=tf.float64),
      node('Conv2D', T=tf.float32), node('DecodeJpeg', replicated=False)])
  assert found == ['Cast (float64)', 'DecodeJpeg (no XLA kernel)',
                   'StringToNumber (no XLA kernel)']


def test_tpu_runs_log_loss_and_examples_per_second_every_loop(small_dir, tmp_path):
  """On a TPU the loss lives on the device between host round trips: TPUEstimator's own hooks
  log it with examples/sec after every iterations_per_loop; off TPU the progress hook does."""
  from trainer.run import estimator as estimator_lib  # pylint: disable=g-import-not-at-top
  common = ['--data_dir=' + small_dir, '--model_dir=' + str(tmp_path), '--train_steps=1',
            '--train_batch_size=64', '--eval_batch_size=64', '--iterations_per_loop=25']
  tpu = config_from_args('--mode=dry_run', '--tpu_topology=v3-8', *common)
  run_config = estimator_lib.tpu_run_config(tpu, tpu_master=simulated_slice.SIMULATED_MASTER)
  assert run_config.log_step_count_steps == 25
  cpu = config_from_args(*common)
  assert estimator_lib.tpu_run_config(cpu).log_step_count_steps is None


def test_a_bfloat16_tpu_job_exports_a_float32_saved_model_that_serves_on_cpu(small_dir, tmp_path):
  """The SavedModel of a bfloat16 TPU job (TPUEstimator, use_tpu=True, export_to_tpu=False) holds
  no bfloat16 op and classifies the real eval images on the CPU. The checkpoint comes from two
  CPU steps: its variables are float32 either way."""
  from trainer.run import driver  # pylint: disable=g-import-not-at-top
  from trainer.run import estimator as estimator_lib  # pylint: disable=g-import-not-at-top
  from trainer.run import results  # pylint: disable=g-import-not-at-top
  model_dir = str(tmp_path / 'model')
  common = ['--data_dir=' + small_dir, '--model_dir=' + model_dir, '--model=resnet',
            '--resnet_depth=18', '--image_size=16', '--train_batch_size=32',
            '--eval_batch_size=32', '--train_steps=2', '--export_dir=' + str(tmp_path / 'export')]
  driver.run(config_from_args('--mode=train', *common))
  tpu = config_from_args('--mode=dry_run', '--tpu_topology=v3-8', '--precision=bfloat16', *common)
  with simulated_slice.simulated_slice(1, 8):
    estimator = estimator_lib.build_estimator(tpu, tpu_master=simulated_slice.SIMULATED_MASTER)
    path = results.export(estimator, tpu, tf.train.latest_checkpoint(model_dir))
  with tf.Graph().as_default(), tf.Session() as sess:
    graph_def = tf.saved_model.load(sess, ['serve'], path).graph_def
  dtypes = {tf.as_dtype(a.type) for n in graph_def.node for k, a in n.attr.items()
            if k in ('T', 'dtype', 'DstT', 'SrcT') and a.type}
  assert tf.float32 in dtypes and tf.bfloat16 not in dtypes
  labels, classes, _, _ = predict_in_fresh_process(path, small_dir, tmp_path)
  assert len(classes) == len(labels) == 300


@pytest.mark.parametrize('num_files', [2, 5, 8])
@pytest.mark.parametrize('is_training', [True, False])
def test_hosts_together_read_every_record_exactly_once(small_dir, tmp_path, num_files,
                                                       is_training):
  """Whatever the number of shards (fewer than the hosts, not a multiple of them, a multiple),
  the 4 hosts' record datasets partition the records: each read by exactly one host per pass."""
  data_dir = write_subset(small_dir, str(tmp_path), 100, 50, num_shards=num_files)
  pattern = os.path.join(data_dir, ('train' if is_training else 'validation') + '-*')
  expected = sorted(r for path in sorted(tf.io.gfile.glob(pattern))
                    for r in tf.io.tf_record_iterator(path))
  read = []
  for host_id in range(4):
    with tf.Graph().as_default():
      # With the input_fns' options: TF 1.15's autotuning crashes in-process readers.
      next_record = tf.data.make_one_shot_iterator(input_fn_lib.with_host_options(
          records.record_dataset(pattern, is_training, host_id, 4))).get_next()
      with tf.Session() as sess:
        host = []
        while True:
          try:
            host.append(sess.run(next_record))
          except tf.errors.OutOfRangeError:
            break
    if not is_training:
      assert len(host) == records.host_shard(len(expected), host_id, 4)
    read.extend(host)
  assert sorted(read) == expected


def test_an_op_a_tpu_cannot_run_is_found_inside_the_real_tpu_computation(tmp_path):
  """A string op inside a model_fn is found in the TPU computation TPUEstimator builds (on TF 2.x
  inside the training loop's function body)."""
  def model_fn(features, labels, mode, params):
    del params
    logits = tf.layers.dense(features, 2)
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    loss += tf.strings.to_number(tf.strings.as_string(loss))  # string ops: no TPU kernels
    train_op = tf.tpu.CrossShardOptimizer(tf.train.GradientDescentOptimizer(0.1)).minimize(
        loss, tf.train.get_or_create_global_step())
    return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op)

  def input_fn(params):
    dataset = tf.data.Dataset.from_tensors((tf.zeros([4]), tf.constant(0))).repeat()
    return dataset.batch(params['batch_size'], drop_remainder=True)

  with simulated_slice.simulated_slice(1, 8):
    estimator = tf.estimator.tpu.TPUEstimator(
        model_fn=model_fn, use_tpu=True, train_batch_size=16,
        config=tf.estimator.tpu.RunConfig(
            master=simulated_slice.SIMULATED_MASTER, model_dir=str(tmp_path),
            tpu_config=tf.estimator.tpu.TPUConfig(iterations_per_loop=2, num_shards=8)))
    graph = tpu_graph.capture_graph(
        lambda hooks: estimator.train(input_fn, max_steps=1, hooks=hooks))
  found = tpu_graph.unsupported_ops(tpu_graph.tpu_computation_nodes(graph))
  assert 'AsString (no XLA kernel)' in found and 'StringToNumber (no XLA kernel)' in found


@pytest.mark.parametrize('num_cores,train_batch_size,message', [
    (None, 64, None),
    (None, 48, 'train batch size 48 must be divisible by number of replicas 32'),
    (8, 64, '--num_cores=8 is not the number of cores of the TPU slice'),
])
def test_num_cores_comes_from_the_slice_unless_given(small_dir, tmp_path, num_cores,
                                                     train_batch_size, message):
  """Without --num_cores TPUEstimator takes the slice's cores (32 on a v3-32); a batch that does
  not divide over them, or a --num_cores that is not the slice's, is a clear error, not a
  TensorFlow traceback."""
  import dataclasses  # pylint: disable=g-import-not-at-top

  from trainer.run import estimator as estimator_lib  # pylint: disable=g-import-not-at-top
  from trainer.run import run_errors  # pylint: disable=g-import-not-at-top
  config = config_from_args('--mode=dry_run', '--tpu_topology=v3-32', '--data_dir=' + small_dir,
                            '--model_dir=' + str(tmp_path), '--model=cnn', '--image_size=28',
                            '--train_batch_size=64', '--eval_batch_size=64')
  config = dataclasses.replace(config, num_cores=num_cores, model=dataclasses.replace(
      config.model, train_batch_size=train_batch_size))
  with simulated_slice.simulated_slice(4, 32):
    if message:
      with pytest.raises(PipelineError, match=message):
        with run_errors.explain_tpu_shape_errors(config):
          _capture_train_graph(estimator_lib, config)
      return
    graph = _capture_train_graph(estimator_lib, config)
  enqueues = [n for n in graph.as_graph_def().node if n.op == 'InfeedEnqueueTuple'] + [
      n for f in graph.as_graph_def().library.function for n in f.node_def
      if n.op == 'InfeedEnqueueTuple']
  assert len(enqueues) == 32


def _capture_train_graph(estimator_lib, config):
  estimator = estimator_lib.build_estimator(config, tpu_master=simulated_slice.SIMULATED_MASTER)
  input_fn = estimator_lib.input_fns(config, estimator)[0]
  return tpu_graph.capture_graph(
      lambda hooks: estimator.train(input_fn, max_steps=1, hooks=hooks))


def test_a_resolved_tpu_is_checked_against_its_own_slice_before_any_work():
  """After resolving a TPU the trainer reads its hosts and cores as TPUEstimator will (here from
  a simulated v3-32) and refuses batches that do not divide over them, a wrong --num_cores, or
  an evaluation TF 1.x cannot run on 4 hosts, before training starts."""
  import dataclasses  # pylint: disable=g-import-not-at-top

  from trainer.run import estimator as estimator_lib  # pylint: disable=g-import-not-at-top
  from trainer.tpu import resolver as tpu_resolver  # pylint: disable=g-import-not-at-top

  class Resolver(object):
    def master(self):
      return simulated_slice.SIMULATED_MASTER

    def cluster_spec(self):
      return None

  with simulated_slice.simulated_slice(4, 32):
    assert tpu_resolver.slice_shape(Resolver(), timeout=30) == (4, 32)
  config = config_from_args('--fake_data', '--model_dir=/tmp/unused', '--train_steps=1',
                            '--num_classes=10', '--image_size=16', '--train_batch_size=256',
                            '--eval_batch_size=256', '--mode=train')
  config = dataclasses.replace(config, use_tpu=True)
  estimator_lib.check_tpu_slice(config, 4, 32)  # fits: nothing raised
  for changes, message in (
      (dict(eval_batch_size=1000), '--eval_batch_size=1000 is not divisible by the 32 cores'),
      (dict(num_cores=8), '--num_cores=8 is not the number of cores of this TPU slice \\(32\\)')):
    with pytest.raises(PipelineError, match=message):
      estimator_lib.check_tpu_slice(dataclasses.replace(config, **changes), 4, 32)
  evaluating = dataclasses.replace(config, mode='train_and_eval')
  if tf.__version__.startswith('1.'):
    with pytest.raises(PipelineError, match='--eval_on_tpu=false'):
      estimator_lib.check_tpu_slice(evaluating, 4, 32)
  else:
    estimator_lib.check_tpu_slice(evaluating, 4, 32)
  estimator_lib.check_tpu_slice(dataclasses.replace(evaluating, eval_on_tpu=False), 4, 32)
  with pytest.raises(PipelineError, match='predicts on a TPU of one host only'):
    estimator_lib.check_tpu_slice(dataclasses.replace(config, mode='predict'), 4, 32)
  estimator_lib.check_tpu_slice(dataclasses.replace(config, mode='predict'), 1, 8)


def test_the_prediction_refusal_is_tpu_estimators_own(small_dir, tmp_path):
  """check_tpu_prediction refuses what TPUEstimator.predict itself rejects on 4 hosts, and
  passes what it builds on one."""
  from trainer.run import estimator as estimator_lib  # pylint: disable=g-import-not-at-top
  config = config_from_args('--mode=dry_run', '--tpu_topology=v3-32', '--data_dir=' + small_dir,
                            '--model_dir=' + str(tmp_path), '--model=cnn', '--image_size=28',
                            '--train_batch_size=64', '--eval_batch_size=64')
  with pytest.raises(PipelineError, match='one host only'):
    estimator_lib.check_tpu_prediction(4)
  estimator_lib.check_tpu_prediction(1)
  with simulated_slice.simulated_slice(4, 32):
    estimator = estimator_lib.build_estimator(config, tpu_master=simulated_slice.SIMULATED_MASTER)
    input_fn = estimator_lib.input_fns(config, estimator)[1]
    with pytest.raises(ValueError, match='TPUEstimator.predict is only supported'):
      tpu_graph.capture_graph(lambda hooks: next(estimator.predict(input_fn, hooks=hooks)))
