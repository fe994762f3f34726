"""How the Keras-runtime commands start and end (`trainer.train_keras`, `trainer.train_torch`,
`trainer.export_keras`): `--help` answered from their flag groups, absl's flags parsed, and the
result printed as one JSON object on stdout; a PipelineError ends the command with one line
`error: ...` on stderr and exit status EXIT_USAGE (2), a stop from outside (errors.Preempted:
SIGTERM, a first Ctrl-C) with `stopped: ...` and EXIT_RESUMABLE (75)."""

import json
import sys

from absl import app
from absl import logging

from trainer import errors
from trainer.cli import help_text


def print_result(compute):
  """Prints compute()'s result (a JSON-serialisable dict) as JSON on stdout; exits with
  EXIT_USAGE on a PipelineError (its message on one line) and EXIT_RESUMABLE on Preempted."""
  try:
    result = compute()
  except errors.PipelineError as e:
    print('error: %s' % ' '.join(str(e).split('\n')), file=sys.stderr)
    sys.exit(errors.EXIT_USAGE)
  except errors.Preempted as e:
    print('stopped: %s' % e, file=sys.stderr)
    sys.exit(errors.EXIT_RESUMABLE)
  print(json.dumps(result, sort_keys=True))


def start(usage, groups, main, guide='docs/migration.md'):
  """A console entry point: `--help` prints `usage` and `groups` (help_text.define_groups's) and
  names `guide`; otherwise absl parses the flags and runs main(argv) at INFO verbosity."""
  help_text.exit_if_help_asked(sys.argv, usage, groups, guide)
  logging.set_verbosity(logging.INFO)
  app.run(main)
