"""The user-facing error type of every command."""


class PipelineError(Exception):
  """A problem the user can fix (bad flags, missing data, unreachable TPU, unusable checkpoint).

  The commands (`trainer.main`, `trainer.prepare`, `trainer.benchmark`, `trainer.submit`) print
  its message without a traceback and exit with status 2; the message says what was wrong and
  what to do.
  """


# The exit status of a PipelineError (and of a refusal that cannot raise one: a wait given up
# from another thread).
EXIT_USAGE = 2


# The exit status of a run stopped from outside before its end (SIGTERM: preemption or a job
# cancelled; an object-store outage that outlasted TensorFlow's retries), with everything saved
# that could be: run the same command again to resume. sysexits.h EX_TEMPFAIL ("temporary
# failure; the user is invited to retry"), distinct from a PipelineError's 2, a crash's 1 and the
# 143 of a process that died of SIGTERM unhandled.
EXIT_RESUMABLE = 75


class Preempted(BaseException):
  """The run stopped on SIGTERM (or a first Ctrl-C, SIGINT). A BaseException, like
  KeyboardInterrupt, so that no `except Exception` on the way turns it into another error; the
  entry points (`trainer.main`; the Keras runtime's through trainer/cli/outcome.py) catch it by
  name and exit with EXIT_RESUMABLE."""

  def __init__(self, message, cause='preempted (SIGTERM)'):
    super(Preempted, self).__init__('%s: %s; run the same command again to resume.'
                                    % (cause, message))


# How `Preempted` names a stop asked for with Ctrl-C.
INTERRUPTED = 'interrupted (Ctrl-C)'

# The exit status of a run stopped at once by a second Ctrl-C: 128 + SIGINT, a shell's.
EXIT_INTERRUPTED = 130

