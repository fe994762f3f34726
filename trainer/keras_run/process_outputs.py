"""What a process that is not the chief of a multi-process JAX run (--multi_host) does where the
chief writes the model: the same save, into a scratch file it deletes.

Saving a Keras model there is a collective: Keras moves each variable (replicated over the
devices of every process by DataParallel) to the host with jax.device_put, which checks that
every process passes the same value (jax.experimental.multihost_utils.assert_equal) and so
waits for all of them. A chief that saved alone would wait for the others forever, or, when they
reach another collective first, fail with "... is not the same on each process" (measured: 2
processes x 2 CPU devices, at the first checkpoint).
"""

import os
import shutil
import tempfile


def save_in_scratch(save, suffix):
  """Calls save(path) with a path in a scratch directory (its name ending in `suffix`, as Keras
  requires: '.keras', '.weights.h5'), then deletes it."""
  scratch = tempfile.mkdtemp(prefix='not-chief-')
  try:
    save(os.path.join(scratch, 'model' + suffix))
  finally:
    shutil.rmtree(scratch, ignore_errors=True)
