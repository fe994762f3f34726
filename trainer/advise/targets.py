"""The targets `trainer.advise` predicts for: targets.json beside this file (each value with its
source), each entry completed with its kind's defaults, plus this host measured
(host_probe.py)."""

import json
import os
import re

from trainer.errors import PipelineError
from trainer.tpu import topologies

_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'targets.json')
with open(_PATH) as _f:
  TABLE = json.load(_f)
ROADS = ('estimator', 'keras', 'torch_xla', 'historic')
# The roads that compile each step into one XLA program and reach a TPU VM through PJRT:
# trainer.train_keras on JAX and trainer.train_torch on PyTorch/XLA. targets.json's 'keras' rows
# (TPU v5e, v6e: PJRT only, tensorflow/tensorflow#90807) are open to both.
XLA_ROADS = ('keras', 'torch_xla')
_WORD = re.compile(r'[A-Za-z0-9]+')


# What an entry with "like" (a published case on a table target's hardware) does not take from it.
_OWN_FIELDS = ('name', 'road', 'machine', 'price', 'sources')


def table_targets():
  """Every targets.json entry with its kind's defaults filled in (a list of dicts); an entry with
  "like": NAME takes NAME's figures (peaks, memory, bandwidth, ...) where it gives none."""
  by_name = {entry['name']: entry for entry in TABLE['targets']}
  targets = []
  for entry in TABLE['targets']:
    base = by_name[entry['like']] if 'like' in entry else {}
    hardware = {k: v for k, v in base.items() if k not in _OWN_FIELDS}
    target = dict(TABLE['defaults'].get(base.get('kind', entry.get('kind')), {}),
                  **dict(hardware, **entry))
    target['source_text'] = '; '.join(TABLE['sources'][s] for s in entry['sources'])
    targets.append(target)
  return targets


def check_names(names):
  """Raises PipelineError for a name in `names` the table does not have (before any work)."""
  known = {t['name'].lower(): t['name'] for t in table_targets()}
  if 'all' in [n.lower() for n in names] and len(names) > 1:
    raise PipelineError('--targets: all stands alone; or name the targets.')
  unknown = [n for n in names if n.lower() not in known and n.lower() not in ('all', 'this cpu')]
  if unknown:
    raise PipelineError('--targets: unknown %s; known: %s.' % (
        ', '.join(unknown), ', '.join(['this CPU'] + sorted(known.values()))))


def on_road(target, road):
  """`target` as `road` runs it: an XLA road (XLA_ROADS) compiles the step into one program, so a
  GPU runs it fused and a TPU VM dispatches steps asynchronously, with no TPU Node round trip.
  Neither road's host-side cost per step (JAX's dispatch, PyTorch/XLA's tracing of the step's
  lazy tensors) is modelled: no source gives one. On 'torch_xla' a TPU of several devices is
  priced as trainer.train_torch uses it: one process on one device (torch_xla.device()), the
  target rented whole."""
  if road in XLA_ROADS and target['kind'] == 'gpu':
    return dict(target, fused=True)
  if road == 'torch_xla' and target['kind'] == 'tpu' and target['devices'] > 1:
    share = 1.0 / target['devices']
    return dict(target, loop_overhead=0.0, devices=1,
                peak_flops={k: v * share for k, v in target['peak_flops'].items()},
                memory_bandwidth=target['memory_bandwidth'] * share,
                machine='%s: one of its %d devices (trainer.train_torch)'
                % (target['machine'], target['devices']))
  if road in XLA_ROADS and target['kind'] == 'tpu':
    return dict(target, loop_overhead=0.0)
  return target


def uses_tf32(road, tensorflow_version):
  """Whether `road` runs fp32 convolutions and matmuls as TF32 on Ampere and newer GPUs: the Keras
  road always (JAX's default precision, https://docs.jax.dev/en/latest/_autosummary/
  jax.default_matmul_precision.html); the Estimator road with TensorFlow 2.4 and later (TF32 on by
  default, tf.config.experimental.enable_tensor_float_32_execution), never with 1.15, which has
  no build for those GPUs. Not the advisor's own TensorFlow, unless it is the road's runtime.
  (The 'torch_xla' road prices no GPU.)"""
  return road in XLA_ROADS or not tensorflow_version.startswith('1.')


def _with_tf32(target, tf32):
  """`target`, run in fp32 where its table precision is TF32 and `tf32` is False."""
  return dict(target, precision='fp32') if not tf32 and target['precision'] == 'tf32' else target


def gpu_named(device_name, tf32=True):
  """The table's GPU whose name's words are all among `device_name`'s, as CUDA names the device
  ('Tesla V100-SXM2-16GB' -> V100, 'NVIDIA A100-SXM4-40GB' -> A100 40GB); None for a GPU the
  table does not have. tf32: as select's."""
  words = set(_WORD.findall(device_name.upper()))
  for target in table_targets():
    if target['kind'] == 'gpu' and all(w in words for w in target['name'].upper().split()):
      return _with_tf32(target, tf32)
  return None


def tpu_slice(accelerator_type, road='estimator'):
  """A TPU slice ('v3-32') as a target: its generation's 8-core entry with the peak, memory
  bandwidth, host vCPUs and price scaled to the slice, the memory per core unchanged. The slice's
  all-reduce is not modelled, so a pod slice's prediction is optimistic. None where the table has
  no 8-core entry of that generation (v2, v3 and v4 it has).

  Raises:
    PipelineError: an accelerator type TPUEstimator cannot run on (`topologies.slice_shape`).
  """
  _, devices = topologies.slice_shape(accelerator_type)
  _, number = topologies.parse(accelerator_type)
  name = accelerator_type.lower()
  base = {t['name']: t for t in table_targets()}.get('TPU %s-8' % name.split('-')[0])
  if base is None:
    return None
  scale = number / 8.0
  return on_road(dict(
      base, name='TPU %s' % name, devices=devices, machine='%s, %d devices' % (name, devices),
      peak_flops={k: v * scale for k, v in base['peak_flops'].items()},
      memory_bandwidth=base['memory_bandwidth'] * scale,
      host_vcpus=int(base['host_vcpus'] * scale),
      price={k: v * scale for k, v in (base.get('price') or {}).items() if v is not None}), road)


def select(names, cpu_target, road='estimator', tf32=True):
  """The targets named in `names` (a list; ['all']: every target of `road`), `cpu_target` (this
  host, host_probe.target) first.

  road: 'estimator' (trainer.main: TensorFlow's executor on GPUs, TPUEstimator on TPU v2-v4),
    'keras' (trainer.train_keras on JAX: XLA compiles the step into one fused program on GPUs
    too) or 'torch_xla' (trainer.train_torch --device=xla: one XLA device, so the TPUs only, a
    multi-device one priced at one device); TPU v5e/v6e are open to both.

  tf32: whether GPUs of Ampere and newer run fp32 convolutions and matmuls as TF32 (TensorFlow
    2.4 and later; JAX's default); else fp32.

  Raises:
    PipelineError: a name the table does not have; a GPU named on the 'torch_xla' road.
  """
  table = table_targets()
  table = [on_road(_with_tf32(t, tf32), road) for t in table]
  known = {t['name'].lower(): t for t in table}
  names = [n for n in names if n]
  everything = [n.lower() for n in names] == ['all']
  if everything:
    chosen = [t for t in table if t['road'] == 'estimator'
              or (t['road'] == 'keras' and road in XLA_ROADS)]
  else:
    check_names(names)
    chosen = [known[n.lower()] for n in names if n.lower() in known]
  if road == 'torch_xla':
    gpus = [t['name'] for t in chosen if t['kind'] == 'gpu']
    if gpus and not everything:
      raise PipelineError(
          '--road=torch_xla: torch_xla 2.9 has no CUDA device (PyTorch/XLA removed XLA:CUDA), so '
          'trainer.train_torch trains on %s with --device=cuda, eager PyTorch, which the advisor '
          'does not model: leave out %s, or choose --road=keras.' % (gpus[0], ', '.join(gpus)))
    chosen = [t for t in chosen if t['kind'] != 'gpu']
  return [cpu_target] + chosen
