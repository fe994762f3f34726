"""Which machine types, accelerators and counts a Vertex AI training job of this trainer may ask
for: trainer.submit's own check, run before anything is built, uploaded or sent.

Sources (each table cites its own):
  Compute Engine "GPU machine types" (https://cloud.google.com/compute/docs/gpus): N1 takes T4,
    P4, P100 (1, 2 or 4) and V100 (1, 2, 4 or 8) as attachments; A2, G2 and A3 machines come with
    their GPUs, a fixed number per machine type.
  Vertex AI "Configure compute resources for custom training"
    (https://cloud.google.com/vertex-ai/docs/training/configure-compute): machine types of custom
    training; a TPU VM is machineType cloud-tpu with TPU_V2 or TPU_V3 and acceleratorCount 8.
  Cloud TPU "TPU regions and zones" (https://cloud.google.com/tpu/docs/regions-zones): v2-8 in
    us-central1, europe-west4 and asia-east1; v3-8 in us-central1 and europe-west4.
"""

import re

from trainer.errors import PipelineError

TPU_MACHINE_TYPE = 'cloud-tpu'
TPU_CORES = 8  # a single-host TPU v2-8 / v3-8 VM
TPUS = ('TPU_V2', 'TPU_V3')
# GPUs attached to N1 machines, with the counts one machine takes.
N1_GPU_COUNTS = {
    'NVIDIA_TESLA_T4': (1, 2, 4),
    'NVIDIA_TESLA_P4': (1, 2, 4),
    'NVIDIA_TESLA_P100': (1, 2, 4),
    'NVIDIA_TESLA_V100': (1, 2, 4, 8),
}
# Accelerator-optimized machine types: machine type -> (its GPU, its count). Such a machine has
# its GPUs whatever the request says, so a pool of one (the parameter servers too) names them.
_G2_L4 = {4: 1, 8: 1, 12: 1, 16: 1, 32: 1, 24: 2, 48: 4, 96: 8}
FIXED_GPU_MACHINES = dict(
    [('a2-highgpu-%dg' % n, ('NVIDIA_TESLA_A100', n)) for n in (1, 2, 4, 8)] +
    [('a2-megagpu-16g', ('NVIDIA_TESLA_A100', 16))] +
    [('a2-ultragpu-%dg' % n, ('NVIDIA_A100_80GB', n)) for n in (1, 2, 4, 8)] +
    [('g2-standard-%d' % cpus, ('NVIDIA_L4', n)) for cpus, n in sorted(_G2_L4.items())] +
    [('a3-highgpu-8g', ('NVIDIA_H100_80GB', 8))])
GPUS = tuple(sorted(set(N1_GPU_COUNTS) | {g for g, _ in FIXED_GPU_MACHINES.values()}))
# Where a single-host TPU VM of each version is offered (Cloud TPU regions and zones). GPU
# availability per region is not tabled here: it is left to the service (a warning says so).
TPU_REGIONS = {
    'TPU_V2': ('us-central1', 'europe-west4', 'asia-east1'),
    'TPU_V3': ('us-central1', 'europe-west4'),
}
MACHINE_TYPE = re.compile(
    r'^(?:(?P<family>n1|n2|n2d|e2|c2|a2|a3|g2)-(?:standard|highmem|highcpu|highgpu|megagpu|'
    r'ultragpu)-\d+g?|cloud-tpu)$')


def family(machine_type):
  return machine_type.split('-', 1)[0]


def pool_accelerator(machine_type, accelerator_type, count, chief_or_worker=True):
  """The (type, count) a pool of `machine_type` asks for, or None: the parameter servers of an N1
  job go without the GPU; on an accelerator-optimized machine every pool names its fixed GPUs."""
  if machine_type in FIXED_GPU_MACHINES:
    return FIXED_GPU_MACHINES[machine_type]
  if accelerator_type and chief_or_worker:
    return accelerator_type, count
  return None


def _check_gpu(machine, accelerator, count):
  if machine in FIXED_GPU_MACHINES:
    gpu, fixed = FIXED_GPU_MACHINES[machine]
    if accelerator != gpu or count != fixed:
      raise PipelineError(
          '--machine_type=%s comes with %d x %s: pass --accelerator_type=%s --accelerator_count=%d '
          '(Compute Engine "GPU machine types").' % (machine, fixed, gpu, gpu, fixed))
    return
  if family(machine) != 'n1':
    owners = sorted(m for m, (g, _) in FIXED_GPU_MACHINES.items() if g == accelerator)
    raise PipelineError('--accelerator_type=%s does not attach to --machine_type=%s: %s.' % (
        accelerator, machine, 'it comes with ' + ', '.join(owners) if owners else
        'GPUs attach to n1- machine types or come with a2-, g2- and a3- ones'))
  if accelerator not in N1_GPU_COUNTS:
    owners = sorted(m for m, (g, _) in FIXED_GPU_MACHINES.items() if g == accelerator)
    raise PipelineError('--accelerator_type=%s does not attach to an N1 machine: it comes with %s '
                        '(Compute Engine "GPU machine types").' % (accelerator, ', '.join(owners)))
  if count not in N1_GPU_COUNTS[accelerator]:
    raise PipelineError('--accelerator_count=%d: an N1 machine takes %s x %s.' % (
        count, ', '.join(map(str, N1_GPU_COUNTS[accelerator])), accelerator))


def _check_tpu(job, warnings):
  if job.machine_type != TPU_MACHINE_TYPE:
    raise PipelineError('--accelerator_type=%s runs on --machine_type=cloud-tpu (a TPU VM), not '
                        '%s.' % (job.accelerator_type, job.machine_type))
  if job.accelerator_count != TPU_CORES:
    raise PipelineError('--accelerator_count=%d: a single-host %s VM has %d cores; pass '
                        '--accelerator_count=%d.' % (job.accelerator_count, job.accelerator_type,
                                                     TPU_CORES, TPU_CORES))
  if job.worker_count or job.ps_count:
    raise PipelineError('a TPU job is a single TPU VM: --worker_count and --ps_count must be 0 '
                        '(TPUEstimator spreads the work over the 8 cores itself).')
  regions = TPU_REGIONS[job.accelerator_type]
  if job.region not in regions:
    raise PipelineError('--accelerator_type=%s is not offered for training in --region=%s; it is '
                        'in %s (https://cloud.google.com/tpu/docs/regions-zones).'
                        % (job.accelerator_type, job.region, ', '.join(regions)))
  if not {'--use_tpu', '--tpu=local'} <= set(job.trainer_args):
    warnings.append('a %s job trains on its TPU only with `--use_tpu --tpu=local` after `--` '
                    '(the TPU of the TPU VM the trainer runs on); without them it trains on '
                    'the CPU or stops for want of a TPU name.' % job.accelerator_type)


def check(job, warnings):
  """Checks the machine type, accelerator and count of `job` (a vertex_job.JobRequest); appends
  what it cannot check to `warnings`.

  Raises:
    PipelineError: a pair or count the service refuses, with what to pass instead.
  """
  machine, accelerator, count = job.machine_type, job.accelerator_type, job.accelerator_count
  if not MACHINE_TYPE.match(machine):
    raise PipelineError('unknown --machine_type=%s: a Vertex AI training machine type such as '
                        'n1-standard-8, n1-highmem-16, a2-highgpu-1g, g2-standard-8, or cloud-tpu '
                        '(https://cloud.google.com/vertex-ai/docs/training/configure-compute).'
                        % machine)
  if machine == TPU_MACHINE_TYPE and accelerator not in TPUS:
    raise PipelineError('--machine_type=cloud-tpu needs --accelerator_type=TPU_V2 or TPU_V3.')
  if accelerator is None:
    if count:
      raise PipelineError('--accelerator_count=%d needs --accelerator_type.' % count)
    if machine in FIXED_GPU_MACHINES:
      gpu, fixed = FIXED_GPU_MACHINES[machine]
      raise PipelineError('--machine_type=%s comes with %d x %s: pass --accelerator_type=%s '
                          '--accelerator_count=%d, or a CPU machine type such as n1-standard-8.'
                          % (machine, fixed, gpu, gpu, fixed))
    return
  if accelerator not in GPUS + TPUS:
    raise PipelineError('unknown --accelerator_type=%s: one of %s.'
                        % (accelerator, ', '.join(GPUS + TPUS)))
  if accelerator in TPUS:
    _check_tpu(job, warnings)
    return
  _check_gpu(machine, accelerator, count)
  warnings.append('whether --region=%s offers %s for training is not checked here: see '
                  'https://cloud.google.com/vertex-ai/docs/general/locations#accelerators.'
                  % (job.region, accelerator))
