"""Talking to Google Cloud: finding the TPU, GCS preflight checks, the AI Platform environment
(TF_CONFIG, hyperparameter tuning) and AI Platform job submission."""
