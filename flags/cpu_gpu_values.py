"""The flag values only a CPU/GPU run reads, parsed and checked for `to_config`: the
MirroredStrategy devices (--num_gpus, --mirrored_devices) and the steps to trace
(--profile_steps). `f` is the flag values read as attributes (see to_config)."""

import re

import tensorflow.compat.v1 as tf

from trainer.errors import PipelineError


def mirrored_devices_of(f):
  """The MirroredStrategy devices of --num_gpus or --mirrored_devices, () for neither.

  Raises:
    PipelineError: both given, with --use_tpu, a malformed device, more GPUs than TensorFlow
      sees, or a --train_batch_size the replicas cannot share evenly.
  """
  if f.num_gpus and f.mirrored_devices:
    raise PipelineError('--num_gpus and --mirrored_devices both choose the MirroredStrategy '
                        'devices: pass one.')
  devices = tuple(d.strip().lower() for d in f.mirrored_devices or ())
  devices = devices or tuple('/gpu:%d' % i for i in range(f.num_gpus))
  if not devices:
    return ()
  flag = '--mirrored_devices' if f.mirrored_devices else '--num_gpus'
  if f.use_tpu:
    raise PipelineError('%s is for CPU/GPU training; a Cloud TPU shards over its cores '
                        '(--num_cores). Drop one of %s and --use_tpu.' % (flag, flag))
  bad = [d for d in devices if not re.match(r'^/(cpu|gpu):\d+$', d)]
  if bad or len(set(devices)) != len(devices):
    raise PipelineError('--mirrored_devices=%s: give distinct devices like /gpu:0,/gpu:1.'
                        % ','.join(f.mirrored_devices))
  gpus = [int(d.split(':')[1]) for d in devices if d.startswith('/gpu:')]
  if gpus:
    visible = len(tf.config.experimental.list_physical_devices('GPU'))
    if max(gpus) >= visible:
      raise PipelineError(
          '%s asks for GPU %d but TensorFlow sees %d GPU(s) here. Check CUDA_VISIBLE_DEVICES, '
          'the NVIDIA driver and `nvidia-smi`; drop %s to train on the CPU.'
          % (flag, max(gpus), visible, flag))
  if f.train_batch_size % len(devices):
    raise PipelineError('--train_batch_size=%d is not divisible by the %d MirroredStrategy '
                        'replicas: each needs the same batch. Use a multiple of %d.'
                        % (f.train_batch_size, len(devices), len(devices)))
  return devices


def profile_steps_of(f):
  """(start, end) of --profile_steps, () when not given.

  Raises:
    PipelineError: not two integers 0 <= START < END, more than 20 steps, or with --use_tpu.
  """
  if not f.profile_steps:
    return ()
  try:
    start, end = (int(v) for v in f.profile_steps)
  except ValueError:
    start = end = -1
  if not 0 <= start < end:
    raise PipelineError('--profile_steps=%s: give START,END with 0 <= START < END, e.g. 10,13 '
                        '(traces global steps 10, 11 and 12).' % ','.join(f.profile_steps))
  if end - start > 20:
    raise PipelineError('--profile_steps=%s traces %d steps; a full trace is large and slows its '
                        'step down: trace at most 20.' % (','.join(f.profile_steps), end - start))
  if f.use_tpu:
    raise PipelineError('--profile_steps traces the host session only; on a Cloud TPU capture '
                        'a profile with the Cloud TPU profiler (capture_tpu_profile) instead.')
  return (start, end)
