"""Run machinery of `trainer.train_keras`: Keras 3 training on any backend (TensorFlow, JAX,
PyTorch) with the pipeline's data and recipes. `schedule` (learning rate), `recipe` (the model,
optimizer and loss), `devices` (data parallelism per backend), `checkpoints` (periodic saves,
exact resume, SIGTERM), `progress` (log lines), `job` (the whole run)."""
