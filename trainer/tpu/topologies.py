"""Cloud TPU accelerator types (`v3-32`, `v4-8`, `v5litepod-8`, ...): the hosts and the TPU devices
TPUEstimator sees on each, and whether TPUEstimator can run on the generation at all.

Sources: Google's TPU architecture pages (cloud.google.com/tpu/docs/v2, v3, v4, v5e, v5p, v6e:
chips per host, TensorCores per chip, what the number in the type counts) and supported
versions (cloud.google.com/tpu/docs/supported-versions: from TF 2.15 the TPU VM software is
`tpu-vm-tf-2.15.x-se` or `-pjrt`, and v5e, v5p and v6e take `-pjrt` only); TPUEstimator on PJRT
fails (tensorflow/tensorflow#90807: "No TPU platform registered", TF 2.15 on a v5p).
"""

import dataclasses
import re
from typing import Optional, Tuple

from trainer.errors import PipelineError

# The last TPU VM software with tf.estimator (removed in TF 2.16), per slice kind.
SE_SOFTWARE = 'tpu-vm-tf-2.15.1-se'
SE_POD_SOFTWARE = 'tpu-vm-tf-2.15.1-pod-se'
_GUIDE = 'docs/platforms.md'


@dataclasses.dataclass(frozen=True)
class Generation:
  """One TPU generation.

  Attributes:
    name: the accelerator-type prefix ('v3', 'v5litepod').
    label: what Google calls it ('v5e').
    name_counts_cores: the number in `v4-32` counts TensorCores (v2-v5p); else chips (v5e, v6e).
    cores_per_chip: TensorCores per chip.
    devices_per_chip: TPU devices TensorFlow sees per chip (1 on megacore chips: v4, v5p).
    chips_per_host: chips attached to one host of a multi-host slice.
    largest: the largest slice, in the unit of the type's number.
    tpu_node: can be created as a TPU Node (TF 1.15's only way to a TPU).
    refusal: why TPUEstimator cannot run on it (None: it can).
  """
  name: str
  label: str
  name_counts_cores: bool
  cores_per_chip: int
  devices_per_chip: int
  chips_per_host: int
  largest: int
  tpu_node: bool
  refusal: Optional[str] = None


_PJRT_ONLY = ('TPUEstimator needs the StreamExecutor TPU runtime and %s has the PJRT runtime only '
              '(tensorflow/tensorflow#90807: "No TPU platform registered", then a crash). Use a '
              'v2, v3 or v4 TPU VM with ' + SE_SOFTWARE + ' (' + SE_POD_SOFTWARE + ' for a '
              'slice of several hosts); see ' + _GUIDE + '.')

GENERATIONS = {g.name: g for g in (
    Generation('v2', 'v2', True, 2, 2, 4, 512, tpu_node=True),
    Generation('v3', 'v3', True, 2, 2, 4, 2048, tpu_node=True),
    Generation('v4', 'v4', True, 2, 1, 4, 8192, tpu_node=False),
    Generation('v5litepod', 'v5e', False, 1, 1, 4, 256, tpu_node=False,
               refusal=_PJRT_ONLY % 'v5e'),
    Generation('v5p', 'v5p', True, 2, 1, 4, 12288, tpu_node=False,
               refusal=_PJRT_ONLY % 'v5p'),
    Generation('v6e', 'v6e (Trillium)', False, 1, 1, 4, 256, tpu_node=False,
               refusal=_PJRT_ONLY % 'v6e (Trillium)'),
)}


def parse(accelerator_type):
  """(Generation, number) of an accelerator type such as 'v3-32' or 'v5litepod-8'.

  Raises:
    PipelineError: not `<generation>-<number>` of a known generation.
  """
  match = re.match(r'^(v\d+[a-z]*)-(\d+)$', accelerator_type or '')
  if not match or match.group(1) not in GENERATIONS:
    raise PipelineError(
        '%r is not a Cloud TPU accelerator type this pipeline knows: give <generation>-<size> '
        'with a generation among %s, e.g. v3-8, v4-32 or v5litepod-8.'
        % (accelerator_type, ', '.join(GENERATIONS)))
  return GENERATIONS[match.group(1)], int(match.group(2))


def slice_shape(accelerator_type) -> Tuple[int, int]:
  """(hosts, TPU devices TPUEstimator sees) of an accelerator type TPUEstimator can run on.

  A v2/v3 host has 4 chips of 2 cores (8 devices); a v4 host 4 megacore chips (4 devices), so
  v4-8 is one host with 4 devices and v4-32 four hosts with 16.

  Raises:
    PipelineError: an unknown type or size, or a generation TPUEstimator cannot run on (the
      refusal says why and what to use instead).
  """
  generation, number = parse(accelerator_type)
  if generation.refusal:
    raise PipelineError('%s: %s' % (accelerator_type, generation.refusal))
  unit_per_host = generation.chips_per_host * (
      generation.cores_per_chip if generation.name_counts_cores else 1)
  if number % unit_per_host or not 0 < number <= generation.largest:
    raise PipelineError('%s is not a %s slice: its size is a multiple of %d up to %d.'
                        % (accelerator_type, generation.label, unit_per_host, generation.largest))
  hosts = number // unit_per_host
  return hosts, hosts * generation.chips_per_host * generation.devices_per_chip

