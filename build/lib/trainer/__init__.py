"""The driver: flags -> config -> TPUEstimator on a Cloud TPU or the local CPU/GPU."""
