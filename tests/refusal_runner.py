"""Runs many invocations of one entry point in one process (one TensorFlow import instead of one
per invocation), for the bad-input matrix (tests/refusals.py).

  python tests/refusal_runner.py ENTRY ROWS_JSON   ->  JSON list on stdout

ROWS_JSON: a list of {"id", "args", "env", "cwd"}; each is run as `python -m <ENTRY's module>
ARGS` would be: flags parsed by absl, then the module's main(). Each result is {"id", "exit" (the
SystemExit code, 0 when main returned, "traceback" when it raised), "stderr" (what it printed
there), "traceback"}.
"""

import contextlib
import importlib
import io
import json
import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# entry -> (module, the functions that define its flags, in order: of flags/, or a module path)
ENTRIES = {
    'main': ('trainer.main', ['run_flags.define_run_flags']),
    'prepare': ('trainer.prepare.__main__',
                ['trainer.prepare.prepare_flags.define_prepare_flags']),
    'submit': ('trainer.submit', ['submit_flags.define_submit_flags']),
    'benchmark': ('trainer.benchmark.__main__',
                  ['run_flags.define_run_flags', 'benchmark_flags.define_benchmark_flags']),
    'export_keras': ('trainer.export_keras', ['keras_flags.define_export_keras_flags']),
    'train_keras': ('trainer.train_keras', ['keras_flags.define_train_keras_flags']),
}


def _define_flags(names):
  for name in names:
    module, function = name.rsplit('.', 1)
    if '.' not in module:
      module = 'trainer.flags.' + module
    getattr(importlib.import_module(module), function)()


@contextlib.contextmanager
def _environment(env, cwd):
  saved_env, saved_cwd = dict(os.environ), os.getcwd()
  os.environ.update(env)
  os.chdir(cwd)
  try:
    yield
  finally:
    os.environ.clear()
    os.environ.update(saved_env)
    os.chdir(saved_cwd)


def run_row(module, row):
  """Runs one row; returns its result dict."""
  from absl import flags  # pylint: disable=g-import-not-at-top
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  flag_values = flags.FLAGS
  stderr = io.StringIO()
  result = {'id': row['id'], 'exit': 0, 'traceback': None}
  with _environment(row.get('env', {}), row['cwd']):
    tf.reset_default_graph()
    flag_values.unparse_flags()
    saved_stderr, sys.stderr = sys.stderr, stderr
    try:
      argv = flag_values(['python'] + row['args'])
      module.main(argv)
    except SystemExit as e:
      result['exit'] = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except Exception:  # pylint: disable=broad-except
      result['exit'] = 'traceback'
      result['traceback'] = traceback.format_exc()
    finally:
      sys.stderr = saved_stderr
  result['stderr'] = stderr.getvalue()
  return result


def main():
  entry, rows_path = sys.argv[1:3]
  module_name, definers = ENTRIES[entry]
  from absl import logging  # pylint: disable=g-import-not-at-top
  logging.set_verbosity(logging.WARNING)
  module = importlib.import_module(module_name)
  _define_flags(definers)
  with open(rows_path) as f:
    rows = json.load(f)
  results = [run_row(module, row) for row in rows]
  sys.stdout.write('\nREFUSAL-RESULTS ' + json.dumps(results) + '\n')


if __name__ == '__main__':
  main()
