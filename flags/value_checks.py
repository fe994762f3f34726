"""The checks of `trainer.main`'s flag values and environment that need no data: every numeric
flag against one rule table (`flags.value_rules.FLAG_RULES`), TF_CONFIG and CLUSTER_SPEC
(`trainer.cloud.cluster_env`), and every output directory (`trainer.storage.outputs`). Called by
`flags.to_config.config_from_flags` first, so a bad value is refused before any work, naming the
flag and its value.
"""

import os

from trainer.cloud import cluster_env
from trainer.cloud import vertex_env
from trainer.flags.value_rules import check_ranges
from trainer.storage import outputs

# Output directories named by flags, and those a Vertex AI job names by variable
# (trainer/cloud/vertex_env.py).
OUTPUT_DIR_FLAGS = ('model_dir', 'job_dir', 'export_dir')
OUTPUT_DIR_VARIABLES = (vertex_env.CHECKPOINT_DIR_ENV, vertex_env.MODEL_DIR_ENV,
                        vertex_env.TENSORBOARD_DIR_ENV)


def check(f, environ=None):
  """Refuses, before any work, a flag value outside its `FLAG_RULES` range, a malformed TF_CONFIG
  or CLUSTER_SPEC, or an output directory that cannot be created or written.

  Args:
    f: the flag values, read as attributes (`flags.to_config`'s namespace).
    environ: the environment (default os.environ).

  Raises:
    PipelineError: naming the flag (or variable), its value and what it must be.
  """
  check_ranges(f)
  cluster_env.tf_config(environ)
  cluster_env.cluster_spec(environ)
  check_output_dirs(f, environ)


def check_output_dirs(f, environ=None):
  """`outputs.check_directory_usable` on each output directory a flag or Vertex AI variable
  names.

  Raises:
    PipelineError: one is a file, under a file, or not writable.
  """
  environ = os.environ if environ is None else environ
  for name in OUTPUT_DIR_FLAGS:
    if getattr(f, name, None):
      outputs.check_directory_usable(getattr(f, name), '--' + name)
  for name in OUTPUT_DIR_VARIABLES:
    if environ.get(name):
      outputs.check_directory_usable(environ[name], '$' + name)
