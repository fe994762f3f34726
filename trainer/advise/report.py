"""The advice as a readable table and as a JSON record."""

import platform

import tensorflow.compat.v1 as tf

from trainer.advise import job_cost
from trainer.advise import step_model

_FITS = {True: 'yes', False: 'NO', None: '-', step_model.MAY_NOT_FIT: 'may not'}


def job_name(config):
  """'resnet-18 224px batch 128' and the like."""
  model = config.model
  network = model.model
  depth = getattr(model, 'resnet_depth', None)
  if network == 'resnet' and depth:
    network = 'resnet-%d' % depth
  if model.is_model_fn:  # a legacy job's input: its own shapes
    return '%s batch %d' % (network, config.train_batch_size)
  size = ('%d tokens' % config.data.max_seq_length if config.data.max_seq_length else
          '%dpx' % config.data.image_size)
  return '%s %s batch %d' % (network, size, config.train_batch_size)


def record(cost, figures, here_input_rate, advice, targets, shapes=None):
  """The JSON record: the job's cost, this host's figures (with shape_probe.measure's counts:
  `shapes`), each target's entry (less this host's per-shape seconds) and row."""
  shapes = shapes or {}
  return {
      'job': {'name': cost.name, 'batch_size': cost.batch_size,
              'flops_per_step': job_cost.flops_per_step(cost), 'flops_source': cost.flops_source,
              'ops_per_step': len(cost.ops), 'weight_bytes': cost.weight_bytes,
              'state_bytes': cost.state_bytes, 'activation_bytes': cost.activation_bytes,
              'infeed_bytes_per_step': cost.infeed_bytes_per_step},
      'host': dict(figures, input_examples_per_sec=here_input_rate,
                   python=platform.python_version(), tensorflow=tf.__version__,
                   shapes_timed=shapes.get('timed'), shapes_cached=shapes.get('cached'),
                   shapes_failed=shapes.get('failed'),
                   shape_probe_seconds=shapes.get('probe_seconds')),
      'targets': [{k: v for k, v in t.items() if k not in ('sources', 'op_seconds')}
                  for t in targets],
      'advice': advice,
  }


def _duration(seconds):
  if seconds is None:
    return '-'
  if seconds < 1:
    return '%.1f ms' % (seconds * 1e3)
  if seconds < 120:
    return '%.1f s' % seconds
  if seconds < 7200:
    return '%.0f min' % (seconds / 60)
  return '%.1f h' % (seconds / 3600)


def _money(value):
  return '-' if value is None else '$%.2f' % value


def table(rec):
  """The advice as text: one line per target, then the verdict."""
  job = rec['job']
  lines = ['%s: %.2f GFLOP per step (%s), %d ops; weights %.1f MB, activations %.1f MB' % (
      job['name'], job['flops_per_step'] / 1e9, 'TensorFlow profiler', job['ops_per_step'],
      job['weight_bytes'] / 1e6, job['activation_bytes'] / 1e6)]
  header = ('target', 'step (lower-upper)', 'ex/s', 'binds', 'input-bound', 'fits',
            'epoch', 'run', 'run $ (spot)')
  rows = []
  for r in rec['advice']['rows']:
    rows.append((
        r['target'], '%s (%s-%s)' % (_duration(r['step_seconds']), _duration(r['lower_seconds']),
                                     _duration(r['upper_seconds'])),
        '%.0f' % r['examples_per_sec'], r['binds'],
        '%s %.0f%%' % (r['input_bound'], 100 * r['input_share']) if r['input_seconds'] is not
        None else 'not measured', _FITS[r['fits']],
        _duration(r['epoch_seconds']), _duration(r['run_seconds']),
        '%s (%s)' % (_money(r.get('run_cost_on_demand')), _money(r.get('run_cost_spot')))))
  widths = [max(len(str(x)) for x in column) for column in zip(header, *rows)]
  for row in [header] + rows:
    lines.append('  '.join(str(x).ljust(w) for x, w in zip(row, widths)).rstrip())
  per = 'run' if any(r.get('run_cost_on_demand') for r in rec['advice']['rows']) else 'epoch'
  lines.append('fastest: %s; cheapest per %s: %s; %s.' % (
      rec['advice']['fastest'], per, rec['advice']['cheapest'] or '-', rec['advice']['verdict']))
  return '\n'.join(lines)
