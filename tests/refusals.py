"""The bad-input matrix's machinery: each row is one (entry point, bad input). Its tree is built
in a fresh directory, fingerprinted (every file's path and bytes, sibling directories included),
the command is run, and the row passes when it exited 2 with exactly one `error:` line holding
the expected words, no traceback, and every file that existed before is byte-identical after.

Rows of one entry point run in one process (tests/refusal_runner.py), so the matrix costs one
TensorFlow import per entry point and runtime. Tables: tests/test_refusals_*.py.
"""

import collections
import hashlib
import json
import os
import subprocess
import sys

RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'refusal_runner.py')

# setup(root) builds the row's files under `root` (a str path). `args` and `env` values may hold
# '{root}', replaced by that path. `expect`: words the error line must hold (case-insensitive).
Row = collections.namedtuple('Row', ['id', 'entry', 'args', 'expect', 'setup', 'env', 'cwd'])
Row.__new__.__defaults__ = (None, None, None)


def fingerprint(root):
  """{relative path: sha256 of the bytes} of every file under `root` (links not followed)."""
  prints = {}
  for directory, _, files in os.walk(root):
    for name in files:
      path = os.path.join(directory, name)
      if os.path.islink(path):
        prints[os.path.relpath(path, root)] = 'link->' + os.readlink(path)
        continue
      with open(path, 'rb') as f:
        prints[os.path.relpath(path, root)] = hashlib.sha256(f.read()).hexdigest()
  return prints


def _fill(value, root):
  return value.replace('{root}', root)


def run_rows(rows, base_dir, python=sys.executable, timeout=600):
  """Runs `rows` (all of one entry point) under `base_dir`; returns a list of failure strings
  (empty when every row behaved)."""
  entries = {row.entry for row in rows}
  assert len(entries) == 1, entries
  specs, before, roots = [], {}, {}
  for i, row in enumerate(rows):
    root = os.path.join(base_dir, 'row%03d' % i)
    os.makedirs(root)
    if row.setup:
      row.setup(root)
    roots[row.id] = root
    before[row.id] = fingerprint(root)
    specs.append({'id': row.id, 'args': [_fill(a, root) for a in row.args],
                  'env': {k: _fill(v, root) for k, v in (row.env or {}).items()},
                  'cwd': _fill(row.cwd, root) if row.cwd else root})
  rows_path = os.path.join(base_dir, 'rows.json')
  with open(rows_path, 'w') as f:
    json.dump(specs, f)
  proc = subprocess.run([python, RUNNER, entries.pop(), rows_path], stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, universal_newlines=True, timeout=timeout)
  marker = [line for line in proc.stdout.splitlines() if line.startswith('REFUSAL-RESULTS ')]
  if proc.returncode or not marker:
    return ['the runner failed (exit %s):\n%s' % (proc.returncode, proc.stderr[-5000:])]
  failures = []
  for row, result in zip(rows, json.loads(marker[0][len('REFUSAL-RESULTS '):])):
    failures += check(row, result, before[row.id], fingerprint(roots[row.id]))
    # The matrix's table of messages (shown with pytest -s, and in a failure's report).
    shown = [l for l in result['stderr'].splitlines() if l.startswith('error:')]
    print('ROW %s | %s' % (row.id, shown[0] if shown else 'exit %s' % result['exit']))
  return failures


def check(row, result, before, after):
  """The failures of one row's result (see the module docstring)."""
  problems = []
  errors = [line for line in result['stderr'].splitlines() if line.startswith('error:')]
  if result['exit'] != 2:
    problems.append('exit %s, not 2%s' % (result['exit'], ':\n' + result['traceback']
                                          if result['traceback'] else ''))
  if len(errors) != 1:
    problems.append('%d error: lines in %r' % (len(errors), result['stderr'][-2000:]))
  elif not all(w.lower() in errors[0].lower() for w in row.expect):
    problems.append('error line %r lacks %r' % (errors[0], row.expect))
  if 'Traceback' in result['stderr']:
    problems.append('a traceback was printed')
  changed = sorted(p for p in before if after.get(p) != before[p])
  if changed:
    problems.append('files changed or gone: %s' % changed[:10])
  return ['%s [%s]: %s' % (row.id, row.entry, p) for p in problems]


