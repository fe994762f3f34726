"""The targets `trainer.advise` predicts for: targets.json beside this file (each value with its
source), each entry completed with its kind's defaults, plus this host measured
(host_probe.py)."""

import json
import os

from trainer.errors import PipelineError

_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'targets.json')
with open(_PATH) as _f:
  TABLE = json.load(_f)
ROADS = ('estimator', 'keras', 'historic')


def table_targets():
  """Every targets.json entry with its kind's defaults filled in (a list of dicts)."""
  targets = []
  for entry in TABLE['targets']:
    target = dict(TABLE['defaults'].get(entry['kind'], {}), **entry)
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


def select(names, cpu_target, road='estimator', tf32=True):
  """The targets named in `names` (a list; ['all']: every target of `road`), `cpu_target` (this
  host, host_probe.target) first.

  road: 'estimator' (trainer.main: TensorFlow's executor on GPUs, TPUEstimator on TPU v2-v4) or
    'keras' (trainer.train_keras on JAX: XLA compiles the step into one fused program on GPUs
    too, and TPU v5e/v6e are open to it).

  tf32: whether GPUs of Ampere and newer run fp32 convolutions and matmuls as TF32 (TensorFlow
    2.4 and later; JAX's default); else fp32.

  Raises:
    PipelineError: a name the table does not have.
  """
  table = table_targets()
  if not tf32:
    table = [dict(t, precision='fp32') if t['precision'] == 'tf32' else t for t in table]
  if road == 'keras':
    # JAX compiles the step into one program; on a TPU VM it dispatches steps asynchronously,
    # with no TPU Node round trip.
    table = [dict(t, fused=True) if t['kind'] == 'gpu' else
             dict(t, loop_overhead=0.0) if t['kind'] == 'tpu' else t for t in table]
  known = {t['name'].lower(): t for t in table}
  names = [n for n in names if n]
  if [n.lower() for n in names] == ['all']:
    chosen = [t for t in table if t['road'] in (road, 'estimator')]
  else:
    check_names(names)
    chosen = [known[n.lower()] for n in names if n.lower() in known]
  return [cpu_target] + chosen
