"""The prediction for the device a run trains on, made before it trains and scored after it:
what `trainer.main` writes into results.json as `step_time`, and a dry run into dry_run.json.

The same model as `trainer.advise` (job_cost.py, step_model.py, targets.json): this host measured
by host_probe.py, a GPU found by its name in targets.json, a simulated TPU slice from its
generation's entry. The input pipeline is not timed here (it would cost the run seconds of its
own input); `trainer.advise --data_dir` times it. A prediction that fails is logged and recorded
as skipped: it never stops the run.
"""

import dataclasses
import re

from absl import logging
import tensorflow.compat.v1 as tf

from trainer.advise import host_probe
from trainer.advise import job_cost
from trainer.advise import report
from trainer.advise import shape_probe
from trainer.advise import step_model
from trainer.advise import targets as targets_lib
from trainer.run import cpu_bfloat16

INPUT_NOT_TIMED = ('not timed (the prediction is the device\'s step alone; '
                   'python -m trainer.advise --data_dir=... times the input_fn)')


def _cost(config, batch_size):
  """The JobCost of config's network at `batch_size` as the CPU/GPU graph counts it (float32,
  synthetic input of the job's shapes, no warm start: the graph is only counted), the graph
  `trainer.advise` counts."""
  counted = dataclasses.replace(
      config, use_tpu=False, data=dataclasses.replace(config.data, fake_data=True),
      model=dataclasses.replace(config.model, init_checkpoint='', train_batch_size=batch_size,
                                use_tpu=False, precision='float32'))
  return job_cost.from_config(counted, report.job_name(counted))


def _record(cost, target, iterations_per_loop=1):
  """The step_time record of `cost` on `target` (see predict_run)."""
  prediction = step_model.predict(cost, target, None, iterations_per_loop)
  fits, needed = step_model.memory_fits(cost, target)
  return {
      'target': target['name'], 'machine': target.get('machine'),
      'precision': target['precision'], 'predicted_seconds': prediction.seconds,
      'lower_seconds': prediction.lower,
      'upper_seconds': prediction.upper, 'binds': prediction.binds,
      'flops_per_step': job_cost.flops_per_step(cost), 'memory_needed_bytes': needed,
      'fits': fits, 'input': INPUT_NOT_TIMED,
  }


def _gpu_names(session_config):
  if not tf.config.experimental.list_physical_devices('GPU'):
    return []
  from tensorflow.python.client import device_lib  # pylint: disable=g-import-not-at-top
  names = []
  # With the run's session config: the first devices made fix the process's thread pools.
  for device in device_lib.list_local_devices(session_config):
    if device.device_type == 'GPU':
      match = re.search(r'name: ([^,]+)', device.physical_device_desc)
      names.append(match.group(1) if match else device.physical_device_desc)
  return names


def _skipped(why):
  logging.warning('No step-time prediction for this run: %s', why)
  return {'target': None, 'skipped': why}


def predict_run(config, session_config=None):
  """The step-time prediction of a CPU or GPU training run of `config` (a
  `trainer.run.run_config.Config`) on the device it trains on, as a dict for results.json:
  target, machine, precision (the rates it was priced at: fp32, tf32 or bf16; this CPU is
  priced at its float32 rates, a bfloat16 run's too), predicted_seconds, lower_seconds,
  upper_seconds (seconds per step; on several GPUs one replica's step on its share of the batch,
  without the all-reduce), binds,
  flops_per_step (of that step), memory_needed_bytes, fits, input. A TPU run, a GPU the table
  does not have or a prediction that failed gives {'target': None, 'skipped': why}, logged.
  Takes about a second for a small network, a few for ResNet-50 or InceptionV3: the graph is
  built and counted, this host's rates measured with `session_config` (the run's threads); the
  first time on a host, the job's convolution and matmul shapes are timed too (shape_probe.py:
  up to half a minute for ResNet-50 at 224 px), then read from the probe cache."""
  if config.use_tpu:
    return _skipped('a TPU run: its type is known only once resolved; python -m '
                    'trainer.advise predicts it per TPU type')
  try:
    gpus = _gpu_names(session_config)
    if not gpus:
      # A bfloat16 run on the CPU is priced at this host's float32 rates: the probe's bfloat16
      # convolution runs 1.8x its float32 one, the training step 1.28x (its filter gradients and
      # most other nodes stay float32), so the runs' own predictions at bfloat16 rates were 44-51%
      # too fast; at float32 rates make train's bfloat16 runs predicted their step 34-38% too slow
      # (BENCHMARKS.md, "bfloat16 on the CPU").
      probe_config = cpu_bfloat16.without(session_config)
      cost = _cost(config, config.train_batch_size)
      figures = host_probe.measure_cached(probe_config)
      shapes = shape_probe.measure(cost, figures['conv_flops'], probe_config)
      record = _record(cost, host_probe.target(figures, shapes['seconds']))
      record.update(shapes_timed=shapes['timed'], shapes_cached=shapes['cached'])
      return record
    target = targets_lib.gpu_named(gpus[0],
                                   tf32=targets_lib.uses_tf32('estimator', tf.__version__))
    if target is None:
      return _skipped('GPU %r is not in trainer/advise/targets.json' % gpus[0])
    replicas = config.num_replicas
    record = _record(_cost(config, max(1, config.train_batch_size // replicas)), target)
    record['replicas'] = replicas
    return record
  except Exception as e:  # pylint: disable=broad-except  # a prediction never stops the run
    return _skipped('the prediction failed: %s: %s' % (type(e).__name__, e))


def predict_slice(config, accelerator_type):
  """The prediction (as predict_run's) for `config` on the TPU slice `accelerator_type`
  (targets.tpu_slice: optimistic on a pod slice, whose all-reduce it leaves out), with
  config.iterations_per_loop steps per host round trip."""
  try:
    target = targets_lib.tpu_slice(accelerator_type)
    if target is None:
      return _skipped('no %s entry in trainer/advise/targets.json'
                      % accelerator_type.split('-')[0])
    return _record(_cost(config, config.train_batch_size), target, config.iterations_per_loop)
  except Exception as e:  # pylint: disable=broad-except  # a prediction never stops the run
    return _skipped('the prediction failed: %s: %s' % (type(e).__name__, e))


def scored(prediction, measured_steps, measured_seconds):
  """`prediction` with the run's measured step time (seconds per step, timed by the progress
  hooks; None when no step was timed) and the error: predicted / measured - 1 (negative: the
  run was slower than predicted), as BENCHMARKS.md scores trainer.advise."""
  scored_record = dict(prediction)
  measured = measured_seconds / measured_steps if measured_steps else None
  scored_record['measured_seconds'] = measured
  scored_record['error'] = (prediction['predicted_seconds'] / measured - 1.0
                            if measured and prediction.get('predicted_seconds') else None)
  return scored_record
