"""Networks and TPUEstimator model_fn builders. Nothing here reads flags."""
