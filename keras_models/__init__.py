"""Keras 3 versions of the pipeline's four networks, for the way off Estimator.

Written with Keras 3's own layers, so each runs on any Keras backend (TensorFlow, JAX, PyTorch).
Layer names mirror the TF1 variable scopes of `models/` ('stage1_block1/conv2d_1' is the Keras
layer 'stage1_block1-conv2d_1'; files written before used '.', see `keras_models.upgrade`), which
is what `keras_models.checkpoint_map` reads a checkpoint of this pipeline by.
`trainer.export_keras` converts a run, `trainer.train_keras` trains; docs/migration.md the guide.
"""
