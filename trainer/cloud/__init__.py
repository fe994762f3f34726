"""Google Cloud: finding the TPU, simulating a TPU slice for a dry run, GCS preflight checks, the
AI Platform environment (TF_CONFIG, hyperparameter tuning) and AI Platform job submission."""
