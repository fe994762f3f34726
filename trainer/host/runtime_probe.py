"""`python -m trainer.host.runtime_probe`: which TensorFlow runtime trains fastest on this host,
measured, for `make train` (RUNTIME=auto, the default).

No rule by CPU features predicts it (BENCHMARKS.md, "Fast on every x86 CPU"): on AVX-512 hosts
intel-tensorflow 1.15.2 and TF 2.15.1 with oneDNN run make train's step at about the same rate,
and the ranking on AVX2-only hosts depends on kernels that an ISA cap cannot emulate for
intel-tensorflow (its MKL-DNN 0.x has no ISA switch). So each candidate runs make train's
ResNet-18 step (`trainer.benchmark model --path=session`, synthetic input, batch 256) for a few
steps in its own virtualenv, two processes each in the order A B B A, and the fastest wins;
intel-tensorflow, the runtime of make train's recorded runs, keeps the job unless another is
more than `MARGIN` faster. Stock TF 1.15.5 is no candidate: 3-10x behind both wherever it was
measured. On a CPU with bfloat16 instructions (AVX512_BF16, AMX-BF16) TF 2.15 in bfloat16
(trainer/run/cpu_bfloat16.py) is a third candidate, with --bfloat16: for the recipes whose
bfloat16 runs met their accuracy bar (BF16_PROBE_MODELS in the Makefile; none since 2026-12-01:
ResNet-18's came to 0.9196 against 0.92, BENCHMARKS.md, "The 6-epoch recipe"). A choice is kept
only when every float32 candidate ran (bfloat16 may be refused where oneDNN is off or a GPU is
seen).

The choice is cached in --cache with the CPU it was made on, and measured again on another CPU.
Prints the `make` variables of the choice (e.g. `RUNTIME=tf1 TF1=mkl`) on stdout, the
measurements and the reason on stderr.
"""

import os
import subprocess
import sys

from absl import app
from absl import flags

from trainer.host import cpu as cpu_lib
from trainer.storage import json_files

MARGIN = 0.05
ROUNDS = 2  # processes per runtime
# name -> (virtualenv, make variables, what it is).
CANDIDATES = {
    'tf1-mkl': ('.venv-mkl', 'RUNTIME=tf1 TF1=mkl', 'intel-tensorflow 1.15.2'),
    'tf2': ('.venv-tf2', 'RUNTIME=tf2', 'TF 2.15.1 with oneDNN'),
    'tf2-bf16': ('.venv-tf2', 'RUNTIME=tf2 PRECISION=bfloat16',
                 'TF 2.15.1 with oneDNN, in bfloat16'),
}
BF16 = 'tf2-bf16'
# The candidates' own flags for the probe step.
CANDIDATE_FLAGS = {BF16: ('--precision=bfloat16',)}
INCUMBENT = 'tf1-mkl'
# make train's network and batch; a few steps after two warm-up steps.
PROBE_FLAGS = ('--model=resnet', '--resnet_depth=18', '--image_size=32', '--num_classes=10',
               '--batch_size=256', '--path=session', '--warmup_steps=2', '--steps_per_window=2',
               '--windows=2', '--overwrite')

FLAGS = flags.FLAGS


# Raised when what a candidate runs changes, so that choices cached before are measured again
# (2: a bfloat16 run's filter gradients stay float32, trainer/run/cpu_bfloat16.py, 2026-11-30).
STEP_VERSION = 2


def cpu_key(cpu):
  """What a cached choice holds for: the CPU, how many cores this process may use, oneDNN's ISA
  cap and the candidates' step (STEP_VERSION)."""
  return {'cpu_model': cpu.model, 'isa': cpu.isa, 'physical_cores': cpu.physical_cores,
          'logical_cpus': cpu.logical_cpus, 'onednn_max_isa': cpu.onednn_max_isa,
          'step_version': STEP_VERSION}


def candidates(cpu):
  """The runtimes to measure on `cpu` (a CpuInfo): bfloat16 only where it computes it."""
  return [name for name in CANDIDATES if name != BF16 or cpu.computes_bfloat16]


def choose(rates, incumbent=INCUMBENT, margin=MARGIN):
  """The runtime to train with, and why.

  Args:
    rates: runtime name -> measured examples/sec (None: it failed to run).
    incumbent: kept unless another runtime is more than `margin` faster.
    margin: fraction.

  Returns:
    (name, reason).

  Raises:
    ValueError: no runtime ran.
  """
  ran = {name: rate for name, rate in rates.items() if rate}
  if not ran:
    raise ValueError('no runtime ran the probe step')
  best = max(ran, key=ran.get)
  if incumbent in ran and best != incumbent and ran[best] <= ran[incumbent] * (1 + margin):
    return incumbent, '%s is within %d%% of the fastest (%s): keeping %s' % (
        incumbent, round(100 * margin), best, incumbent)
  return best, 'fastest on this CPU'


def _probe(name, output):
  """Examples/sec of make train's step in runtime `name` (one process), or None with the reason
  printed."""
  python = os.path.join(CANDIDATES[name][0], 'bin', 'python')
  if not os.path.exists(python):
    print('runtime probe: %s is not installed (%s)' % (name, python), file=sys.stderr)
    return None
  done = subprocess.run([python, '-m', 'trainer.benchmark', 'model', '--output=%s' % output] +
                        list(PROBE_FLAGS) + list(CANDIDATE_FLAGS.get(name, ())),
                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                        universal_newlines=True)
  if done.returncode:
    print('runtime probe: %s failed (exit %d): %s' % (
        name, done.returncode, ' '.join(done.stderr.strip().splitlines()[-1:])),
          file=sys.stderr)
    return None
  return json_files.read(output)['measurements']['session_examples_per_sec']['median']


def measure(record_dir, names, rounds=ROUNDS):
  """Each candidate's examples/sec: the mean over `rounds` processes, run in the order A B, B A,
  ... so that a drift of the machine's speed costs both the same; None for a candidate that did
  not run."""
  rates = {name: [] for name in names}
  for round_ in range(rounds):
    for name in (names if round_ % 2 == 0 else names[::-1]):
      rate = _probe(name, os.path.join(record_dir, '%s-%d.json' % (name, round_)))
      rates[name].append(rate)
  return {name: (sum(r) / len(r) if r and all(r) else None) for name, r in rates.items()}


def main(argv):
  del argv
  cpu = cpu_lib.read_cpu()
  key = cpu_key(cpu)
  # bfloat16 only for the recipes whose bfloat16 runs met their accuracy bar (--bfloat16: the
  # Makefile's BF16_PROBE_MODELS); for the others it is not even measured.
  names = [name for name in candidates(cpu) if name != BF16 or FLAGS.bfloat16]
  cached = None
  if not FLAGS.remeasure:
    try:
      cached = json_files.read(FLAGS.cache)
    except ValueError:
      print('runtime probe: %s is not JSON: measuring again' % FLAGS.cache, file=sys.stderr)
  if isinstance(cached, dict) and cached.get('cpu') == key:
    rates = cached.get('examples_per_sec')
    name = None
    if isinstance(rates, dict) and set(rates) == set(names):  # every candidate measured
      name, _ = choose(rates)
    elif not rates and cached.get('runtime') in names:  # a choice without its figures
      name = cached['runtime']
    if name:
      print('runtime: %s (%s), measured on this CPU before (%s; make train '
            'RUNTIME_PROBE=again measures again)' % (name, CANDIDATES[name][2], FLAGS.cache),
            file=sys.stderr)
      print(CANDIDATES[name][1])
      return
  record_dir = os.path.join(os.path.dirname(FLAGS.cache) or '.', 'runtime-probe')
  os.makedirs(record_dir, exist_ok=True)
  print('runtime probe on %s: make train\'s ResNet-18 step in each runtime (%s), %d processes '
        'each, alternating (a minute or two; once per CPU; the machine should be otherwise idle)'
        % (cpu.describe(), ', '.join(names), ROUNDS), file=sys.stderr)
  rates = measure(record_dir, names)
  try:
    name, reason = choose(rates)
  except ValueError as e:
    print('error: runtime probe: %s; install them (make venvs) or set RUNTIME=tf1 or '
          'RUNTIME=tf2.' % e, file=sys.stderr)
    sys.exit(2)
  print('runtime: %s (%s): %s; %s' % (
      name, CANDIDATES[name][2], ', '.join(
          '%s %.0f examples/s' % (n, r) if r else '%s did not run' % n
          for n, r in rates.items()), reason), file=sys.stderr)
  # bfloat16 may be refused where the CPU has the instructions (oneDNN off, a GPU): it then
  # stays unmeasured, and the float32 runtimes decide.
  if all(rates[n] for n in names if n != BF16):
    # Aside and renamed into place: a second make train reads either choice whole, never half.
    json_files.write(FLAGS.cache, {'cpu': key, 'runtime': name, 'examples_per_sec': rates,
                                   'reason': reason})
  else:
    print('runtime probe: not every runtime ran, so the choice is not kept: the next make train '
          'measures again', file=sys.stderr)
  print(CANDIDATES[name][1])


def run():
  flags.DEFINE_string('cache', 'runs/runtime-choice.json', 'Where the choice is kept, with the '
                      'CPU it was measured on.')
  flags.DEFINE_bool('remeasure', False, 'Measure again even if --cache holds a choice for '
                    'this CPU.')
  flags.DEFINE_bool('bfloat16', False, 'The recipe to train met its accuracy bar in bfloat16 '
                    '(the Makefile\'s BF16_PROBE_MODELS): the bfloat16 runtime is measured and '
                    'may be chosen for it.')
  app.run(main)


if __name__ == '__main__':
  run()
