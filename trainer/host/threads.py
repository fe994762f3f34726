"""Thread counts and CPU library settings for the host the trainer runs on, each with its reason.

TensorFlow's CPU defaults suit neither a small VM nor every x86 CPU (BENCHMARKS.md, "Fast on
every x86 CPU"): an inter-op pool as wide as the machine runs two ops at once, each asking for
every core; OpenMP threads (intel-tensorflow's oneDNN/MKL) spin 200 ms after each parallel
region (KMP_BLOCKTIME's default), taking cores from TensorFlow's own threads and from any other
process; and TF >= 2.9 turns its oneDNN kernels on by default only on x86 CPUs with
neural-network features (AVX512_VNNI, AVX512_BF16, AVX_VNNI, AMX), leaving an AVX2-only CPU on
Eigen kernels several times slower.

The process settings are environment variables that TensorFlow and OpenMP read once, when they
load: `apply_process_env` sets them (a value the user set wins) and `trainer/__init__.py` calls
it before anything imports TensorFlow. The session's thread pools are ConfigProto fields
(trainer.run.estimator). Override any of them with its variable: OMP_NUM_THREADS, KMP_BLOCKTIME,
TF_ENABLE_ONEDNN_OPTS, TF_NUM_INTRAOP_THREADS, TF_NUM_INTEROP_THREADS.
"""

import dataclasses
import functools
import os
from typing import Tuple

from trainer.host import cpu as cpu_lib

# Up to this many physical cores, ops run one at a time (each already uses every core).
SERIAL_OPS_MAX_CORES = 4


@dataclasses.dataclass(frozen=True)
class HostSettings:
  """What the trainer asks of the host's CPU.

  Attributes:
    intra_op: threads one op may use (ConfigProto.intra_op_parallelism_threads).
    inter_op: ops run at once (ConfigProto.inter_op_parallelism_threads).
    env: (name, value) environment defaults for TensorFlow and OpenMP, read at load time.
    reasons: one sentence per decision, for the run's log.
  """
  intra_op: int
  inter_op: int
  env: Tuple[Tuple[str, str], ...]
  reasons: Tuple[str, ...]

  def as_record(self):
    """{'intra_op': int, 'inter_op': int, 'env': {name: value}} (the chosen defaults)."""
    return {'intra_op': self.intra_op, 'inter_op': self.inter_op, 'env': dict(self.env)}


def _thread_count(environ, name, label, default, why, reasons):
  """`environ[name]` where the user set a positive integer there, else `default`; the reason
  goes to `reasons` (a value that is not a positive integer is ignored, and said so)."""
  value = environ.get(name, '').strip()
  if value:
    if value.isdigit() and int(value) > 0:
      if int(value) != default:
        reasons.append('%s %s: %s' % (label, value, name))
        return int(value)
    else:
      reasons.append('%s=%r ignored: not a positive integer' % (name, value))
  reasons.append('%s %d: %s' % (label, default, why))
  return default


def choose(cpu, environ=None):
  """The settings for one process on `cpu`.

  Args:
    cpu: a `cpu_lib.CpuInfo`.
    environ: the environment (default os.environ); TF_NUM_INTRAOP_THREADS and
      TF_NUM_INTEROP_THREADS there override the thread counts.

  Returns:
    HostSettings.
  """
  environ = os.environ if environ is None else environ
  reasons = []
  cores = cpu.physical_cores
  intra_op = _thread_count(
      environ, 'TF_NUM_INTRAOP_THREADS', 'intra-op threads', cores, 'one per physical core%s' % (
          ' (hyperthread siblings share the vector units that convolutions fill)'
          if cpu.smt else ''), reasons)
  serial = cores <= SERIAL_OPS_MAX_CORES
  inter_op = _thread_count(
      environ, 'TF_NUM_INTEROP_THREADS', 'inter-op', 1 if serial else 2,
      'one op at a time on <= %d cores, each with all of them (two at once oversubscribe the '
      'cores)' % SERIAL_OPS_MAX_CORES if serial else 'two ops at a time', reasons)
  env = [('OMP_NUM_THREADS', str(intra_op)),
         # Intel's guide for TensorFlow on CPUs: 0 or 1 ms instead of OpenMP's 200 ms spin.
         ('KMP_BLOCKTIME', '1')]
  reasons.append('OpenMP threads %d, KMP_BLOCKTIME 1 ms (not 200 ms of spinning after each '
                 'parallel region)' % intra_op)
  if cpu.machine in ('x86_64', 'AMD64') and cpu.isa in ('avx512', 'avx2'):
    env.append(('TF_ENABLE_ONEDNN_OPTS', '1'))
    reasons.append('TF_ENABLE_ONEDNN_OPTS=1: TF >= 2.9 turns oneDNN on by itself only on CPUs '
                   'with AVX-512 VNNI/BF16, AVX-VNNI or AMX; this one has %s' % cpu.isa)
  return HostSettings(intra_op=intra_op, inter_op=inter_op, env=tuple(env),
                      reasons=tuple(reasons))


def apply_process_env(settings, environ=None):
  """Sets `settings.env` in `environ` (default os.environ) where the user has not.

  Returns:
    list of (name, value, 'set' or 'user') in the order of `settings.env`.
  """
  environ = os.environ if environ is None else environ
  applied = []
  for name, value in settings.env:
    if name in environ:
      applied.append((name, environ[name], 'user'))
    else:
      environ[name] = value
      applied.append((name, value, 'set'))
  return applied


@functools.lru_cache(maxsize=None)
def current():
  """(cpu_lib.CpuInfo, HostSettings, applied env) of this process, computed once; the
  environment is applied on the first call (`trainer/__init__.py` makes it before TensorFlow
  loads)."""
  cpu = cpu_lib.read_cpu()
  settings = choose(cpu)
  return cpu, settings, apply_process_env(settings)


def describe():
  """One log line: the CPU, the settings and why."""
  cpu, settings, applied = current()
  env = ', '.join('%s=%s%s' % (name, value, ' (yours)' if source == 'user' else '')
                  for name, value, source in applied)
  return 'host CPU: %s; intra-op %d, inter-op %d; %s. Why: %s.' % (
      cpu.describe(), settings.intra_op, settings.inter_op, env, '; '.join(settings.reasons))
