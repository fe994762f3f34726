"""Training a run's PyTorch module (`trainer.train_torch`): on the CPU, a CUDA GPU or an XLA
device through PyTorch/XLA, with the run's recipe."""
