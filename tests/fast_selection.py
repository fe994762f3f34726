"""`make test-fast`: the suite less its slow tests, for the edit-test loop (a pytest plugin,
loaded by conftest.py).

`--fast=SECONDS` deselects every test whose recorded time (tests/durations.json: seconds per test
id, setup to teardown, from a whole `make test` run on the TF 2.15 runtime) is above SECONDS; a
test the file does not know yet runs. `--record-durations=PATH` writes such a file from the run
it ends (`make test-durations` refreshes tests/durations.json).
"""

import collections
import json
import os

DURATIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'durations.json')

_recorded = collections.defaultdict(float)


def pytest_addoption(parser):
  group = parser.getgroup('fast', 'the edit-test loop (make test-fast)')
  group.addoption('--fast', type=float, default=None, metavar='SECONDS',
                  help='deselect the tests that took longer than SECONDS in the run recorded in '
                       'tests/durations.json')
  group.addoption('--record-durations', default=None, metavar='PATH',
                  help='write each test\'s seconds (setup to teardown) to PATH as JSON')


def pytest_collection_modifyitems(config, items):
  limit = config.getoption('fast')
  if limit is None:
    return
  with open(DURATIONS) as f:
    seconds = json.load(f)
  slow = [item for item in items if seconds.get(item.nodeid, 0.0) > limit]
  if slow:
    config.hook.pytest_deselected(items=slow)
    items[:] = [item for item in items if seconds.get(item.nodeid, 0.0) <= limit]


def pytest_runtest_logreport(report):
  _recorded[report.nodeid] += report.duration


def pytest_sessionfinish(session):
  path = session.config.getoption('record_durations')
  # Written once, by the process that saw every test: pytest-xdist's controller, not a worker.
  if path and not hasattr(session.config, 'workerinput'):
    with open(path, 'w') as f:
      json.dump({k: round(v, 2) for k, v in sorted(_recorded.items())}, f, indent=0,
                sort_keys=True)
      f.write('\n')
