"""The checks of `trainer.main`'s flag values and environment that need no data: every numeric
flag against one rule table (`flags.value_rules.FLAG_RULES`), TF_CONFIG and CLUSTER_SPEC
(`trainer.cloud.cluster_env`), and every output directory
(`trainer.run.config_sources.check_output_dirs`). Called by `flags.to_config.config_from_flags`
first, so a bad value is refused before any work, naming the flag and its value.
"""

from trainer.cloud import cluster_env
from trainer.flags.value_rules import check_ranges
from trainer.run import config_sources


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
  config_sources.check_output_dirs(f, environ)

