"""The run Config fields that every job of `trainer.main` takes from its flags the same way
(the run loop, checkpoints, the TPU, SIGTERM and the lease), for flags/to_config.py (the
pipeline's own networks and a --network) and flags/to_model_fn_config.py (a legacy --model_fn
job): one list, so a new run-loop flag reaches both."""


def run_fields(f, model_dir, seed, mirrored_devices, profile_steps):
  """Keyword arguments of trainer.run.run_config.Config.

  Args:
    f: the flag values (a namespace).
    model_dir: the run's model_dir (str).
    seed: the run's seed (int).
    mirrored_devices: tuple of MirroredStrategy devices (empty: none).
    profile_steps: (start, end) of --profile_steps, or ().

  Returns:
    dict of Config fields; the caller adds model, data, train_steps and its own.
  """
  return dict(
      mode=f.mode, model_dir=model_dir, eval_batch_size=f.eval_batch_size,
      steps_per_eval=f.steps_per_eval, iterations_per_loop=f.iterations_per_loop,
      save_checkpoints_steps=f.save_checkpoints_steps or f.steps_per_eval,
      keep_checkpoint_max=f.keep_checkpoint_max, eval_timeout=f.eval_timeout,
      log_every_n_secs=f.log_every_n_secs, use_tpu=f.use_tpu, tpu=f.tpu, tpu_zone=f.tpu_zone,
      gcp_project=f.gcp_project, num_cores=f.num_cores,
      tpu_connect_timeout=f.tpu_connect_timeout, tpu_topology=f.tpu_topology,
      eval_on_tpu=f.eval_on_tpu, mirrored_devices=mirrored_devices,
      profile_steps=profile_steps, seed=seed, preemption_grace_secs=f.preemption_grace_secs,
      lease_expiry_secs=f.lease_expiry_secs, overwrite=f.overwrite)
