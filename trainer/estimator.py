"""TPUEstimator construction: the same model_fn on a Cloud TPU (use_tpu) or on the CPU/GPU."""

import tensorflow.compat.v1 as tf

from models import model_fn as model_fn_lib
from trainer import tpu as tpu_lib


def build_estimator(config):
  """Returns a `tf.estimator.tpu.TPUEstimator` for `config` (a `trainer.config.Config`).

  With `config.use_tpu` False no TPUClusterResolver is built and TPUEstimator runs the model_fn on
  the local CPU/GPU like a plain Estimator (params['batch_size'] is then the global batch).

  Raises:
    PipelineError: with use_tpu, when the TPU cannot be resolved or reached.
  """
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

  TPUEstimator's CPU mode does the same conversion (`TPUEstimatorSpec.as_estimator_spec`): eval
  metrics become eval_metric_ops and the host_call runs as a training hook.
  """
  model_fn = model_fn_lib.model_fn_builder(config.model)

  def estimator_model_fn(features, labels, mode, params):
    batch = (config.train_batch_size if mode == tf.estimator.ModeKeys.TRAIN
             else config.eval_batch_size)
    return model_fn(features, labels, mode, dict(params, batch_size=batch)).as_estimator_spec()

  run_config = tf.estimator.RunConfig(  # reads TF_CONFIG
      model_dir=config.model_dir, save_checkpoints_steps=config.save_checkpoints_steps,
      keep_checkpoint_max=config.keep_checkpoint_max, log_step_count_steps=None)
  return tf.estimator.Estimator(estimator_model_fn, config=run_config, params={})
