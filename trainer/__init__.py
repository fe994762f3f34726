"""The trainer: flags -> config -> TPUEstimator on a Cloud TPU or the local CPU/GPU.

The run itself lives at this level (main.py, driver.py, estimator.py, hooks.py, results.py);
data feeding in `trainer.data`, data set conversion in `trainer.prepare`, benchmarks in
`trainer.benchmark`, Google Cloud in `trainer.cloud`.
"""
