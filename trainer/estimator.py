"""TPUEstimator construction: the same model_fn on a Cloud TPU (use_tpu) or on the CPU/GPU."""

import tensorflow.compat.v1 as tf

from models import model_fn as model_fn_lib
from trainer import tpu as tpu_lib


def build_estimator(config):
  """Returns a `tf.estimator.tpu.TPUEstimator` for `config` (a `trainer.config.Config`).

  With `config.use_tpu` False no TPUClusterResolver is built and TPUEstimator runs the model_fn on
  the local CPU/GPU like a plain Estimator (params['batch_size'] is then the global batch).

  With `config.mirrored_devices` it returns `build_mirrored_estimator(config)` instead.

  Raises:
    PipelineError: with use_tpu, when the TPU cannot be resolved or reached.
  """
  if config.mirrored_devices:
    return build_mirrored_estimator(config)
  cluster = None
  tpu_config = tf.estimator.tpu.TPUConfig(iterations_per_loop=config.iterations_per_loop)
  if config.use_tpu:
    cluster = tpu_lib.resolve_tpu(config.tpu, config.tpu_zone, config.gcp_project,
                                  timeout=config.tpu_connect_timeout)
    tpu_config = tf.estimator.tpu.TPUConfig(
        iterations_per_loop=config.iterations_per_loop, num_shards=config.num_cores,
        per_host_input_for_training=tf.estimator.tpu.InputPipelineConfig.PER_HOST_V2)
  run_config = tf.estimator.tpu.RunConfig(
      cluster=cluster, model_dir=config.model_dir,
      save_checkpoints_steps=config.save_checkpoints_steps,
      keep_checkpoint_max=config.keep_checkpoint_max, tpu_config=tpu_config,
      log_step_count_steps=None)  # trainer.hooks.ProgressHook logs progress
  return tf.estimator.tpu.TPUEstimator(
      model_fn=model_fn_lib.model_fn_builder(config.model), config=run_config,
      use_tpu=config.use_tpu, train_batch_size=config.train_batch_size,
      eval_batch_size=config.eval_batch_size, predict_batch_size=config.eval_batch_size,
      export_to_tpu=False)


def build_distributed_estimator(config):
  """Returns a `tf.estimator.Estimator` running the same model_fn on TensorFlow's distributed
  runtime: the cluster in TF_CONFIG (chief, workers, parameter servers), between-graph replication
  with the variables on the parameter servers and asynchronous updates. Each worker step uses
  `config.train_batch_size` examples.
  """
  return _estimator(config, tf.estimator.RunConfig(  # reads TF_CONFIG
      model_dir=config.model_dir, save_checkpoints_steps=config.save_checkpoints_steps,
      keep_checkpoint_max=config.keep_checkpoint_max, log_step_count_steps=None))


def build_mirrored_estimator(config):
  """Returns a `tf.estimator.Estimator` training the same model_fn with MirroredStrategy over
  `config.mirrored_devices`: synchronous data parallelism in one process, each replica on
  train_batch_size / num_replicas examples, gradients averaged across replicas every step
  (batch-norm statistics stay per replica). Evaluation, prediction and export run on one device.

  Listed CPU devices (/cpu:0,/cpu:1) become that many CPU devices of the session, so the same
  path runs without GPUs.
  """
  devices = list(config.mirrored_devices)
  cpus = [int(d.split(':')[1]) for d in devices if d.startswith('/cpu:')]
  session_config = tf.ConfigProto(allow_soft_placement=True)
  if cpus:
    session_config.device_count['CPU'] = max(cpus) + 1
    # Built outside eager mode, where TF 2 would set up collective ops on the process's eager
    # devices, which lack the session's extra CPU devices; reduce on one device instead.
    with tf.Graph().as_default():
      strategy = tf.distribute.MirroredStrategy(
          devices, cross_device_ops=tf.distribute.ReductionToOneDevice())
  else:
    strategy = tf.distribute.MirroredStrategy(devices)  # NCCL all-reduce where it can
  return _estimator(config, tf.estimator.RunConfig(
      model_dir=config.model_dir, save_checkpoints_steps=config.save_checkpoints_steps,
      keep_checkpoint_max=config.keep_checkpoint_max, log_step_count_steps=None,
      session_config=session_config, train_distribute=strategy))


def _estimator(config, run_config):
  """A plain Estimator around the TPUEstimator model_fn. TPUEstimator's CPU mode does the same
  conversion (`TPUEstimatorSpec.as_estimator_spec`): eval metrics become eval_metric_ops and the
  host_call runs as a training hook."""
  model_fn = model_fn_lib.model_fn_builder(config.model)

  def estimator_model_fn(features, labels, mode, params):
    batch = (config.train_batch_size // config.num_replicas
             if mode == tf.estimator.ModeKeys.TRAIN else config.eval_batch_size)
    return model_fn(features, labels, mode, dict(params, batch_size=batch)).as_estimator_spec()

  return tf.estimator.Estimator(estimator_model_fn, config=run_config, params={})
