"""Flags of `python -m trainer.submit [flags] -- [trainer.main flags]`."""

from absl import flags

SCALE_TIERS = ('BASIC', 'STANDARD_1', 'PREMIUM_1', 'BASIC_GPU', 'BASIC_TPU', 'CUSTOM')


def define_submit_flags():
  """Defines the flags of `trainer.submit` (once per process)."""
  flags.DEFINE_string('job_name', None,
                      'AI Platform job name (letters, digits, underscores; starts with a letter). '
                      'Default: tpu_pipeline_<UTC time>.')
  flags.DEFINE_string('region', 'us-central1', 'AI Platform region of the job.')
  flags.DEFINE_string('job_dir', None, 'gs:// directory for the job: the staged package and, as '
                      'the trainer\'s --job-dir, its default model_dir.')
  flags.DEFINE_enum('scale_tier', None, SCALE_TIERS,
                    'Predefined machines; exclusive with --config. CUSTOM needs --config.')
  flags.DEFINE_string('config', None,
                      'A job config YAML (trainingInput: scaleTier, masterType, workerCount, '
                      '...); see aiplatform/*.yaml.')
  flags.DEFINE_string('runtime_version', '1.15', 'AI Platform runtime version (TensorFlow).')
  flags.DEFINE_string('python_version', '3.7', 'Python version of the runtime.')
  flags.DEFINE_string('dist_dir', 'dist', 'Where the source distribution is built.')
  flags.DEFINE_bool('dry_run', False, 'Print the gcloud command instead of running it.')
  flags.DEFINE_string('gcloud', 'gcloud', 'The gcloud executable.')
  flags.mark_flag_as_required('job_dir')
