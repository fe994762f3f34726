"""The JSON records and printed tables of `python -m trainer.benchmark`, and what each number was
measured on (runtime, CPU, cores)."""

import os
import platform
import time

import tensorflow.compat.v1 as tf

from trainer.host import threads as host_threads
from trainer.run import results
from trainer.storage import json_files


def runtime_facts():
  """What the numbers were measured on (the CPU as trainer.host.cpu reads it)."""
  cpu, _, _ = host_threads.current()
  return dict(
      results.tensorflow_runtime(),
      cpu_model=cpu.model,
      cpu_flags=[flag for flag in ('sse4_2', 'avx', 'avx2', 'fma', 'avx512f', 'avx512_vnni')
                 if flag in cpu.flags],
      usable_cores=cpu.logical_cpus,
      onednn_max_isa=cpu.onednn_max_isa,
      gpus=[d.name for d in tf.config.experimental.list_physical_devices('GPU')],
      hostname=platform.node(),
      time=time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()),
  )


def runtime_tag(facts):
  return 'tf%s%s%s' % (facts['tensorflow_version'], '-mkl' if facts['mkl_enabled'] else '',
                       '-' + facts['onednn_max_isa'].lower() if facts.get('onednn_max_isa')
                       else '')


def write_record(name, config, measurements, rows, columns, output=None):
  """Prints the table, writes the JSON record (to `output`, which the command checked before
  timing anything; default runs/benchmarks/<name>-<details>-<runtime>.json, replaced by a re-run
  of the same benchmark on the same runtime) aside and renamed into place, and returns it."""
  facts = runtime_facts()
  record = {'benchmark': name, 'runtime': facts, 'config': config, 'measurements': measurements}
  path = output or os.path.join(
      'runs', 'benchmarks', '%s-%s.json' % (_details(name, config), runtime_tag(facts)))
  tf.io.gfile.makedirs(os.path.dirname(path) or '.')
  json_files.write(path, record)
  widths = [max(len(str(c)), *(len(str(r[i])) for r in rows)) for i, c in enumerate(columns)]
  print('%s on TF %s (%s, MKL %s), %s, %d cores' % (
      name, facts['tensorflow_version'], facts['tensorflow_build'],
      'on' if facts['mkl_enabled'] else 'off', facts['cpu_model'], facts['usable_cores']))
  for row in [columns] + rows:
    print('  '.join(str(v).rjust(w) for v, w in zip(row, widths)))
  print('record: %s' % path)
  return record


def _details(name, config):
  if name in ('model', 'profile'):
    depth = config['resnet_depth'] if config['model'] == 'resnet' else ''
    # A user network's MODULE:CALLABLE: no colon in a file name.
    return '%s-%s%s-%d-b%d%s' % (name, config['model'].replace(':', '.'), depth,
                                    config['image_size'] or config['max_seq_length'] or 0,
                                    config['batch_size'],
                                    '-bf16' if config.get('precision') == 'bfloat16' else '')
  if name == 'input':
    return 'input-%d-b%d' % (config['image_size'], config['batch_size'])
  return name


def fmt(summary, scale=1.0, digits=1):
  """'median (min-max)' of a `timing.summarize` summary, times `scale`."""
  return '%.*f (%.*f-%.*f)' % (digits, summary['median'] * scale, digits, summary['min'] * scale,
                               digits, summary['max'] * scale)
