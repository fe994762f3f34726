"""Helpers shared by the tests: the tiny real settings of each model, a CLI runner and its
checks, small real data sets cut from the full ones, and the SavedModel prediction check."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from trainer.data import dataset_json
from trainer.data import shards
from trainer.data import tokenizer

import forked_main

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IN_GCS_SANDBOX = os.environ.get('GCS_SANDBOX') == '1'
# The heaviest InceptionV3 cells (a trained export, an XLA compile, a TPU graph: 18-52 s each on
# TF 1.15.5, the suite's slowest) run on TF 2.15, the road to a TPU today; TF 1.15 builds and trains
# the same InceptionV3 graph in test_model.py's cheaper tests, and the Keras suite trains it and
# predicts with it on intel-tensorflow 1.15.2 (its InceptionV3 run, on an image folder).
INCEPTION_ON_TF2 = pytest.mark.one_runtime(
    'InceptionV3 on TF 2.15 here; TF 1.15 builds and trains it in cheaper tests')


def split_cases(on_tf1, on_tf2, why, marks=None):
  """pytest.params of one scenario's cases divided between the runtimes: those in `on_tf1` run on
  TF 1.15 only, those in `on_tf2` on TF 2.15 only, so that each runtime runs the scenario and
  neither pays for every case (make test on a slow 2-vCPU host ran past CI's limit with both
  running all). why: what the other runtime's case covers. marks: {case: extra marks}."""
  marks = marks or {}

  def param(case, runtime_mark):
    extra = marks.get(case, ())
    extra = list(extra) if isinstance(extra, (list, tuple)) else [extra]
    values = case if isinstance(case, tuple) else (case,)
    return pytest.param(*values, marks=[runtime_mark] + extra)
  return ([param(c, pytest.mark.tf1_share(why)) for c in on_tf1] +
          [param(c, pytest.mark.one_runtime(why)) for c in on_tf2])


needs_gcs = pytest.mark.skipif(not IN_GCS_SANDBOX, reason='needs the GCS emulator: run inside '
                               'scripts/gcs-sandbox (root, unshare), as `make test` does')


def network_isolated():
  """True inside a network namespace whose only interface is loopback (as `make test` runs).
  /proc/self/net/dev lists the interfaces of this process's namespace (/sys/class/net may not)."""
  with open('/proc/self/net/dev') as f:
    interfaces = [line.split(':')[0].strip() for line in f.readlines()[2:]]
  return interfaces == ['lo']


requires_isolation = pytest.mark.skipif(
    not network_isolated(),
    reason='talks to TPU/Google endpoints: run inside a loopback-only namespace (make test)')


def read_records(pattern, limit=None):
  """Serialized records of the shards matching `pattern`, in file order."""
  records = []
  for path in sorted(tf.io.gfile.glob(pattern)):
    for record in tf.io.tf_record_iterator(path):
      records.append(record)
      if limit is not None and len(records) >= limit:
        return records
  return records


def write_subset(source_dir, output_dir, num_train, num_eval, num_shards=2, **info_overrides):
  """A small real dataset: the first num_train / num_eval records of `source_dir` (and its
  vocab.txt for text data)."""
  tf.io.gfile.makedirs(output_dir)
  vocab = os.path.join(source_dir, tokenizer.VOCAB_FILENAME)
  if os.path.exists(vocab):
    tf.io.gfile.copy(vocab, os.path.join(output_dir, tokenizer.VOCAB_FILENAME), overwrite=True)
  for split, count in ((shards.TRAIN_SPLIT, num_train), (shards.EVAL_SPLIT, num_eval)):
    records = read_records(os.path.join(source_dir, split + '-*'), count)
    shards.write_shards(output_dir, split, records, num_shards)
  info = dict(dataset_json.read(source_dir), num_train_examples=num_train,
              num_eval_examples=num_eval)
  info.update(info_overrides)
  dataset_json.write(output_dir, info)
  return output_dir


USER_NETWORK = 'examples.mobilenet:mobilenet'
# Tiny but real ResNet settings: a full train/eval cycle takes seconds even on stock TF 1.15.
TINY = ['--model=resnet', '--resnet_depth=18', '--image_size=16', '--train_batch_size=32',
        '--eval_batch_size=64', '--base_learning_rate=0.1', '--warmup_epochs=0.1',
        '--log_every_n_secs=1']
# The same for each network, with the fixture holding the data it trains on. InceptionV3 runs at
# its minimum input size; 28x28 Fashion-MNIST is resized to it.
TINY_BY_MODEL = {
    'resnet': (TINY, 'small_dir'),
    'cnn': (['--model=cnn', '--image_size=28', '--train_batch_size=32', '--eval_batch_size=64',
             '--log_every_n_secs=1'], 'small_dir'),
    'inception_v3': (['--model=inception_v3', '--image_size=75', '--train_batch_size=8',
                      '--eval_batch_size=32', '--log_every_n_secs=1'], 'tiny_dir'),
    'bilstm': (['--model=bilstm', '--embedding_dim=16', '--lstm_hidden_units=16',
                '--train_batch_size=32', '--eval_batch_size=64', '--log_every_n_secs=1'],
               'text_small_dir'),
    # A network this pipeline never saw, as a user brings it (examples/mobilenet.py).
    USER_NETWORK: (['--network=' + USER_NETWORK, '--network_params={"width": 0.5}',
                    '--image_size=28', '--train_batch_size=32', '--eval_batch_size=64',
                    '--log_every_n_secs=1'], 'small_dir'),
}


def main_args(args):
  """trainer.main's ARGS as the tests run them: a training or dry run without the step-time
  prediction (a second or more a run, over a hundred runs per runtime) unless ARGS name
  --[no]predict_step_time; the prediction has tests of its own (tests/test_advise.py)."""
  args = list(args)
  modes = [a.split('=', 1)[1] for a in args if a.startswith('--mode=')]
  if any('predict_step_time' in a for a in args) or modes[-1:] in (['eval'], ['predict']):
    return args
  return args + ['--nopredict_step_time']


def run_main(*args, env=None, timeout=600, fresh=False):
  """Runs `python -m trainer.main ARGS` (main_args) in a process of its own, forked from one that
  has imported the trainer (tests/forked_main.py) or, with `fresh` (for tests of what the import
  itself does), a fresh interpreter; `env` adds to os.environ. Returns CompletedProcess."""
  full_env = dict(os.environ, **(env or {}))
  return forked_main.run(['-m', 'trainer.main'] + main_args(args), full_env, timeout,
                         fresh=fresh)


def run_prepare(converter, *args, timeout=600):
  """Runs `python -m trainer.prepare CONVERTER ARGS` in a process of its own (forked as run_main's
  are); returns CompletedProcess.

  Beam pipelines (imagenet, image_folder, photos) run in tests only in a process of their own: a
  DirectRunner leaves thread pools (and, with several workers, gRPC servers) in the process that
  ran it, and a pytest process holding those next to TensorFlow 1.15 died of a segmentation fault
  in CI."""
  return forked_main.run(['-m', 'trainer.prepare', converter] + list(args), dict(os.environ),
                         timeout)


# trainer.run.hooks.ProgressHook's line: 'step 120/600 loss ...'
PROGRESS_LINE = re.compile(r'\] step (\d+)/')


class BackgroundRun(object):
  """`python -m trainer.main ARGS` in the background (in `env`, a whole environment, if given),
  its stderr collected line by line. As a context manager it kills a run still going at the end."""

  def __init__(self, *args, env=None, command=None, preexec_fn=None):
    """command: what runs ARGS (default: python -m trainer.main, with main_args); preexec_fn: as
    Popen's."""
    if command is None:
      command, args = [sys.executable, '-m', 'trainer.main'], main_args(args)
    self.proc = subprocess.Popen(command + list(args), cwd=REPO,
                                 env=env, preexec_fn=preexec_fn,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 universal_newlines=True)
    self.lines = []
    self._reader = threading.Thread(target=self._read, daemon=True)
    self._reader.start()

  def __enter__(self):
    return self

  def __exit__(self, *exc_info):
    if self.proc.poll() is None:  # a failed test: do not leave it running on the cores
      self.proc.kill()
      self.proc.wait()

  def _read(self):
    for line in self.proc.stderr:
      self.lines.append(line)

  @property
  def stderr(self):
    return ''.join(self.lines)

  def logged_step(self):
    steps = [int(m.group(1)) for m in map(PROGRESS_LINE.search, list(self.lines)) if m]
    return max(steps) if steps else 0

  def wait_for_step(self, step, timeout=300):
    """Blocks until the progress log shows `step` or later; returns the step shown."""
    deadline = time.time() + timeout
    while self.logged_step() < step:
      assert self.proc.poll() is None, 'the run ended early:\n' + self.stderr[-3000:]
      assert time.time() < deadline, 'no step %d within %d s:\n%s' % (step, timeout,
                                                                     self.stderr[-3000:])
      time.sleep(0.05)
    return self.logged_step()

  def wait(self, timeout=120):
    self.proc.wait(timeout)
    self._reader.join(10)
    return self.proc.returncode


def as_in_a_terminal():
  """A Popen preexec_fn: Ctrl-C (SIGINT) at its default, as a terminal's foreground command has
  it. A command started in the background by a shell without job control (`cmd &`, as a CI
  runner may start `make test`) inherits SIGINT ignored, and the trainer keeps an ignored SIGINT
  ignored, as Python does."""
  signal.signal(signal.SIGINT, signal.SIG_DFL)


def free_ports(count):
  """`count` free TCP ports on 127.0.0.1 (for the tasks of a local TF_CONFIG cluster)."""
  sockets = [socket.socket() for _ in range(count)]
  for s in sockets:
    s.bind(('127.0.0.1', 0))
  ports = [s.getsockname()[1] for s in sockets]
  for s in sockets:
    s.close()
  return ports


def _wait_for_training(proc, log_path, timeout=300):
  """Blocks until the task's log shows a training step (trainer.run.hooks.ProgressHook's line)."""
  deadline = time.time() + timeout
  while not PROGRESS_LINE.search(log_path.read_text()):
    assert proc.poll() is None, 'the task ended early:\n' + log_path.read_text()[-3000:]
    assert time.time() < deadline, 'no training step in %d s:\n%s' % (
        timeout, log_path.read_text()[-3000:])
    time.sleep(0.2)


def run_cluster(args, env_of, log_dir, timeout):
  """Runs `python -m trainer.main ARGS` as the ps, chief and worker of a TF_CONFIG cluster and
  asserts the chief and the worker succeed within `timeout` seconds; each task's output goes to
  log_dir/<task>.log, and whatever still runs at the end is killed.

  The worker starts once the chief is training: its session then opens at once, after the 5 s
  Estimator gives a worker, instead of waiting out SessionManager's 30 s recheck.

  Args:
    args: trainer.main's arguments (the same for every task).
    env_of: task type -> the task's whole environment (with its TF_CONFIG).
    log_dir: a pathlib.Path.
    timeout: seconds for the chief and the worker to finish.
  """
  processes = {}
  try:
    for task_type in ('ps', 'chief', 'worker'):
      log = open(str(log_dir / (task_type + '.log')), 'w')
      processes[task_type] = (subprocess.Popen(
          [sys.executable, '-m', 'trainer.main'] + main_args(args), cwd=REPO, env=env_of(task_type),
          stdout=log, stderr=subprocess.STDOUT), log)
      if task_type == 'chief':
        _wait_for_training(processes['chief'][0], log_dir / 'chief.log')
    deadline = time.time() + timeout
    for task_type in ('chief', 'worker'):
      proc, _ = processes[task_type]
      proc.wait(timeout=max(1, deadline - time.time()))
      assert proc.returncode == 0, (log_dir / (task_type + '.log')).read_text()[-3000:]
    assert processes['ps'][0].poll() is None  # a parameter server serves until it is stopped
  finally:
    for proc, log in processes.values():
      if proc.poll() is None:
        proc.kill()
        proc.wait()
      log.close()


def vertex_ai_env(base, trial=None, tf_config=None, cluster_spec=None):
  """The variables Vertex AI sets in a CustomJob's containers (in a tuning trial: the AIP_*
  directories under <base>/<trial>), as a dict to add to an environment."""
  root = base + ('/' + trial if trial else '')
  env = {'AIP_MODEL_DIR': root + '/model/', 'AIP_CHECKPOINT_DIR': root + '/checkpoints/',
         'AIP_TENSORBOARD_LOG_DIR': root + '/logs/'}
  if trial:
    env['CLOUD_ML_TRIAL_ID'] = trial
  if tf_config:
    env['TF_CONFIG'] = json.dumps(tf_config)
  if cluster_spec:
    env['CLUSTER_SPEC'] = json.dumps(cluster_spec)
  return env


def directory_files(path):
  """{relative path: bytes} of every file under `path` (local or gs://)."""
  files = {}
  for directory, _, names in tf.io.gfile.walk(path):
    for name in names:
      full = directory.rstrip('/') + '/' + name
      with tf.io.gfile.GFile(full, 'rb') as f:
        files[full[len(path.rstrip('/')) + 1:]] = f.read()
  return files


def results_of(model_dir, name='results.json'):
  """The results.json (or another JSON file `name`) of a run, from a local or gs:// model_dir."""
  with tf.io.gfile.GFile(model_dir.rstrip('/') + '/' + name) as f:
    return json.load(f)


def ok(proc):
  """Asserts a CLI run succeeded; returns it."""
  assert proc.returncode == 0, proc.stderr[-3000:]
  return proc


def refused(proc, *fragments):
  """Asserts a CLI run stopped with the usage-error status and a message holding `fragments`,
  not a traceback."""
  assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
  for fragment in fragments:
    assert fragment in proc.stderr, proc.stderr[-2000:]
  assert 'Traceback' not in proc.stderr


_PREDICT_SCRIPT = '''
import json, sys
import numpy as np
import tensorflow.compat.v1 as tf
request = json.load(open(sys.argv[2]))
inputs = [bytes.fromhex(h) for h in request['inputs']]
with tf.Graph().as_default(), tf.Session() as sess:
  meta = tf.saved_model.load(sess, ['serve'], sys.argv[1])
  sig = meta.signature_def['serving_default']
  out = sess.run({k: v.name for k, v in sig.outputs.items()},
                 {sig.inputs[request['input_name']].name: inputs})
print(json.dumps({'classes': out['classes'].tolist(),
                  'probabilities': out['probabilities'].tolist(),
                  'logits': out['logits'].tolist()}))
'''


def predict_in_fresh_process(export_path, data_dir, tmp_path):
  """Feeds the real eval examples of data_dir to the SavedModel in a new process: encoded image
  bytes, or for text data the raw text strings.

  Returns:
    (labels, classes, probabilities, logits) as numpy arrays.
  """
  records = read_records(os.path.join(data_dir, 'validation-*'))
  examples = [tf.train.Example.FromString(r).features.feature for r in records]
  kind = 'text' if 'text/raw' in examples[0] else 'image'
  input_key = 'text/raw' if kind == 'text' else 'image/encoded'
  request = {'inputs': [e[input_key].bytes_list.value[0].hex() for e in examples],
             'input_name': 'text' if kind == 'text' else 'image_bytes'}
  labels = np.array([e[kind + '/class/label'].int64_list.value[0] for e in examples])
  (tmp_path / 'request.json').write_text(json.dumps(request))
  proc = ok(subprocess.run([sys.executable, '-c', _PREDICT_SCRIPT, export_path,
                             str(tmp_path / 'request.json')], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, universal_newlines=True, cwd=str(tmp_path)))
  out = json.loads(proc.stdout.strip().splitlines()[-1])
  return (labels, np.array(out['classes']), np.array(out['probabilities']),
          np.array(out['logits']))


def config_from_args(*args):
  """The run Config that `python -m trainer.main ARGS` would build, built in this process."""
  from absl import flags as absl_flags  # pylint: disable=g-import-not-at-top

  from trainer.flags import run_flags  # pylint: disable=g-import-not-at-top
  from trainer.flags import to_config  # pylint: disable=g-import-not-at-top
  if 'model' not in absl_flags.FLAGS:
    run_flags.define_run_flags()
  absl_flags.FLAGS.unparse_flags()
  try:
    absl_flags.FLAGS(['trainer.main'] + main_args(args))
    flag_values = absl_flags.FLAGS
    return to_config.config_from_flags(flag_values.flag_values_dict(),
                                       given={n for n in flag_values if flag_values[n].present})
  finally:
    absl_flags.FLAGS.unparse_flags()
