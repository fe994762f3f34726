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
  unknown = [n for n in names if n != 'all' and n.lower() not in known and n.lower() != 'this cpu']
  if unknown:
    raise PipelineError('--targets: unknown %s; known: %s.' % (
        ', '.join(unknown), ', '.join(['this CPU'] + sorted(known.values()))))


def select(names, cpu_target, road='estimator'):
  """The targets named in `names` (a list; ['all']: every target of `road`), `cpu_target` (this
  host, host_probe.target) first.

  road: 'estimator' (trainer.main: TensorFlow's executor on GPUs, TPUEstimator on TPU v2-v4) or
    'keras' (trainer.train_keras on JAX: XLA compiles the step into one fused program on GPUs
    too, and TPU v5e/v6e are open to it).

  Raises:
    PipelineError: a name the table does not have.
  """
  table = table_targets()
  if road == 'keras':
    table = [dict(t, fused=True) if t['kind'] == 'gpu' else t for t in table]
  known = {t['name'].lower(): t for t in table}
  if names == ['all']:
    chosen = [t for t in table if t['road'] in (road, 'estimator')]
  else:
    check_names(names)
    chosen = [known[n.lower()] for n in names if n.lower() in known]
  return [cpu_target] + chosen
