"""`python -m trainer.main ARGS` (or `python SCRIPT ARGS`, e.g. tests/kill_at.py) for the tests, in
a process forked from one that has already imported the trainer and TensorFlow (Python's
multiprocessing forkserver) instead of a fresh interpreter: the same code from the same flags,
without the import (2 s on TF 1.15.5, 3.3 s on TF 2.15.1 on a Zen 4 core) in each of the
suite's ~150 trainer processes per runtime. On the Keras runtime (no tf.estimator) the preload is
trainer.export_keras with Keras on its TensorFlow backend (TensorFlow 2.21 and Keras: 6.5 s on a
Zen 3 core), for the Keras commands run with KERAS_BACKEND=tensorflow; another backend's run
starts a fresh interpreter (KERAS_BACKEND is read when Keras loads).

What a fresh process would do differently is kept or routed around:
  - the run's environment is the one asked for (plus what the trainer's import set where the
    run did not, as trainer/__init__.py does: thread counts, GCS_STAT_CACHE_MAX_AGE);
  - a run whose environment differs in a variable read when TensorFlow, OpenMP, oneDNN or Python
    load (LOAD_TIME) runs in a fresh interpreter, as does `run(..., fresh=True)` (tests of what
    the import itself prints), and every run when the preload failed, said once in the log;
  - the module or script runs as __main__ (runpy, as the interpreter does), with the sys.argv,
    working directory, sys.path (PYTHONPATH's folders after the first entry) and stdin
    (/dev/null) of a fresh interpreter; stdout and stderr are the process's own files;
  - the exit is Python's: non-daemon threads joined, atexit handlers run, SystemExit's code (None
    is 0, a message is printed and is 1), an uncaught exception's traceback and 1; a signal's
    death is its negative number, as subprocess reports it.
"""

import atexit
import importlib.util
import json
import logging
import multiprocessing
from multiprocessing import forkserver
import os
import re
import runpy
import subprocess
import sys
import tempfile
import threading
from unittest import mock

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Read when TensorFlow, OpenMP, oneDNN, CUDA or the interpreter load (trainer/host/threads.py
# sets some of them at import): a run that changes one needs a fresh interpreter.
LOAD_TIME = re.compile(r'^(TF_|OMP_|KMP_|MKL|ONEDNN|DNNL|CUDA|NVIDIA|XLA|JAX_|KERAS|LD_|'
                       r'PYTHON(?!PATH$)|MALLOC|GOMP|OPENBLAS|GRPC|PROTOCOL_BUFFERS)')
# Read when a run starts, never at import (the trainer's own and cloud variables).
RUN_TIME = {'TF_CONFIG'}

# What the forkserver imports: the trainer on a pipeline runtime, the Keras commands' shared
# imports on the Keras runtime, whose Keras backend the forkserver fixes (KERAS_BACKEND).
KERAS_RUNTIME = importlib.util.find_spec('tensorflow_estimator') is None
PRELOAD = 'trainer.export_keras' if KERAS_RUNTIME else 'trainer.main'
PRELOAD_ENV = {'KERAS_BACKEND': 'tensorflow'} if KERAS_RUNTIME else {}
_NO_PRELOAD = 117  # the child's exit status when the forkserver could not import PRELOAD
_server = {}  # 'env': the environment the forkserver started with; 'sys_path': a fresh run's


def _fresh_sys_path():
  """sys.path of a fresh interpreter started in REPO with this environment, less its first entry
  (the script's folder, or the working directory under -m) and PYTHONPATH's folders."""
  env = {k: v for k, v in os.environ.items() if k != 'PYTHONPATH'}
  out = subprocess.run([sys.executable, '-c', 'import json, sys; print(json.dumps(sys.path[1:]))'],
                       cwd=REPO, env=env, stdout=subprocess.PIPE, check=True,
                       universal_newlines=True).stdout
  return json.loads(out)


def _start():
  """Starts the forkserver (once per process) in REPO, with this environment recorded as its."""
  if not _server:
    _server['sys_path'] = _fresh_sys_path()
    _server['env'] = dict(os.environ, **PRELOAD_ENV)
    multiprocessing.set_forkserver_preload([PRELOAD])
    _server['context'] = multiprocessing.get_context('forkserver')
    cwd = os.getcwd()
    os.chdir(REPO)  # the forkserver imports PRELOAD from its working directory
    try:
      with mock.patch.dict(os.environ, PRELOAD_ENV):  # the environment the forkserver starts with
        forkserver.ensure_running()
    finally:
      os.chdir(cwd)
  return _server['context']


def _needs_fresh_interpreter(env):
  changed = {k for k in set(env) | set(_server['env'])
             if env.get(k) != _server['env'].get(k)}
  return any(LOAD_TIME.match(k) and k not in RUN_TIME for k in changed)


def _exit_code(e):
  """The status Python exits with on SystemExit `e`."""
  code = e.code
  if code is None:
    return 0
  if isinstance(code, int):
    return code
  print(code, file=sys.stderr)
  return 1


def _child(argv, cwd, env, start_env, sys_path, out_path, err_path):
  """Runs in the forked process: becomes `python ARGV` and exits as it would."""
  if PRELOAD not in sys.modules:  # ImportError in the forkserver (it says nothing)
    os._exit(_NO_PRELOAD)  # pylint: disable=protected-access
  added = {k: v for k, v in os.environ.items() if k not in start_env}
  os.environ.clear()
  os.environ.update(env)
  for name, value in added.items():
    os.environ.setdefault(name, value)
  os.chdir(cwd)
  python_path = [p for p in env.get('PYTHONPATH', '').split(os.pathsep) if p]
  module = argv[1] if argv[0] == '-m' else None
  first = cwd if module else os.path.dirname(os.path.abspath(argv[0]))
  sys.path[:] = [first] + python_path + sys_path
  for fd, path, flags in ((0, os.devnull, os.O_RDONLY),
                          (1, out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                          (2, err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
    opened = os.open(path, flags)
    os.dup2(opened, fd)
    os.close(opened)
  # The preload made the imports; a fresh interpreter has no PRELOAD module before it runs it as
  # __main__ (runpy warns when it finds one).
  sys.modules.pop(PRELOAD, None)
  code = 0
  try:
    if module:
      sys.argv = ['-m'] + list(argv[2:])  # run_module puts the module's file first
      runpy.run_module(module, run_name='__main__', alter_sys=True)
    else:
      sys.argv = list(argv)
      runpy.run_path(argv[0], run_name='__main__')
  except SystemExit as e:
    code = _exit_code(e)
  except BaseException:  # pylint: disable=broad-except  # what the interpreter would print
    sys.excepthook(*sys.exc_info())
    code = 1
  # The interpreter's own exit steps: non-daemon threads joined (and their pools' exit hooks run),
  # then the atexit handlers.
  threading._shutdown()  # pylint: disable=protected-access
  atexit._run_exitfuncs()  # pylint: disable=protected-access
  for stream in (sys.stdout, sys.stderr):
    stream.flush()
  os._exit(code)  # pylint: disable=protected-access


def run(argv, env, timeout, cwd=REPO, fresh=False):
  """Runs `python ARGV` (['-m', MODULE, ARGS...] or [SCRIPT, ARGS...]) with environment `env`
  (whole) in `cwd`; returns a subprocess.CompletedProcess (text stdout and stderr); raises
  subprocess.TimeoutExpired after `timeout` seconds, the process killed."""
  command = [sys.executable] + list(argv)
  context = _start()
  if not (fresh or _server.get('no_preload') or _needs_fresh_interpreter(env)):
    with tempfile.TemporaryDirectory(prefix='forked-') as scratch:
      out_path, err_path = (os.path.join(scratch, name) for name in ('stdout', 'stderr'))
      process = context.Process(target=_child, args=(list(argv), cwd, env, _server['env'],
                                                     _server['sys_path'], out_path, err_path))
      process.start()
      process.join(timeout)
      timed_out = process.exitcode is None
      if timed_out:
        process.kill()
        process.join()
      with open(out_path) as out, open(err_path) as err:
        stdout, stderr = out.read(), err.read()
      if timed_out:
        raise subprocess.TimeoutExpired(command, timeout, stdout, stderr)
      if process.exitcode != _NO_PRELOAD:
        return subprocess.CompletedProcess(command, process.exitcode, stdout, stderr)
      _server['no_preload'] = True
      logging.warning('forked_main: %s could not be imported in the forkserver: every run starts '
                      'a fresh interpreter.', PRELOAD)
  return subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, universal_newlines=True, timeout=timeout)
