"""Which machine types, accelerators and counts a Vertex AI training job of this trainer may ask
for: trainer.submit's own check, run before anything is built, uploaded or sent.

The facts (what Vertex AI offers, each with its source page) are in vertex_machines.json beside
this file, which the loopback stand-in of the API reads too (tests/vertex_rules.py). This module
adds what the trainer's own images can run there: TensorFlow 2.15 (the last with tf.estimator)
on x86 hosts, GPUs through CUDA 12.2, TPUs through the stream-executor runtime.
"""

import json
import os
import re

from trainer.errors import PipelineError

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'vertex_machines.json')) as f:
  TABLE = json.load(f)

_TPU_VMS = TABLE['tpu_vms']
TPU_MACHINE_TYPE = _TPU_VMS['machine_type']
TPU_CORES = _TPU_VMS['single_host_cores']  # a single-host TPU v2-8 / v3-8 VM
TPUS = tuple(_TPU_VMS['accelerators'])
TPU_REGIONS = _TPU_VMS['regions']
# N1 machine type -> {GPU: the counts it takes}.
N1_GPU_COUNTS = {machine: {gpu: tuple(counts) for gpu, counts in row.items()
                           if gpu != 'machine_types'}
                 for row in TABLE['n1_gpu_counts']['rows'] for machine in row['machine_types']}
N1_GPUS = tuple(sorted({gpu for counts in N1_GPU_COUNTS.values() for gpu in counts}))
# Accelerator-optimized machine type -> (its GPU, its count). Such a machine has its GPUs whatever
# the request says, so a pool of one (the parameter servers too) names them.
FIXED_GPU_MACHINES = {m: tuple(v) for m, v in TABLE['fixed_gpu_machines']['machines'].items()}
GPUS = tuple(sorted(set(N1_GPUS) | {g for g, _ in FIXED_GPU_MACHINES.values()}))
_HOPPER = TABLE['gpu_generations']['hopper']
BLACKWELL = tuple(TABLE['gpu_generations']['blackwell'])
_NO_TPUESTIMATOR = TABLE['tpus_without_tpuestimator']
TABLE_READ = TABLE['about'].rsplit('Read ', 1)[-1].rstrip('.')  # 'YYYY-MM-DD', when it was read
MACHINE_TYPE = re.compile(
    r'^(?:(?P<family>n1|n2|n2d|n4|e2|c2|m1|a2|a3|a4|a4x|g2|g4)-(?:standard|highmem|highcpu|'
    r'highgpu|megagpu|ultragpu|ultramem|megamem)-\d+g?|cloud-tpu)$')
# TPU machine types of generations TPUEstimator cannot use (TABLE's tpus_without_tpuestimator).
_NEWER_TPU_MACHINE = re.compile(r'^(?P<kind>ct5lp|ct5p|ct6e|tpu7x)-[a-z]+-\d+t$')
_KEYS_OF_TPU_MACHINE = {'ct5lp': 'TPU_V5_LITEPOD', 'ct5p': 'ct5p', 'ct6e': 'ct6e', 'tpu7x': 'tpu7x'}
_NEWER_TPU_ACCELERATORS = ('TPU_V5_LITEPOD', 'TPU_V4_POD')  # AcceleratorType names
KERAS_ROAD = ('see the Keras road, trainer.train_keras on JAX (docs/migration.md; not run on '
              'them here)')


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


def _owners(accelerator):
  return sorted(m for m, (g, _) in FIXED_GPU_MACHINES.items() if g == accelerator)


def _refuse_for_the_image(machine, accelerator):
  """GPUs Vertex AI offers that the trainer's gpu image (TensorFlow 2.15, CUDA 12.2) cannot use."""
  if machine in TABLE['arm_machines']['machines']:
    raise PipelineError(
        '--machine_type=%s has Arm CPUs: Vertex AI runs only images built for Arm there (%s), and '
        'TensorFlow 2.15 has no Arm GPU build; use a3-ultragpu-8g (H200) or a3-megagpu-8g '
        '(H100), or %s.' % (machine, TABLE['sources']['arm_hosts'].split(' ')[0], KERAS_ROAD))
  if accelerator in BLACKWELL:
    raise PipelineError(
        '--accelerator_type=%s is a Blackwell GPU: TensorFlow 2.15, the last TensorFlow with '
        'tf.estimator, is built with CUDA 12.2 and cuDNN 8.9, and native Blackwell kernels need '
        'CUDA 12.8 or later (NVIDIA\'s Blackwell compatibility guide); it could at best '
        'JIT-compile its PTX there, which nobody has run. Use a3-ultragpu-8g (H200) or '
        'a3-megagpu-8g (H100), or %s.' % (accelerator, KERAS_ROAD))


def _check_gpu(machine, accelerator, count, warnings):
  if machine in FIXED_GPU_MACHINES:
    gpu, fixed = FIXED_GPU_MACHINES[machine]
    if accelerator != gpu or count != fixed:
      raise PipelineError(
          '--machine_type=%s comes with %d x %s: pass --accelerator_type=%s --accelerator_count=%d '
          '(Vertex AI "Configure compute resources").' % (machine, fixed, gpu, gpu, fixed))
  elif family(machine) != 'n1':
    owners = _owners(accelerator)
    raise PipelineError('--accelerator_type=%s does not attach to --machine_type=%s: %s.' % (
        accelerator, machine, 'it comes with ' + ', '.join(owners) if owners else
        'GPUs attach to n1- machine types or come with a2-, a3-, a4-, a4x-, g2- and g4- ones'))
  elif accelerator not in N1_GPUS:
    raise PipelineError('--accelerator_type=%s does not attach to an N1 machine: it comes with %s '
                        '(Vertex AI "Configure compute resources").'
                        % (accelerator, ', '.join(_owners(accelerator))))
  else:
    _check_n1_count(machine, accelerator, count)
  _refuse_for_the_image(machine, accelerator)
  if accelerator in _HOPPER:
    warnings.append(
        '%s (compute capability 9.0): TensorFlow 2.15\'s wheels carry no kernels for it, so each '
        'new replica first JIT-compiles their PTX, which "could take 30 minutes or longer" '
        '(tensorflow/tensorflow#62320); the job pays for that time.' % accelerator)


def _check_n1_count(machine, accelerator, count):
  takes = N1_GPU_COUNTS.get(machine)
  if takes is None:
    raise PipelineError('--machine_type=%s takes no GPU on Vertex AI: GPUs attach to %s.' % (
        machine, ', '.join(sorted(N1_GPU_COUNTS))))
  counts = takes.get(accelerator, ())
  if count in counts:
    return
  fits = sorted(m for m, t in N1_GPU_COUNTS.items() if count in t.get(accelerator, ()))
  raise PipelineError(
      '--accelerator_count=%d x %s on --machine_type=%s: that machine takes %s of them (Vertex AI '
      '"Configure compute resources", N1 table); %s.' % (
          count, accelerator, machine, ', '.join(map(str, counts)) or 'none',
          '%d fit %s' % (count, ', '.join(fits)) if fits else
          'no N1 machine takes %d' % count))


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


def _refuse_newer_tpu(machine, accelerator):
  """TPU generations Vertex AI offers on which TPUEstimator cannot run, with the reason."""
  match = _NEWER_TPU_MACHINE.match(machine)
  key = _KEYS_OF_TPU_MACHINE[match.group('kind')] if match else (
      accelerator if accelerator in _NEWER_TPU_ACCELERATORS else None)
  if key:
    raise PipelineError('%s cannot run this trainer: %s. TPUEstimator runs on TPU v2 and v3 '
                        '(--machine_type=cloud-tpu --accelerator_type=TPU_V3); for newer TPUs %s.'
                        % ('--machine_type=' + machine if match else
                           '--accelerator_type=' + accelerator, _NO_TPUESTIMATOR[key],
                           KERAS_ROAD))


def check(job, warnings):
  """Checks the machine type, accelerator and count of `job` (a vertex_job.JobRequest); appends
  what it cannot check, or what costs time, to `warnings`.

  Raises:
    PipelineError: a pair or count the service refuses, or one it offers that the trainer's image
      cannot use, with the reason and what to pass instead.
  """
  machine, accelerator, count = job.machine_type, job.accelerator_type, job.accelerator_count
  _refuse_newer_tpu(machine, accelerator)
  unlisted = not MACHINE_TYPE.match(machine)
  if unlisted and job.allow_unlisted_machine:  # a family newer than the table: the service decides
    warnings.append('--machine_type=%s is not in this pipeline\'s table of Vertex AI machines '
                    '(trainer/cloud/vertex_machines.json, read %s): its pairing with an '
                    'accelerator is not checked (--allow_unlisted_machine); Vertex AI refuses it '
                    'at create if it does not offer it for training.' % (machine, TABLE_READ))
  elif unlisted:
    raise PipelineError('unknown --machine_type=%s: a Vertex AI training machine type such as '
                        'n1-standard-8, a2-highgpu-1g, g2-standard-8, a3-megagpu-8g, or cloud-tpu '
                        '(https://cloud.google.com/vertex-ai/docs/training/configure-compute). One '
                        'newer than this pipeline\'s table (read %s): --allow_unlisted_machine '
                        'sends it unchecked.' % (machine, TABLE_READ))
  if machine == TPU_MACHINE_TYPE and accelerator not in TPUS:
    raise PipelineError('--machine_type=cloud-tpu needs --accelerator_type=TPU_V2 or TPU_V3.')
  if accelerator is None:
    if count:
      raise PipelineError('--accelerator_count=%d needs --accelerator_type.' % count)
    if machine in FIXED_GPU_MACHINES:
      gpu, fixed = FIXED_GPU_MACHINES[machine]
      _refuse_for_the_image(machine, gpu)  # before advising a GPU that is refused next
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
  if unlisted:
    _refuse_for_the_image(machine, accelerator)
  else:
    _check_gpu(machine, accelerator, count, warnings)
  warnings.append('whether --region=%s offers %s for training is not checked here: see '
                  'https://cloud.google.com/vertex-ai/docs/general/locations#accelerators.'
                  % (job.region, accelerator))
