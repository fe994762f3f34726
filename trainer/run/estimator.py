"""Estimator construction, and the input_fns each kind of Estimator expects. The kind is chosen
here and only here; every kind runs the same TPUEstimator model_fn.

  a TF_CONFIG cluster        tf.estimator.Estimator on TensorFlow's distributed runtime
  config.mirrored_devices    tf.estimator.Estimator with MirroredStrategy over those devices
  otherwise                  TPUEstimator: on a Cloud TPU with config.use_tpu, else the local
                             CPU/GPU (no TPUClusterResolver is built then)

A legacy job (--model_fn, --input_fn) runs its own model_fn and input_fn in the same Estimators.
"""

from absl import logging
import tensorflow.compat.v1 as tf
from tensorflow.core.protobuf import rewriter_config_pb2

from trainer.data import input_fn as input_fn_lib
from trainer.errors import PipelineError
from trainer.host import threads as host_threads
from trainer.models import model_fn as model_fn_lib
from trainer.run import cpu_bfloat16
from trainer.run import fenced_saver
from trainer.run import tf_build
from trainer.run import user_model_fn
from trainer.tpu import resolver as tpu_resolver


def build_estimator(config, cluster_task=None, tpu_master=None, fence=None):
  """Returns the Estimator for `config` (a `trainer.run.run_config.Config`).

  Args:
    config: the run config.
    cluster_task: (task_type, task_index, cluster dict) of this process when TF_CONFIG describes
      a cluster (`trainer.cloud.aiplatform_env.distributed_task`), else None.
    tpu_master: with use_tpu, the master of a simulated slice (`trainer.tpu.simulated_slice`)
      instead of resolving config.tpu.
    fence: a `trainer.storage.state_fence.StateFence` of a gs:// model_dir that training writes
      through (`trainer.run.fenced_saver`): a run in one process or a cluster's chief; None:
      TensorFlow's Saver.

  Raises:
    PipelineError: a cluster with --use_tpu, MirroredStrategy or --mode=eval; with use_tpu, a TPU
      that cannot be resolved or reached.
  """
  if cluster_task:
    cluster = ', '.join(sorted(cluster_task[2]))
    if config.mirrored_devices:
      raise PipelineError('TF_CONFIG describes a cluster (%s) but MirroredStrategy (--num_gpus or '
                          '--mirrored_devices) trains in one process. Unset TF_CONFIG or drop the '
                          'flag.' % cluster)
    if config.use_tpu:
      raise PipelineError('TF_CONFIG describes a CPU/GPU cluster (%s) but --use_tpu is set: a '
                          'Cloud TPU job runs as one process. Drop --use_tpu or the cluster.'
                          % cluster)
    if config.mode == 'eval':
      raise PipelineError('--mode=eval runs as one process: unset TF_CONFIG to evaluate.')
    return _distributed_estimator(config, fence)
  if config.mirrored_devices:
    return _mirrored_estimator(config, fence)
  if not config.use_tpu:
    logging.info(host_threads.describe())
  return _tpu_estimator(config, tpu_master, fence)


def check_tpu_slice(config, num_hosts, num_cores):
  """Refuses, before any work, a run the TPU slice of `num_hosts` hosts and `num_cores` cores
  cannot do: batch sizes that do not divide over its cores, a --num_cores that is not its count,
  an evaluation TF 1.x cannot run on it (`check_tpu_evaluation`), or a prediction on several
  hosts (`check_tpu_prediction`).

  Raises:
    PipelineError: what does not fit and what to pass instead.
  """
  if config.num_cores and config.num_cores != num_cores:
    raise PipelineError('--num_cores=%d is not the number of cores of this TPU slice (%d). Pass '
                        '--num_cores=%d, or leave it out to take it from the TPU.'
                        % (config.num_cores, num_cores, num_cores))
  for name, batch in (('train_batch_size', config.train_batch_size),
                      ('eval_batch_size', config.eval_batch_size)):
    if batch % num_cores:
      raise PipelineError('--%s=%d is not divisible by the %d cores of this TPU slice: each core '
                          'needs the same per-core batch. Use a multiple of %d.'
                          % (name, batch, num_cores, num_cores))
  check_tpu_evaluation(config, num_hosts)
  if config.mode == 'predict':
    check_tpu_prediction(num_hosts)


def check_tpu_evaluation(config, num_hosts):
  """Refuses, before any training, a run that would evaluate on a TPU slice of several hosts
  with TF 1.x: its TPUEstimator.evaluate supports one host only under PER_HOST_V2 (tpu_context),
  so --mode=train_and_eval would train until its first evaluation and then fail. TF 2.x
  evaluates on every host.

  Raises:
    PipelineError: such a run, naming the alternatives.
  """
  if (config.use_tpu and config.eval_on_tpu and num_hosts > 1 and
      config.mode in ('train_and_eval', 'eval') and tf.__version__.startswith('1.')):
    raise PipelineError(
        'this Cloud TPU slice has %d hosts, and TensorFlow %s evaluates on a TPU of one host '
        'only: --mode=%s would fail at its first evaluation. Pass --eval_on_tpu=false to evaluate '
        "on this VM's CPU, or train with --mode=train and evaluate with --mode=eval "
        '--eval_timeout=SECONDS as a separate job on a single-host slice (v2-8, v3-8).'
        % (num_hosts, tf.__version__, config.mode))


def check_tpu_prediction(num_hosts):
  """Refuses TPU prediction on a slice of several hosts: TPUEstimator.predict with per-host input
  (PER_HOST_V2) runs on one host only, on TF 1.x and 2.x alike (tpu_context).

  Raises:
    PipelineError: num_hosts > 1, naming the alternatives.
  """
  if num_hosts > 1:
    raise PipelineError(
        'this Cloud TPU slice has %d hosts, and TPUEstimator predicts on a TPU of one host only. '
        'Predict on a single-host slice (v2-8, v3-8, v4-8), or without --use_tpu '
        'on the CPU/GPU.' % num_hosts)


def model_fn_of(config, fence=None):
  """The model_fn of the run: the pipeline's (`models.model_fn`, for a built-in network or a
  --network), or a legacy job's own --model_fn (`trainer.run.user_model_fn`). Each takes
  (features, labels, mode, params, config). With `fence`, training saves through a FencedSaver
  (`trainer.run.fenced_saver`)."""
  if config.model.is_model_fn:
    model_fn = user_model_fn.model_fn_of(config.model, config.use_tpu)
  else:
    pipeline_model_fn = model_fn_lib.model_fn_builder(config.model)

    def model_fn(features, labels, mode, params, config):
      del config  # the pipeline's model_fn reads its own ModelConfig
      return pipeline_model_fn(features, labels, mode, params)
  if fence is None:
    return model_fn
  return fenced_saver.model_fn_with(model_fn, fence, config.keep_checkpoint_max)


def input_fns(config, estimator, start_step=0):
  """(train_input_fn, eval_input_fn) for `estimator`; the training input of a `train` call that
  starts at global step `start_step` (`input_fn.stream_seed`).

  TPUEstimator sets params['batch_size'] itself (per core on a TPU, global off it); a plain
  Estimator does not, so its input_fns get the per-replica training batch and the eval batch,
  and in a TF_CONFIG cluster params['worker'] = (this task's index, tasks), so that each worker
  shuffles and augments with its own seed (`input_fn.input_stream`).
  """
  if config.model.is_model_fn:  # a legacy job's own input_fn
    train, evaluation = user_model_fn.input_fns_of(config.model, config.data.data_dir)
  else:
    train = input_fn_lib.input_fn_builder(config.data, is_training=True, start_step=start_step)
    evaluation = input_fn_lib.input_fn_builder(config.data, is_training=False,
                                               global_batch_size=config.eval_batch_size)
  if isinstance(estimator, tf.estimator.tpu.TPUEstimator):
    return train, evaluation
  per_replica = config.train_batch_size // config.num_replicas
  run_config = estimator.config
  worker = (run_config.global_id_in_cluster,
            run_config.num_worker_replicas + run_config.num_ps_replicas)
  return (lambda params: train(dict(params, batch_size=per_replica, worker=worker)),
          lambda params: evaluation(dict(params, batch_size=config.eval_batch_size)))


def predict_input_fn(config, estimator, source):
  """The --mode=predict input_fn for `estimator` over `source` (a
  `trainer.data.predict_input.PredictSource`): batches of config.eval_batch_size (TPUEstimator
  sets params['batch_size'] itself; a plain Estimator gets it here)."""
  input_fn = input_fn_lib.predict_input_fn_builder(config.data, source)
  if isinstance(estimator, tf.estimator.tpu.TPUEstimator):
    return input_fn
  return lambda params: input_fn(dict(params, batch_size=config.eval_batch_size))


def _tpu_estimator(config, tpu_master=None, fence=None):
  """TPUEstimator on `tpu_run_config`: on the TPU, or the local CPU/GPU like a plain Estimator
  (params['batch_size'] is then the global batch)."""
  return tf.estimator.tpu.TPUEstimator(
      model_fn=model_fn_of(config, fence),
      config=tpu_run_config(config, tpu_master),
      use_tpu=config.use_tpu, eval_on_tpu=config.eval_on_tpu,
      train_batch_size=config.train_batch_size, eval_batch_size=config.eval_batch_size,
      predict_batch_size=config.eval_batch_size, export_to_tpu=False)


def _checkpointing(config):
  """The RunConfig settings every road shares: where and how often checkpoints are written, how
  many are kept, and the graph's seed."""
  return dict(model_dir=config.model_dir, save_checkpoints_steps=config.save_checkpoints_steps,
              keep_checkpoint_max=config.keep_checkpoint_max, tf_random_seed=config.seed)


def tpu_run_config(config, tpu_master=None):
  """The TPUEstimator's RunConfig. With use_tpu the TPU is resolved first (unless `tpu_master`
  is given) and its slice checked against the run (`check_tpu_slice`), and the input_fn runs once
  per host (PER_HOST_V2).

  Raises:
    PipelineError: the TPU cannot be resolved or reached, or cannot run this job.
  """
  cluster = None
  tpu_config = tf.estimator.tpu.TPUConfig(iterations_per_loop=config.iterations_per_loop)
  if config.use_tpu:
    if not tpu_master:
      cluster = tpu_resolver.resolve_tpu(config.tpu, config.tpu_zone, config.gcp_project,
                                         timeout=config.tpu_connect_timeout)
      check_tpu_slice(config, *tpu_resolver.slice_shape(
          cluster, timeout=max(60.0, config.tpu_connect_timeout)))
    tpu_config = tf.estimator.tpu.TPUConfig(
        iterations_per_loop=config.iterations_per_loop, num_shards=config.num_cores,
        per_host_input_for_training=tf.estimator.tpu.InputPipelineConfig.PER_HOST_V2)
  return tf.estimator.tpu.RunConfig(
      cluster=cluster, master=tpu_master, tpu_config=tpu_config,
      # On a TPU, TPUEstimator builds the session config for its master itself.
      session_config=None if config.use_tpu else cpu_bfloat16.apply(
          host_session_config(config.model.model), config.model.precision, config.use_tpu),
      # trainer.run.hooks.ProgressHook logs step, rate and ETA. On a TPU the loss stays on the
      # device between loops: TPUEstimator's own hooks log it, and examples/sec, after every
      # loop.
      log_step_count_steps=config.iterations_per_loop if config.use_tpu else None,
      **_checkpointing(config))


def host_session_config(network=None):
  """Estimator's default session config (soft placement, one round of grappler's meta
  optimizer: tensorflow_estimator's `run_config.get_default_session_config`) with the thread
  pools chosen for this host's CPU (trainer.host.threads), and off the kernels this build
  computes wrong for `network` (trainer.run.tf_build; None: no network-specific setting).

  Used by the single-process CPU/GPU run only: MirroredStrategy keeps TensorFlow's pools (its
  replicas must run at once), a TF_CONFIG cluster its own device filters, a TPU its master's.
  """
  _, settings, _ = host_threads.current()
  session_config = tf.ConfigProto(allow_soft_placement=True,
                                  intra_op_parallelism_threads=settings.intra_op,
                                  inter_op_parallelism_threads=settings.inter_op)
  session_config.graph_options.rewrite_options.meta_optimizer_iterations = (
      rewriter_config_pb2.RewriterConfig.ONE)
  return tf_build.avoid_wrong_kernels(session_config, network)


def _distributed_estimator(config, fence=None):
  """An Estimator on TensorFlow's distributed runtime: the cluster in TF_CONFIG (chief, workers,
  parameter servers), between-graph replication with the variables on the parameter servers and
  asynchronous updates. Each worker step uses `config.train_batch_size` examples."""
  run_config = tf.estimator.RunConfig(  # reads TF_CONFIG
      log_step_count_steps=None, **_checkpointing(config))
  if run_config.session_config is not None:  # Estimator's own, with the task's device filters
    session_config = tf.ConfigProto()
    session_config.CopyFrom(run_config.session_config)
    run_config = run_config.replace(
        session_config=tf_build.avoid_wrong_kernels(session_config, config.model.model))
  return _estimator(config, run_config, fence)


def _mirrored_estimator(config, fence=None):
  """An Estimator training with MirroredStrategy over `config.mirrored_devices`: synchronous data
  parallelism in one process, each replica on train_batch_size / num_replicas examples, gradients
  averaged across replicas every step (batch-norm statistics stay per replica). Evaluation,
  prediction and export run on one device.

  Listed CPU devices (/cpu:0,/cpu:1) become that many CPU devices of the session, so the same
  path runs without GPUs.
  """
  devices = list(config.mirrored_devices)
  cpus = [int(d.split(':')[1]) for d in devices if d.startswith('/cpu:')]
  # The default thread pools: replicas must run at once (and NCCL ops block while they wait).
  session_config = tf_build.avoid_wrong_kernels(tf.ConfigProto(allow_soft_placement=True),
                                                config.model.model)
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
      log_step_count_steps=None, session_config=session_config, train_distribute=strategy,
      **_checkpointing(config)), fence)


def _estimator(config, run_config, fence=None):
  """A plain Estimator around the TPUEstimator model_fn. TPUEstimator's CPU mode does the same
  conversion (`TPUEstimatorSpec.as_estimator_spec`): eval metrics become eval_metric_ops and the
  host_call runs as a training hook. `fence`: as `build_estimator`'s."""
  model_fn = model_fn_of(config, fence)
  # TPUEstimator gives every model_fn params['batch_size'] and params['use_tpu']; a plain
  # Estimator does not, and a legacy model_fn may read them.
  train_batch = config.train_batch_size // config.num_replicas
  eval_batch = config.eval_batch_size

  def estimator_model_fn(features, labels, mode, params, config):  # Estimator passes by name
    batch = train_batch if mode == tf.estimator.ModeKeys.TRAIN else eval_batch
    spec = model_fn(features, labels, mode, dict(params, batch_size=batch, use_tpu=False), config)
    return spec.as_estimator_spec() if hasattr(spec, 'as_estimator_spec') else spec

  return tf.estimator.Estimator(estimator_model_fn, config=run_config, params={})
