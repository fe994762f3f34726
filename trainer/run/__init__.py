"""The run machinery behind `python -m trainer.main`: the driver and its Estimator, the run's
config, checkpoints (integrity, keep-best, the network record), preemption, hooks, results and
export, prediction and the TPU dry run. Nothing here imports an entry point."""
