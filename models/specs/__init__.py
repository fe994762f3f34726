"""The networks' constants and the features' names, without TensorFlow: the TF1 builders
(models/*.py) and their Keras 3 twins (keras_models/) both read them from here, so the Keras 3
trainer runs where TensorFlow is not installed (JAX or PyTorch alone)."""
