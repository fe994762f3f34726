"""A simulated Cloud TPU slice: TPUEstimator learns a slice's shape from one function of
TensorFlow's TPU support (`tpu_system_metadata._query_tpu_system_metadata`, private); while
`simulated_slice` is active that function answers with the devices of the simulated slice, so
TPUEstimator builds its graphs exactly as on the slice. Nothing runs on a TPU.
"""

import contextlib

from tensorflow.python.client import session as session_lib
from tensorflow.python.tpu import tpu_system_metadata

# The simulated slice's master: never contacted (no session is created).
SIMULATED_MASTER = 'grpc://127.0.0.1:8470'


@contextlib.contextmanager
def simulated_slice(num_hosts, num_cores):
  """While active, TPUEstimator sees a slice of `num_hosts` hosts with `num_cores` TPU cores."""
  def metadata(master_address, cluster_def=None, query_topology=False):
    del master_address, cluster_def, query_topology
    device = session_lib._DeviceAttributes  # pylint: disable=protected-access
    devices = []
    for host in range(num_hosts):
      prefix = '/job:tpu_worker/replica:0/task:%d/device:' % host
      devices.append(device(prefix + 'CPU:0', 'CPU', 0, 0))
      for core in range(num_cores // num_hosts):
        devices.append(device(prefix + 'TPU:%d' % core, 'TPU', 0, 0))
    # TPUSystemMetadata since TF 2.x; _TPUSystemMetadata in TF 1.15.
    metadata_type = (getattr(tpu_system_metadata, 'TPUSystemMetadata', None) or
                     tpu_system_metadata._TPUSystemMetadata)  # pylint: disable=protected-access
    return metadata_type(num_cores=num_cores, num_hosts=num_hosts,
                         num_of_cores_per_host=num_cores // num_hosts, topology=None,
                         devices=tuple(devices))

  original = tpu_system_metadata._query_tpu_system_metadata  # pylint: disable=protected-access
  tpu_system_metadata._query_tpu_system_metadata = metadata  # pylint: disable=protected-access
  try:
    yield
  finally:
    tpu_system_metadata._query_tpu_system_metadata = original  # pylint: disable=protected-access
