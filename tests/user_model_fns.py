"""Legacy model_fns and input_fns that break TPUEstimator's contract (trainer/run/user_model_fn.py)
each in one way: tests/test_your_model_fn.py checks that each is refused at start in one line."""

import tensorflow.compat.v1 as tf

from examples import iris


def estimator_spec(features, labels, mode, params):
  """Returns a plain EstimatorSpec, which TPUEstimator cannot run on a TPU."""
  spec = iris.model_fn(features, labels, mode, params)
  return tf.estimator.EstimatorSpec(mode, loss=spec.loss, train_op=spec.train_op)


def no_train_op(features, labels, mode, params):
  spec = iris.model_fn(features, labels, mode, params)
  return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=spec.loss)


def fixed_batch(params, mode):
  """Ignores params['batch_size']: always batches of 16."""
  return iris.input_fn(dict(params, batch_size=16), mode)


def a_list(params):
  del params
  return [1, 2, 3]


def features_only(params, mode):
  return iris.input_fn(params, mode).map(lambda x, y: x)


def reads_context(params, mode):
  """Reads TPUEstimator's params['context'] (given on a TPU only) for its host's shard."""
  context = params['context']
  del context
  return iris.input_fn(params, mode)


def own_saver(features, labels, mode, params):
  """examples.iris's model_fn with its own Saver, which keeps 2 checkpoints, through scaffold_fn
  (as TPU reference code brings one)."""
  spec = iris.model_fn(features, labels, mode, params)
  if mode != tf.estimator.ModeKeys.TRAIN:
    return spec
  return spec._replace(scaffold_fn=lambda: tf.train.Scaffold(
      saver=tf.train.Saver(max_to_keep=2, sharded=True)))
