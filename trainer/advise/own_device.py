"""The prediction for the device a run trains on, made before it trains and scored after it:
what `trainer.main` writes into results.json as `step_time`, and a dry run into dry_run.json.

The same model as `trainer.advise` (job_cost.py, step_model.py, targets.json): this host measured
by host_probe.py, a GPU found by its name in targets.json, a simulated TPU slice from its
generation's entry. The input pipeline is not timed here (it would cost the run seconds of its
own input); `trainer.advise --data_dir` times it.
"""

import dataclasses
import re

import tensorflow.compat.v1 as tf

from trainer.advise import host_probe
from trainer.advise import job_cost
from trainer.advise import report
from trainer.advise import step_model
from trainer.advise import targets as targets_lib
from trainer.tpu import topologies

INPUT_NOT_TIMED = ('not timed (the prediction is the device\'s step alone; '
                   'python -m trainer.advise --data_dir=... times the input_fn)')
_TOKEN = re.compile(r'[A-Za-z0-9]+')


def gpu_target(device_name, tf32=True):
  """The targets.json entry of a GPU named `device_name` as CUDA names it ('Tesla V100-SXM2-16GB',
  'NVIDIA A100-SXM4-40GB'): every word of the entry's name among the device name's; None for a
  GPU the table does not have."""
  tokens = set(_TOKEN.findall(device_name.upper()))
  for target in targets_lib.select(['all'], None, 'estimator', tf32)[1:] + [
      t for t in targets_lib.table_targets() if t['road'] == 'historic']:
    if target['kind'] == 'gpu' and all(w in tokens for w in target['name'].upper().split()):
      return target
  return None


def tpu_slice_target(accelerator_type):
  """The targets.json entry of a TPU slice ('v3-32'): its generation's 8-core entry with the
  peak, bandwidth, host vCPUs and price scaled to the slice, memory per core unchanged. The
  slice's all-reduce is not modelled: on a pod slice the prediction is a lower bound. None where
  the table has no entry of that generation.

  Raises:
    PipelineError: an accelerator type TPUEstimator cannot run on (`topologies.slice_shape`).
  """
  _, devices = topologies.slice_shape(accelerator_type)
  _, number = topologies.parse(accelerator_type)
  base = {t['name']: t for t in targets_lib.table_targets()}.get(
      'TPU %s-8' % accelerator_type.split('-')[0].lower())
  if base is None:
    return None
  scale = number / 8.0
  return dict(
      base, name='TPU %s' % accelerator_type.lower(), devices=devices,
      machine='%s, %d devices' % (accelerator_type.lower(), devices),
      peak_flops={k: v * scale for k, v in base['peak_flops'].items()},
      memory_bandwidth=base['memory_bandwidth'] * scale,
      host_vcpus=int(base['host_vcpus'] * scale),
      price={k: v * scale for k, v in (base.get('price') or {}).items() if v is not None})


def _cost(config, batch_size):
  """The JobCost of config's network at `batch_size`, on synthetic input of its shapes (no
  warm start: the graph is only counted)."""
  counted = dataclasses.replace(
      config, data=dataclasses.replace(config.data, fake_data=True),
      model=dataclasses.replace(config.model, init_checkpoint='', train_batch_size=batch_size))
  return job_cost.from_config(counted, report.job_name(counted))


def _record(cost, target, iterations_per_loop=1):
  prediction = step_model.predict(cost, target, None, iterations_per_loop)
  fits, needed = step_model.memory_fits(cost, target)
  return {
      'target': target['name'], 'machine': target.get('machine'),
      'predicted_seconds': prediction.seconds, 'lower_seconds': prediction.lower,
      'upper_seconds': prediction.upper, 'binds': prediction.binds,
      'flops_per_step': job_cost.flops_per_step(cost), 'memory_needed_bytes': needed,
      'fits': fits, 'input': INPUT_NOT_TIMED,
  }


def _gpu_names():
  if not tf.config.experimental.list_physical_devices('GPU'):
    return []
  from tensorflow.python.client import device_lib  # pylint: disable=g-import-not-at-top
  names = []
  for device in device_lib.list_local_devices():
    if device.device_type == 'GPU':
      match = re.search(r'name: ([^,]+)', device.physical_device_desc)
      names.append(match.group(1) if match else device.physical_device_desc)
  return names


def predict_run(config, session_config=None):
  """The step-time prediction of a CPU or GPU training run of `config` (a
  `trainer.run.run_config.Config`) on the device it trains on, as a dict for results.json:
  target, machine, predicted_seconds, lower_seconds, upper_seconds (seconds per step), binds,
  flops_per_step, memory_needed_bytes, fits, input; or {'target': None, 'skipped': why} for a TPU
  run (its type is not known before the TPU is resolved) or a GPU the table does not have.
  Takes a second or two: the graph is built and counted, this host's rates measured with
  `session_config` (the run's threads)."""
  if config.use_tpu:
    return {'target': None, 'skipped': 'a TPU run: its type is known only once resolved; '
                                       'python -m trainer.advise predicts it per TPU type'}
  gpus = _gpu_names()
  if gpus:
    target = gpu_target(gpus[0], tf32=not tf.__version__.startswith('1.'))
    if target is None:
      return {'target': None, 'skipped': 'GPU %r is not in trainer/advise/targets.json'
                                         % gpus[0]}
    used = max(1, sum(1 for d in config.mirrored_devices if 'GPU' in d.upper()))
    # Each GPU steps through its share of the batch (the all-reduce is not modelled).
    record = _record(_cost(config, max(1, config.train_batch_size // used)), target)
    record['devices'] = used
    return record
  target = host_probe.target(host_probe.measure(session_config))
  return _record(_cost(config, config.train_batch_size), target)


def predict_slice(config, accelerator_type):
  """The prediction (as predict_run's) for `config` on the TPU slice `accelerator_type`, with
  config.iterations_per_loop steps per host round trip."""
  target = tpu_slice_target(accelerator_type)
  if target is None:
    return {'target': None, 'skipped': 'no %s entry in trainer/advise/targets.json'
                                       % accelerator_type.split('-')[0]}
  return _record(_cost(config, config.train_batch_size), target, config.iterations_per_loop)


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
