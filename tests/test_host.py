"""The host settings (trainer/host): the CPU as Linux describes it, the thread and library
settings chosen for it, and make train's runtime choice. Pure Python, no TensorFlow."""

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from trainer.host import cpu as cpu_lib
from trainer.host import cpu_peak
from trainer.host import runtime_probe
from trainer.host import threads

from helpers import REPO

# /proc/cpuinfo's first lines on the two host kinds this project met (flags shortened).
ZEN3_CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7B13
flags\t\t: fpu sse sse2 ssse3 sse4_1 sse4_2 avx f16c fma bmi1 avx2 bmi2 sha_ni
"""
AVX512_CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) CPU @ 2.20GHz
flags\t\t: sse4_2 avx fma avx2 avx512f avx512dq avx512cd avx512bw avx512vl
"""


def _cpu(cpuinfo=ZEN3_CPUINFO, cores=2, cpus=2, machine='x86_64'):
  model, vendor, flags = cpu_lib.parse_cpuinfo(cpuinfo)
  return cpu_lib.CpuInfo(model=model, vendor=vendor, machine=machine, flags=flags,
                         logical_cpus=cpus, physical_cores=cores)


def test_the_vector_isa_is_read_from_the_cpu_flags():
  assert _cpu(ZEN3_CPUINFO).isa == 'avx2'
  assert _cpu(ZEN3_CPUINFO).model == 'AMD EPYC 7B13'
  assert _cpu(AVX512_CPUINFO).isa == 'avx512'
  # AVX-512 foundation without BW/DQ/VL (Xeon Phi) is not what oneDNN's AVX-512 kernels need.
  assert _cpu(ZEN3_CPUINFO.replace('sha_ni', 'avx512f')).isa == 'avx2'
  assert _cpu('').isa == 'unknown'


def _numbered(cpuinfo, family, model, mhz, cores=2):
  """_cpu(cpuinfo) with the family, model and clock lines Linux prints."""
  text = cpuinfo + 'cpu family\t: %d\nmodel\t\t: %d\ncpu MHz\t\t: %s\n' % (family, model, mhz)
  model_name, vendor, flags = cpu_lib.parse_cpuinfo(text)
  family, number, clock = cpu_lib.parse_cpu_numbers(text)
  return cpu_lib.CpuInfo(model=model_name, vendor=vendor, machine='x86_64', flags=flags,
                         logical_cpus=cores, physical_cores=cores, family=family,
                         model_number=number, mhz=clock)


def test_the_peak_is_cores_times_clock_times_the_vector_units_flops_a_cycle():
  zen3 = _numbered(ZEN3_CPUINFO, 25, 1, '2450.000')  # EPYC 7B13 (Milan)
  assert cpu_peak.peak_flops(zen3).flops_per_sec == pytest.approx(2 * 2.45e9 * 32)
  assert cpu_peak.peak_flops(zen3, 'bfloat16') is None  # no bfloat16 instructions
  zen4 = dataclasses.replace(zen3, model_number=17, mhz=2600.0,  # EPYC 9004 (Genoa)
                             flags=zen3.flags | cpu_lib.AVX512_CORE | {'avx512_bf16'})
  assert cpu_peak.fp32_flops_per_cycle(zen4) == (32, 'Zen 4')  # AVX-512 on 256-bit pipes
  assert cpu_peak.peak_flops(zen4, 'bfloat16').flops_per_sec == pytest.approx(2 * 2.6e9 * 64)
  zen5 = dataclasses.replace(zen4, family=26, model_number=2)  # EPYC 9005 (Turin)
  peak = cpu_peak.peak_flops(zen5)
  assert peak.flops_per_sec == pytest.approx(2 * 2.6e9 * 64)
  assert peak.basis == ('2 cores x 2.60 GHz (as Linux reports it) x 64 fp32 FLOPs a cycle '
                        '(Zen 5)')
  # The vectors oneDNN may use bound it: AVX-512 hidden (a VM) or oneDNN held to AVX2.
  assert cpu_peak.fp32_flops_per_cycle(dataclasses.replace(zen5, flags=zen3.flags))[0] == 32
  capped = dataclasses.replace(zen5, onednn_max_isa='AVX2')
  assert cpu_peak.fp32_flops_per_cycle(capped)[0] == 32
  assert cpu_peak.peak_flops(capped, 'bfloat16') is None
  # A model outside the table (Zen 5's mobile parts keep 256-bit pipes; family 0x19's models
  # between Zen 4's ranges), an unknown clock: no figure rather than a guess.
  for other in (dataclasses.replace(zen5, model_number=0x24),
                dataclasses.replace(zen3, model_number=0x80), dataclasses.replace(zen5, mhz=None)):
    assert cpu_peak.peak_flops(other) is None, other
  xeon = _numbered(AVX512_CPUINFO, 6, 85, '2200.000', cores=4)
  assert cpu_peak.peak_flops(xeon).flops_per_sec == pytest.approx(4 * 2.2e9 * 64)
  amx = dataclasses.replace(xeon, flags=xeon.flags | {'amx_bf16'})
  assert cpu_peak.peak_flops(amx, 'bfloat16').flops_per_sec == pytest.approx(4 * 2.2e9 * 1024)
  held = dataclasses.replace(amx, onednn_max_isa='AVX512_CORE_BF16')  # bfloat16, not AMX
  assert cpu_peak.peak_flops(held, 'bfloat16').flops_per_sec == pytest.approx(4 * 2.2e9 * 128)


def test_hyperthread_siblings_count_as_one_physical_core(tmp_path):
  # Four logical CPUs: 0 and 1 share core 0, 2 and 3 share core 1.
  for cpu, core in ((0, 0), (1, 0), (2, 1), (3, 1)):
    topology = tmp_path / ('cpu%d' % cpu) / 'topology'
    topology.mkdir(parents=True)
    (topology / 'core_id').write_text('%d\n' % core)
    (topology / 'physical_package_id').write_text('0\n')
  assert cpu_lib.count_physical_cores([0, 1, 2, 3], str(tmp_path)) == 2
  assert cpu_lib.count_physical_cores([0, 2], str(tmp_path)) == 2
  assert cpu_lib.count_physical_cores([0, 1], str(tmp_path)) == 1
  # No topology files (not Linux, or a container hiding them): every logical CPU counts.
  assert cpu_lib.count_physical_cores([0, 1, 2], str(tmp_path / 'absent')) == 3


def test_a_small_host_runs_one_op_at_a_time_on_every_physical_core():
  settings = threads.choose(_cpu(cores=2, cpus=4), environ={})
  assert (settings.intra_op, settings.inter_op) == (2, 1)
  env = dict(settings.env)
  assert env['OMP_NUM_THREADS'] == '2' and env['KMP_BLOCKTIME'] == '1'
  assert any('hyperthread' in reason for reason in settings.reasons)
  assert threads.choose(_cpu(cores=16, cpus=16), environ={}).inter_op == 2


def test_onednn_is_forced_on_for_avx2_and_avx512_x86_cpus_only():
  assert dict(threads.choose(_cpu(ZEN3_CPUINFO), environ={}).env)['TF_ENABLE_ONEDNN_OPTS'] == '1'
  assert dict(threads.choose(_cpu(AVX512_CPUINFO), environ={}).env)[
      'TF_ENABLE_ONEDNN_OPTS'] == '1'
  assert 'TF_ENABLE_ONEDNN_OPTS' not in dict(
      threads.choose(_cpu('', machine='aarch64'), environ={}).env)


def test_the_users_environment_wins():
  environ = {'TF_NUM_INTRAOP_THREADS': '3', 'TF_NUM_INTEROP_THREADS': '2', 'KMP_BLOCKTIME': '0'}
  settings = threads.choose(_cpu(cores=2), environ=environ)
  assert (settings.intra_op, settings.inter_op) == (3, 2)
  applied = threads.apply_process_env(settings, environ)
  assert ('KMP_BLOCKTIME', '0', 'user') in applied
  assert ('OMP_NUM_THREADS', '3', 'set') in applied
  assert environ['KMP_BLOCKTIME'] == '0' and environ['OMP_NUM_THREADS'] == '3'


def test_the_settings_are_in_the_environment_before_tensorflow_loads():
  """Importing the trainer package sets them, without TensorFlow, and a value given wins."""
  env = dict(os.environ, KMP_BLOCKTIME='0')
  for name in ('OMP_NUM_THREADS', 'TF_ENABLE_ONEDNN_OPTS'):
    env.pop(name, None)
  code = ('import os, sys, trainer; assert "tensorflow" not in sys.modules; '
          'print(os.environ["KMP_BLOCKTIME"], os.environ["OMP_NUM_THREADS"])')
  out = subprocess.run([sys.executable, '-c', code], cwd=REPO, env=env, check=True,
                       stdout=subprocess.PIPE, universal_newlines=True).stdout.split()
  _, settings, _ = threads.current()
  assert out == ['0', str(settings.intra_op)]


def test_the_runtime_probe_keeps_intel_tensorflow_unless_another_is_clearly_faster():
  assert runtime_probe.choose({'tf1-mkl': 100.0, 'tf2': 104.0})[0] == 'tf1-mkl'
  assert runtime_probe.choose({'tf1-mkl': 100.0, 'tf2': 130.0})[0] == 'tf2'
  assert runtime_probe.choose({'tf1-mkl': 120.0, 'tf2': 100.0})[0] == 'tf1-mkl'
  assert runtime_probe.choose({'tf1-mkl': None, 'tf2': 80.0})[0] == 'tf2'
  with pytest.raises(ValueError):
    runtime_probe.choose({'tf1-mkl': None, 'tf2': None})


def test_bfloat16_is_a_candidate_only_on_a_cpu_that_computes_it():
  def cpu(*flags):
    return cpu_lib.CpuInfo(model='x', vendor=None, machine='x86_64', flags=frozenset(flags),
                           logical_cpus=2, physical_cores=2)
  assert runtime_probe.candidates(cpu('avx2', 'avx512f')) == ['tf1-mkl', 'tf2']
  for flag in ('avx512_bf16', 'amx_bf16'):
    assert runtime_probe.candidates(cpu('avx512f', flag)) == ['tf1-mkl', 'tf2', 'tf2-bf16']
  assert runtime_probe.CANDIDATES['tf2-bf16'][1] == 'RUNTIME=tf2 PRECISION=bfloat16'
  assert runtime_probe.choose({'tf1-mkl': 100.0, 'tf2': 104.0, 'tf2-bf16': 118.0})[0] == 'tf2-bf16'


def test_a_cached_choice_for_this_cpu_is_used_without_measuring(tmp_path):
  cache = tmp_path / 'runtime-choice.json'
  cache.write_text(json.dumps({'cpu': runtime_probe.cpu_key(cpu_lib.read_cpu()),
                               'runtime': 'tf2'}))
  proc = subprocess.run([sys.executable, '-m', 'trainer.host.runtime_probe',
                         '--cache=%s' % cache], cwd=str(tmp_path), env=dict(
                             os.environ, PYTHONPATH=REPO), stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
  assert proc.returncode == 0, proc.stderr
  assert proc.stdout.strip() == 'RUNTIME=tf2'
  assert 'measured on this CPU before' in proc.stderr
  # Nothing was measured: no probe records next to the cache.
  assert not (tmp_path / 'runtime-probe').exists()


def test_a_containers_cpu_quota_caps_the_cpus(tmp_path):
  v2 = tmp_path / 'v2'
  v2.mkdir()
  (v2 / 'cpu.max').write_text('150000 100000\n')  # docker run --cpus=1.5
  assert cpu_lib.cgroup_cpu_limit(str(v2)) == 1.5
  (v2 / 'cpu.max').write_text('max 100000\n')
  assert cpu_lib.cgroup_cpu_limit(str(v2)) is None
  v1 = tmp_path / 'v1' / 'cpu'
  v1.mkdir(parents=True)
  (v1 / 'cpu.cfs_quota_us').write_text('200000\n')
  (v1 / 'cpu.cfs_period_us').write_text('100000\n')
  assert cpu_lib.cgroup_cpu_limit(str(tmp_path / 'v1')) == 2.0
  (v1 / 'cpu.cfs_quota_us').write_text('-1\n')
  assert cpu_lib.cgroup_cpu_limit(str(tmp_path / 'v1')) is None
  assert cpu_lib.cgroup_cpu_limit(str(tmp_path / 'absent')) is None
