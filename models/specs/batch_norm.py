"""Batch norm as TensorFlow's fused kernel computes it, which every batch norm of `models/` is."""

# TF's fused batch norm raises epsilon to this floor (tensorflow/python/ops/nn_impl.py,
# fused_batch_norm): the networks computed with the raised value, and their twins must too.
FUSED_BATCH_NORM_MIN_EPSILON = 1.001e-5


def fused_epsilon(epsilon):
  """The epsilon a TF fused batch norm given `epsilon` computes with."""
  return max(epsilon, FUSED_BATCH_NORM_MIN_EPSILON)
