"""How the commands start and end. `start`: `--help` answered from the command's flag groups,
then absl's flags parsed and main run (trainer.prepare, trainer.submit, trainer.benchmark and the
Keras runtime's commands). `print_result` (trainer.train_keras, trainer.train_torch,
trainer.export_keras): the result printed as one JSON object on stdout; a PipelineError ends the
command with one line `error: ...` on stderr and exit status EXIT_USAGE (2) (`refuse`, which
trainer.submit, trainer.prepare and trainer.benchmark call too), a stop from outside
(errors.Preempted: SIGTERM, a first Ctrl-C) with `stopped: ...` and EXIT_RESUMABLE (75)."""

import json
import sys

from absl import app
from absl import logging

from trainer import errors
from trainer.cli import help_text


def refuse(error):
  """Ends the command on a PipelineError: its message on one `error:` line on stderr, exit
  status EXIT_USAGE."""
  print('error: %s' % ' '.join(str(error).split('\n')), file=sys.stderr)
  sys.exit(errors.EXIT_USAGE)


def print_result(compute):
  """Prints compute()'s result (a JSON-serialisable dict) as JSON on stdout; `refuse`s a
  PipelineError and exits with EXIT_RESUMABLE on Preempted."""
  try:
    result = compute()
  except errors.PipelineError as e:
    refuse(e)
  except errors.Preempted as e:
    print('stopped: %s' % e, file=sys.stderr)
    sys.exit(errors.EXIT_RESUMABLE)
  print(json.dumps(result, sort_keys=True))


def start(usage, groups, main, guide, verbosity=logging.INFO):
  """A console entry point: `--help` prints `usage` and `groups` (help_text.define_groups's) and
  names `guide` (a file of the repository); otherwise absl parses the flags and runs main(argv)
  at `verbosity` (absl's logging level)."""
  help_text.exit_if_help_asked(sys.argv, usage, groups, guide)
  logging.set_verbosity(verbosity)
  app.run(main)
