"""What this machine's CPU offers: model, vendor, vector ISA, usable logical CPUs and physical
cores. Read from Linux's /proc/cpuinfo, /sys topology files and the container's cgroup CPU quota;
elsewhere the fields fall back to what Python knows (os.cpu_count) and the ISA to 'unknown'."""

import dataclasses
import math
import os
import platform
from typing import FrozenSet, Optional

# The vector extensions that decide which kernels oneDNN, MKL and Eigen run, widest first.
# 'avx512' needs the AVX-512 foundation plus the BW/DQ/VL subsets ("avx512_core", what oneDNN's
# and TF's AVX-512 paths require).
AVX512_CORE = frozenset({'avx512f', 'avx512bw', 'avx512dq', 'avx512vl'})
ISA_ORDER = ('avx512', 'avx2', 'avx', 'sse4_2')
# /proc/cpuinfo flags of the bfloat16 instructions oneDNN computes with.
BF16_FLAGS = ('avx512_bf16', 'amx_bf16')
# oneDNN's ISA cap (https://uxlfoundation.github.io/oneDNN/dev_guide_cpu_dispatcher_control.html:
# ONEDNN_MAX_CPU_ISA, DNNL_MAX_CPU_ISA before v3) and its values up to the first with bfloat16
# arithmetic, narrowest first; the values after them (AMX's, ALL) allow all of these.
ONEDNN_ISA_VARIABLES = ('ONEDNN_MAX_CPU_ISA', 'DNNL_MAX_CPU_ISA')
ONEDNN_ISAS = ('SSE41', 'AVX', 'AVX2', 'AVX2_VNNI', 'AVX2_VNNI_2', 'AVX512_CORE',
               'AVX512_CORE_VNNI', 'AVX512_CORE_BF16')


@dataclasses.dataclass(frozen=True)
class CpuInfo:
  """One host's CPU.

  Attributes:
    model: the model name ('AMD EPYC 7B13'), or the platform's processor string.
    vendor: 'GenuineIntel', 'AuthenticAMD', ... or None.
    machine: platform.machine() ('x86_64', 'aarch64').
    flags: the CPU feature flags Linux reports (empty elsewhere).
    logical_cpus: CPUs this process may run on (its affinity mask), >= 1.
    physical_cores: distinct cores among them (SMT siblings counted once), >= 1.
    onednn_max_isa: the process's cap on oneDNN's ISA (ONEDNN_MAX_CPU_ISA, upper case), or None.
    family, model_number: the x86 CPU family and model numbers (/proc/cpuinfo's 'cpu family'
      and 'model': 25 and 17 for a Zen 4 EPYC), or None.
    mhz: the clock Linux reports ('cpu MHz'; in a VM usually the base clock), or None.
  """
  model: Optional[str]
  vendor: Optional[str]
  machine: str
  flags: FrozenSet[str]
  logical_cpus: int
  physical_cores: int
  onednn_max_isa: Optional[str] = None
  family: Optional[int] = None
  model_number: Optional[int] = None
  mhz: Optional[float] = None

  @property
  def isa(self):
    """The widest vector ISA the CPU offers, one of ISA_ORDER, or 'unknown'."""
    for isa in ISA_ORDER:
      if (AVX512_CORE <= self.flags if isa == 'avx512' else isa in self.flags):
        return isa
    return 'unknown'

  @property
  def has_bfloat16_instructions(self):
    """Whether the CPU has bfloat16 instructions oneDNN uses (AVX512_BF16: AMD Zen 4 and
    later, Intel Cooper Lake; AMX-BF16: Intel Sapphire Rapids and later)."""
    return any(flag in self.flags for flag in BF16_FLAGS)

  def onednn_allows(self, isa):
    """Whether `onednn_max_isa` lets oneDNN use `isa` (one of ONEDNN_ISAS)."""
    cap = self.onednn_max_isa
    return cap not in ONEDNN_ISAS or ONEDNN_ISAS.index(cap) >= ONEDNN_ISAS.index(isa)

  @property
  def computes_bfloat16(self):
    """`has_bfloat16_instructions`, and oneDNN not capped below them (`onednn_max_isa`)."""
    return self.has_bfloat16_instructions and self.onednn_allows('AVX512_CORE_BF16')

  @property
  def smt(self):
    """True when some usable logical CPUs are hyperthread siblings of others."""
    return self.physical_cores < self.logical_cpus

  def describe(self):
    """'AMD EPYC (avx512), 2 cores / 2 CPUs'."""
    return '%s (%s), %d core%s / %d CPU%s' % (
        self.model or self.machine, self.isa, self.physical_cores,
        '' if self.physical_cores == 1 else 's', self.logical_cpus,
        '' if self.logical_cpus == 1 else 's')


def parse_cpuinfo(text):
  """(model name, vendor_id, flags) of the first processor in a /proc/cpuinfo text."""
  model = vendor = None
  flags = frozenset()
  for line in text.splitlines():
    key, _, value = line.partition(':')
    key = key.strip()
    if key == 'model name' and model is None:
      model = value.strip()
    elif key == 'vendor_id' and vendor is None:
      vendor = value.strip()
    elif key == 'flags' and not flags:
      flags = frozenset(value.split())
  return model, vendor, flags


def parse_cpu_numbers(text):
  """(cpu family, model, cpu MHz) of the first processor in a /proc/cpuinfo text, each None where
  absent or not a number."""
  found = {}
  for line in text.splitlines():
    key, _, value = line.partition(':')
    key = key.strip()
    if key in ('cpu family', 'model', 'cpu MHz') and key not in found:
      try:
        found[key] = float(value) if key == 'cpu MHz' else int(value)
      except ValueError:
        found[key] = None
  return found.get('cpu family'), found.get('model'), found.get('cpu MHz')


def _read(path):
  try:
    with open(path) as f:
      return f.read()
  except OSError:
    return None


def count_physical_cores(cpus, sys_root='/sys/devices/system/cpu'):
  """Distinct (package, core) pairs among logical `cpus`; len(cpus) where topology is unknown."""
  cores = set()
  for cpu in cpus:
    topology = os.path.join(sys_root, 'cpu%d' % cpu, 'topology')
    core = _read(os.path.join(topology, 'core_id'))
    package = _read(os.path.join(topology, 'physical_package_id'))
    if core is None:
      return len(cpus)
    cores.add(((package or '0').strip(), core.strip()))
  return max(1, len(cores))


def cgroup_cpu_limit(cgroup_root='/sys/fs/cgroup'):
  """CPUs' worth of time this container may use (a `docker run --cpus=2` gives 2.0), or None.

  cgroup v2's cpu.max ("QUOTA PERIOD" or "max PERIOD"), else cgroup v1's cpu.cfs_quota_us and
  cpu.cfs_period_us (quota -1: no limit).
  """
  v2 = _read(os.path.join(cgroup_root, 'cpu.max'))
  if v2:
    quota, _, period = v2.strip().partition(' ')
    if quota != 'max' and quota.isdigit() and period.strip().isdigit():
      return int(quota) / float(period)
    return None
  quota = _read(os.path.join(cgroup_root, 'cpu', 'cpu.cfs_quota_us'))
  period = _read(os.path.join(cgroup_root, 'cpu', 'cpu.cfs_period_us'))
  if quota and period and quota.strip().isdigit() and period.strip().isdigit():
    return int(quota) / float(period)
  return None


def onednn_max_isa(environ=None):
  """The cap on oneDNN's ISA that `environ` (default os.environ) sets (ONEDNN_MAX_CPU_ISA, or
  DNNL_MAX_CPU_ISA where that is unset), upper case, or None."""
  environ = os.environ if environ is None else environ
  for name in ONEDNN_ISA_VARIABLES:
    if environ.get(name, '').strip():
      return environ[name].strip().upper()
  return None


def read_cpu():
  """The `CpuInfo` of this machine as this process may use it: its CPU affinity, capped by a
  container's CPU quota (rounded up: a quota of 1.5 CPUs keeps 2 threads busy part time), and
  oneDNN's ISA cap from the environment."""
  text = _read('/proc/cpuinfo') or ''
  model, vendor, flags = parse_cpuinfo(text)
  family, model_number, mhz = parse_cpu_numbers(text)
  if hasattr(os, 'sched_getaffinity'):
    cpus = sorted(os.sched_getaffinity(0))
  else:
    cpus = list(range(os.cpu_count() or 1))
  logical, physical = max(1, len(cpus)), count_physical_cores(cpus)
  limit = cgroup_cpu_limit()
  if limit:
    logical = max(1, min(logical, math.ceil(limit)))
    physical = min(physical, logical)
  return CpuInfo(model=model or platform.processor() or None, vendor=vendor,
                 machine=platform.machine(), flags=flags, logical_cpus=logical,
                 physical_cores=physical, onednn_max_isa=onednn_max_isa(), family=family,
                 model_number=model_number, mhz=mhz)
