"""The user-facing error type of every command."""


class PipelineError(Exception):
  """A problem the user can fix (bad flags, missing data, unreachable TPU, unusable checkpoint).

  The commands (`trainer.main`, `trainer.prepare`, `trainer.benchmark`, `trainer.submit`) print
  its message without a traceback and exit with status 2; the message says what was wrong and
  what to do.
  """
