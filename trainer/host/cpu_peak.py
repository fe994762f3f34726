"""A CPU's peak floating-point rate for convolutions and matmuls, from its vector units: what
`trainer.benchmark model` sets a training step's FLOP rate against, so that the gap to the limit
is a figure.

peak = physical cores x the clock /proc/cpuinfo reports x FLOPs per cycle per core, where a
fused multiply-add counts 2 FLOPs and the FLOPs per cycle are the core's FMA pipes x their
fp32 lanes:
  - AMD Zen and Zen+ (family 0x17, models 0x00-0x2F): two 128-bit FMA pipes, 16; Zen 2 (0x17,
    models 0x30-0xAF) and Zen 3 (family 0x19, models 0x00-0x0F and 0x20-0x5F): two 256-bit
    pipes, 32 (AMD, Software Optimization Guides for the Zen 2 and Zen 3 microarchitectures,
    pub. 56305 and 56665).
  - Zen 4 (0x19, models 0x10-0x1F, 0x60-0x7F, 0xA0-0xAF): AVX-512 executed on the same two
    256-bit pipes, 32 (pub. 57647); Zen 5 server and desktop parts (family 0x1A, models
    0x00-0x1F EPYC 9005, 0x40-0x4F Ryzen 9000): a full 512-bit data path, 64 (pub. 58455).
  - Intel with AVX2 and FMA (Haswell and later): two 256-bit FMA units, 32; with AVX-512: two
    512-bit units, 64, assumed (Xeon Gold and Platinum, what cloud VMs run; Xeon Silver and
    Bronze and the client parts have one and reach half) (Intel 64 and IA-32 Architectures
    Optimization Reference Manual).
  - bfloat16: AVX512_BF16's VDPBF16PS does two multiply-adds per fp32 lane, twice the fp32 rate
    (Zen 4, Zen 5, Cooper Lake); AMX-BF16 (Sapphire Rapids and later) 1,024 per cycle per core
    (Intel, "Intel Advanced Matrix Extensions Overview").
The vectors oneDNN may use bound the table: a CPU (or VM) without AVX-512, or oneDNN held below
it (ONEDNN_MAX_CPU_ISA), reaches 32 at most; AMX counts only with oneDNN allowed to use it.

The clock is the one Linux reports: in a VM usually the base clock, so a core that boosts above
it can run faster than this peak. A CPU outside the table (other AMD models, other vendors, an
AVX-only CPU, an unknown clock) has no peak: None.
"""

import collections

from trainer.host import cpu as cpu_lib

Peak = collections.namedtuple('Peak', ['flops_per_sec', 'basis'])

_ZEN_MODELS = ((0x00, 0x2F),)
_ZEN2_MODELS = ((0x30, 0xAF),)
_ZEN3_MODELS = ((0x00, 0x0F), (0x20, 0x5F))
_ZEN4_MODELS = ((0x10, 0x1F), (0x60, 0x7F), (0xA0, 0xAF))
_ZEN5_512_BIT_MODELS = ((0x00, 0x1F), (0x40, 0x4F))
_AMX_BF16_FLOPS_PER_CYCLE = 1024
# oneDNN caps (ONEDNN_MAX_CPU_ISA) that allow AMX.
_CAPS_WITH_AMX = ('AMX', 'ALL')


def _in(model, ranges):
  return model is not None and any(low <= model <= high for low, high in ranges)


def _table_flops_per_cycle(cpu):
  """(fp32 FLOPs per cycle per core, the core's name) by vendor, family and model, or None."""
  if cpu.vendor == 'AuthenticAMD':
    for family, ranges, flops, core in ((0x17, _ZEN_MODELS, 16, 'Zen/Zen+'),
                                        (0x17, _ZEN2_MODELS, 32, 'Zen 2'),
                                        (0x19, _ZEN3_MODELS, 32, 'Zen 3'),
                                        (0x19, _ZEN4_MODELS, 32, 'Zen 4'),
                                        (0x1A, _ZEN5_512_BIT_MODELS, 64, 'Zen 5')):
      if cpu.family == family and _in(cpu.model_number, ranges):
        return flops, core
    return None
  if cpu.vendor == 'GenuineIntel' and 'fma' in cpu.flags:
    if cpu.isa == 'avx512':
      return 64, 'Intel, two AVX-512 FMA units assumed'
    if cpu.isa == 'avx2':
      return 32, 'Intel, two AVX2 FMA units'
  return None


def fp32_flops_per_cycle(cpu):
  """(fp32 FLOPs per cycle per core, the core's name) of `cpu` (a `cpu_lib.CpuInfo`) with the
  vectors oneDNN may use (its AVX-512 or AVX2 flags, ONEDNN_MAX_CPU_ISA), or None outside the
  module's table."""
  entry = _table_flops_per_cycle(cpu)
  if entry is None or cpu.isa not in ('avx512', 'avx2') or 'fma' not in cpu.flags:
    return None
  flops, core = entry
  if cpu.isa != 'avx512' or not cpu.onednn_allows('AVX512_CORE'):
    if not cpu.onednn_allows('AVX2'):
      return None
    return min(flops, 32), core
  return flops, core


def peak_flops(cpu, precision='float32'):
  """The peak rate of `cpu` in `precision` ('float32' or 'bfloat16'), or None where the table
  has no entry, the clock is unknown, or (bfloat16) oneDNN computes no bfloat16 there (emulated
  bfloat16 runs at the fp32 rate at best).

  Returns:
    Peak(flops_per_sec (float, FLOP/s), basis (str: the product spelled out)), or None.
  """
  per_core = fp32_flops_per_cycle(cpu)
  if per_core is None or not cpu.mhz:
    return None
  flops_per_cycle, core = per_core
  unit = 'fp32'
  if precision == 'bfloat16':
    if not cpu.computes_bfloat16:
      return None
    cap = cpu.onednn_max_isa or 'ALL'
    if 'amx_bf16' in cpu.flags and any(name in cap for name in _CAPS_WITH_AMX):
      flops_per_cycle, unit = _AMX_BF16_FLOPS_PER_CYCLE, 'bfloat16 (AMX)'
    else:
      flops_per_cycle, unit = 2 * flops_per_cycle, 'bfloat16 (AVX512_BF16)'
  rate = cpu.physical_cores * cpu.mhz * 1e6 * flops_per_cycle
  return Peak(rate, '%d core%s x %.2f GHz (as Linux reports it) x %d %s FLOPs a cycle (%s)' % (
      cpu.physical_cores, '' if cpu.physical_cores == 1 else 's', cpu.mhz / 1e3,
      flops_per_cycle, unit, core))


def host_peak(precision='float32'):
  """`peak_flops` of this machine's CPU as this process may use it."""
  return peak_flops(cpu_lib.read_cpu(), precision)
