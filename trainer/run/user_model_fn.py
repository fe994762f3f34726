"""A legacy job as it is: the user's own TPUEstimator model_fn and input_fn (`--model_fn=`,
`--input_fn=` as MODULE:CALLABLE), loaded, checked at start and wrapped so that the driver's
TPUEstimator, resume, lease, SIGTERM handling and results.json serve them (docs/your-model.md).

  model_fn(features, labels, mode, params[, config]) -> tf.estimator.tpu.TPUEstimatorSpec
      (a tf.estimator.EstimatorSpec is accepted off the TPU); TPUEstimator's contract.
  input_fn(params[, mode]) -> tf.data.Dataset of (features, labels) batches of
      params['batch_size'] examples (per core on a TPU, global off it), with static shapes on a
      TPU (batch(..., drop_remainder=True)). params['data_dir'] is --data_dir when given.
"""

import inspect

from absl import logging
import tensorflow.compat.v1 as tf

from trainer.errors import PipelineError
from trainer.models import model_fn as model_fn_lib
from trainer.models import user_code

MODEL_FN_CONTRACT = 'model_fn(features, labels, mode, params) -> TPUEstimatorSpec'
INPUT_FN_CONTRACT = 'input_fn(params) -> tf.data.Dataset of (features, labels)'
# What TPUEstimator passes a model_fn by name, if it takes them.
_MODEL_FN_ARGS = ('features', 'labels', 'mode', 'params', 'config')


def _load_model_fn(spec):
  return user_code.load(spec, '--model_fn', (),
                        dict(features={}, labels=None, mode='train', params={}),
                        MODEL_FN_CONTRACT, optional=dict(config=None))


def _load_input_fn(spec):
  return user_code.load(spec, '--input_fn', (), dict(params={}), INPUT_FN_CONTRACT,
                        optional=dict(mode='train'))


def _arguments(fn):
  try:
    return set(inspect.signature(fn).parameters)
  except (TypeError, ValueError):
    return set()


def model_fn_of(model_config, use_tpu):
  """The model_fn TPUEstimator (or Estimator) is built with: the user's, called with the
  arguments it takes, its spec checked, and its training loss exposed to the progress hook.

  Args:
    model_config: the run's ModelConfig (model: the --model_fn spec).
    use_tpu: the run trains on a TPU.
  """
  user = _load_model_fn(model_config.model)
  takes = _arguments(user)

  def model_fn(features, labels, mode, params, config):
    given = dict(features=features, labels=labels, mode=mode, params=params, config=config)
    spec = user(**{name: given[name] for name in _MODEL_FN_ARGS if name in takes})
    on_tpu = use_tpu and params.get('use_tpu') is not False
    check_spec(spec, mode, on_tpu, model_config.model)
    if mode == tf.estimator.ModeKeys.TRAIN and not on_tpu:
      tf.add_to_collection(model_fn_lib.TRAIN_LOSS_COLLECTION, spec.loss)
    return spec
  return model_fn


def check_spec(spec, mode, on_tpu, name):
  """Refuses what TPUEstimator cannot take, in one line.

  Raises:
    PipelineError: not an (TPU)EstimatorSpec, an EstimatorSpec on a TPU, or no scalar loss or
      train_op in training.
  """
  tpu_spec = isinstance(spec, tf.estimator.tpu.TPUEstimatorSpec)
  if not tpu_spec and not isinstance(spec, tf.estimator.EstimatorSpec):
    raise PipelineError('--model_fn=%s returned %s; the contract is %s.'
                        % (name, type(spec).__name__, MODEL_FN_CONTRACT))
  if on_tpu and not tpu_spec:
    raise PipelineError('--model_fn=%s returned a tf.estimator.EstimatorSpec, which TPUEstimator '
                        'cannot run on a TPU: return tf.estimator.tpu.TPUEstimatorSpec (eval '
                        'metrics as eval_metrics=(metric_fn, tensors)).' % name)
  if mode == tf.estimator.ModeKeys.TRAIN:
    loss = spec.loss
    if loss is None or spec.train_op is None:
      raise PipelineError('--model_fn=%s returned no %s for mode train.'
                          % (name, 'loss' if loss is None else 'train_op'))
    if loss.shape.rank not in (None, 0) or not loss.dtype.is_floating:
      raise PipelineError('--model_fn=%s returned a loss of shape %s and dtype %s; it must be '
                          'a float scalar.' % (name, loss.shape, loss.dtype.name))


def input_fns_of(model_config, data_dir):
  """(train_input_fn, eval_input_fn): the user's input_fn with params['data_dir'] set from
  --data_dir and, if it takes `mode`, the mode.

  Args:
    model_config: the run's ModelConfig (input_fn: the --input_fn spec).
    data_dir: --data_dir or None.
  """
  user = _load_input_fn(model_config.input_fn)
  takes_mode = 'mode' in _arguments(user)

  def for_mode(mode):
    def input_fn(params):
      params = dict(params)
      if data_dir:
        params.setdefault('data_dir', data_dir)
      return user(params, mode=mode) if takes_mode else user(params)
    return input_fn
  return for_mode(tf.estimator.ModeKeys.TRAIN), for_mode(tf.estimator.ModeKeys.EVAL)


def check_builds(config):
  """Builds one training step of the user's input_fn and model_fn in a scratch graph, before a
  run writes anything: the dataset, its batch (static and equal to params['batch_size'] where a
  TPU needs it) and the spec.

  Args:
    config: the run's `trainer.run.run_config.Config`.

  Raises:
    PipelineError: either function does not load or breaks its contract, in one line.
  """
  model = config.model
  model_fn = model_fn_of(model, config.use_tpu)
  input_fn = input_fns_of(model, config.data.data_dir)[0]
  # Per core on a TPU (a slice of unknown size: as a v3-8's), global off it.
  batch_size = config.train_batch_size // ((config.num_cores or 8) if config.use_tpu else 1)
  params = {'batch_size': batch_size, 'use_tpu': config.use_tpu}
  with tf.Graph().as_default():
    tf.train.get_or_create_global_step()
    try:
      dataset = _call(input_fn, model.input_fn, '--input_fn', dict(params))
    except _NeedsContext:
      if not config.use_tpu:  # TPUEstimator gives it on a TPU only
        raise PipelineError('--input_fn=%s reads params[\'context\'], which TPUEstimator gives '
                            'on a TPU only: off the TPU read it with params.get(\'context\').'
                            % model.input_fn)
      logging.warning('--input_fn=%s reads params[\'context\'], which TPUEstimator alone gives: '
                      'it and the model_fn are checked when TPUEstimator builds them (`--mode='
                      'dry_run` does so for each host of a slice).', model.input_fn)
      return
    if not isinstance(dataset, tf.data.Dataset):
      raise PipelineError('--input_fn=%s returned %s; the contract is %s.'
                          % (model.input_fn, type(dataset).__name__, INPUT_FN_CONTRACT))
    element = tf.data.make_initializable_iterator(dataset).get_next()
    if not isinstance(element, tuple) or len(element) != 2:
      raise PipelineError('--input_fn=%s yields %s, not (features, labels) pairs.'
                          % (model.input_fn, type(element).__name__))
    _check_batch(element, batch_size, config.use_tpu, model.input_fn)
    _call(lambda p: model_fn(element[0], element[1], tf.estimator.ModeKeys.TRAIN, p, None),
          model.model, '--model_fn', dict(params))


class _NeedsContext(Exception):
  """The input_fn read params['context'] (TPUEstimator's TPUContext), which the check lacks."""


def _call(fn, name, flag, params):
  try:
    return fn(params)
  except PipelineError:
    raise
  except KeyError as e:
    if flag == '--input_fn' and e.args == ('context',):
      raise _NeedsContext()
    raise PipelineError('%s=%s raised KeyError when built for training with params %s: %s'
                        % (flag, name, params, e))
  except Exception as e:  # pylint: disable=broad-except  # the user's code failed
    raise PipelineError('%s=%s raised %s when built for training with params %s: %s'
                        % (flag, name, type(e).__name__, params,
                           str(e).strip().splitlines()[0] if str(e).strip() else ''))


def _check_batch(element, batch_size, use_tpu, name):
  """Each tensor's first dimension against params['batch_size'] (a TPU needs it static)."""
  for tensor in tf.nest.flatten(element):
    first = tensor.shape.as_list()[0] if tensor.shape.rank else None
    if first is None and use_tpu:
      raise PipelineError('--input_fn=%s yields batches of unknown size (%s); a TPU needs static '
                          'shapes: batch(params["batch_size"], drop_remainder=True).'
                          % (name, tensor.shape))
    if first is not None and first != batch_size:
      raise PipelineError("--input_fn=%s yields batches of %d, but params['batch_size'] is %d: "
                          "batch the dataset by params['batch_size'] (TPUEstimator sets it: per "
                          'core on a TPU).' % (name, first, batch_size))
