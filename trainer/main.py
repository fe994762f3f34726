"""Entry point: `python -m trainer.main --model_dir=DIR --data_dir=DIR [--use_tpu --tpu=NAME]`.

Parses the flags once, turns them into a `trainer.config.Config` and runs it; see --helpfull.
"""

import json
import logging as std_logging
import sys

from absl import app
from absl import flags as absl_flags
from absl import logging

from flags import config as flags_config
from flags import definitions  # pylint: disable=unused-import  # defines the flags
from trainer import driver
from trainer.config import PipelineError

FLAGS = absl_flags.FLAGS


def main(argv):
  if len(argv) > 1:
    raise app.UsageError('unexpected arguments: %s' % ' '.join(argv[1:]))
  try:
    config = flags_config.config_from_flags(FLAGS)
    results = driver.run(config)
  except PipelineError as e:
    print('error: %s' % e, file=sys.stderr)
    sys.exit(2)
  print(json.dumps(results, indent=2, sort_keys=True))


def run():
  logging.set_verbosity(logging.INFO)
  # TF 1.15 gives its logger a stderr handler of its own; absl's handler already prints its
  # records, so drop TF's to avoid every line appearing twice.
  std_logging.getLogger('tensorflow').handlers = []
  app.run(main)


if __name__ == '__main__':
  run()
