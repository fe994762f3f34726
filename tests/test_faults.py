"""Fault injection on real runs (a CNN on real Fashion-MNIST, on the TPUEstimator's CPU path):
SIGTERM during training, kill -9 at seeded random steps, the continuous evaluation's race with
checkpoint garbage collection. Each asserts the end state: the saved step, the final global_step,
results.json and the accuracy (against uninterrupted runs). (Damaged checkpoint files of each
kind: tests/test_checkpoints.py; a storage outage: tests/test_gcs.py.)"""

import os
import random
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import tensorflow.compat.v1 as tf

from trainer import errors
from trainer.errors import EXIT_RESUMABLE
from trainer.run import checkpoints
from trainer.run import preemption
from trainer.run import run_errors

from helpers import as_in_a_terminal
from helpers import BackgroundRun
from helpers import main_args
from helpers import ok
from helpers import REPO
from helpers import results_of
from helpers import run_main
from helpers import write_subset


def _args(small_dir, model_dir, *extra):
  return ['--data_dir=' + small_dir, '--model_dir=' + model_dir, '--model=cnn',
          '--image_size=28', '--train_batch_size=32', '--eval_batch_size=100', '--seed=3',
          '--log_every_n_secs=0.2'] + list(extra)


def _checkpoint_steps(model_dir):
  state = tf.train.get_checkpoint_state(model_dir)
  return sorted(int(p.rsplit('-', 1)[1]) for p in state.all_model_checkpoint_paths)


def test_sigterm_saves_the_step_reached_and_the_rerun_resumes_there(small_dir, tmp_path):
  """SIGTERM in the middle of training (no periodic checkpoint due for 10,000 steps): the run
  stops after the step in flight, saves model.ckpt-N with N at least the step it had logged,
  exits with status 75 well within the grace period and says so; the re-run resumes at N."""
  model_dir = str(tmp_path / 'model')
  args = _args(small_dir, model_dir, '--mode=train', '--save_checkpoints_steps=10000')
  with BackgroundRun('--train_steps=10000', *args) as run:
    logged = run.wait_for_step(15)
    signalled = time.time()
    run.proc.send_signal(signal.SIGTERM)
    assert run.wait() == EXIT_RESUMABLE, run.stderr[-3000:]
    assert time.time() - signalled < preemption.DEFAULT_GRACE_SECS
  saved = re.search(r'preempted \(SIGTERM\): the checkpoint at step (\d+) in (\S+) is saved; run '
                    r'the same command again to resume', run.stderr)
  assert saved, run.stderr[-3000:]
  step = int(saved.group(1))
  assert 'SIGTERM received: stopping after the step in flight' in run.stderr
  assert step >= logged and _checkpoint_steps(model_dir) == [0, step]
  assert not os.path.exists(os.path.join(model_dir, 'results.json'))
  resumed = ok(run_main('--train_steps=%d' % (step + 5), *args))
  assert 'Resuming from the checkpoint at step %d' % step in resumed.stderr
  assert results_of(model_dir)['global_step'] == step + 5


def _stuck_training(tmp_path, grace_secs):
  """A process inside `SigtermWatch.training()` whose step never ends (it sleeps), once it is
  there (it has printed 'ready')."""
  script = textwrap.dedent('''
      import time
      from trainer.run import preemption
      watch = preemption.SigtermWatch('MODEL_DIR', grace_secs=GRACE)
      with watch.installed(), watch.training():
        print('ready', flush=True)
        time.sleep(60)
      ''').replace('MODEL_DIR', str(tmp_path)).replace('GRACE', str(grace_secs))
  proc = subprocess.Popen([sys.executable, '-c', script], cwd=REPO, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True,
                          preexec_fn=as_in_a_terminal)
  assert proc.stdout.readline().strip() == 'ready', proc.communicate()[1][-3000:]
  return proc


def test_a_stuck_run_is_ended_by_the_watchdog_after_the_grace_period(tmp_path):
  """A SIGTERM whose step never ends (here: a training phase that sleeps) still ends the process,
  with status 75, after grace_secs."""
  proc = _stuck_training(tmp_path, 2)
  signalled = time.time()
  proc.send_signal(signal.SIGTERM)
  _, stderr = proc.communicate(timeout=30)
  assert proc.returncode == EXIT_RESUMABLE, stderr
  assert 2 <= time.time() - signalled < 20
  assert 'did not end within 2 s of the signal' in stderr


def test_sigterm_outside_training_raises_at_once_and_inside_it_stops_the_session(tmp_path):
  """In this process: outside training, Preempted at once; inside, the hook stops the session
  (at its creation, or after the step in flight) and Preempted follows train(); the handler is
  put back and the watchdog cancelled when the run is over."""
  before = signal.getsignal(signal.SIGTERM)
  watch = preemption.SigtermWatch(str(tmp_path), grace_secs=600)
  with watch.installed():
    with pytest.raises(preemption.Preempted, match='stopped outside training, with nothing '
                                                   'unsaved'):
      os.kill(os.getpid(), signal.SIGTERM)
      time.sleep(5)  # the handler raises in the main thread before this ends
  assert signal.getsignal(signal.SIGTERM) is before
  watch = preemption.SigtermWatch(str(tmp_path), grace_secs=600)
  with watch.installed():
    with pytest.raises(preemption.Preempted, match='no checkpoint is in'):
      with watch.training():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)
        assert watch.requested  # training goes on to the end of its step
        context = tf.train.SessionRunContext(None, None)
        watch.hook().after_run(context, None)
        assert context.stop_requested
        coord = tf.train.Coordinator()
        watch.hook().after_create_session(None, coord)
        assert coord.should_stop()
  assert signal.getsignal(signal.SIGTERM) is before
  assert watch.ended.is_set()


@pytest.fixture(scope='module')
def medium_dir(fashion_mnist_dir, tmp_path_factory):
  """2,000 real train / 1,000 real test images: enough for the CNN's accuracy to settle."""
  return write_subset(fashion_mnist_dir, str(tmp_path_factory.mktemp('medium')), 2000, 1000)


@pytest.mark.one_runtime('TF 1.15 is killed anywhere in test_kill_anywhere.py: at every point '
                         'of a save, on local disk and on gs://')
def test_kill_9_at_random_steps_loses_nothing(medium_dir, tmp_path):
  """Two kill -9s at seeded random points of a 150-step run (checkpoints every 10 steps, 2
  kept), each re-run resuming from the newest checkpoint: the last re-run finishes at step 150
  and writes results.json, and its accuracy is within the spread of uninterrupted runs (a
  resumed run sees as many examples, in another order). Uninterrupted runs of this command with
  seeds 3-8 reached 0.664-0.742 on TF 1.15.5 and 0.721-0.741 on TF 2.15.1 (mean 0.717, standard
  deviation 0.027 over the twelve): the bound, 0.62, is 3.5 standard deviations under that mean,
  so the test needs no uninterrupted run of its own; the restores themselves are checked in the
  logs."""
  rng = random.Random(17)
  model_dir = str(tmp_path / 'killed')
  args = _args(medium_dir, model_dir, '--keep_checkpoint_max=2', '--mode=train_and_eval',
               '--train_steps=150', '--steps_per_eval=150', '--save_checkpoints_steps=10')
  resumed_from = []
  for _ in range(2):
    newest = os.path.exists(model_dir) and checkpoints.newest_intact_checkpoint(model_dir, False)
    start = int(newest.rsplit('-', 1)[1]) if newest else 0
    resumed_from.append(start)
    with BackgroundRun(*args) as run:
      run.wait_for_step(start + rng.randint(12, 60))  # past the save at start + 10
      time.sleep(rng.uniform(0, 0.3))  # a little past the log line: maybe inside a save
      run.proc.kill()
      assert run.wait() == -signal.SIGKILL
    if start:
      assert 'Restoring parameters from %s/model.ckpt-%d' % (model_dir, start) in run.stderr
  ok(run_main(*args))
  results = results_of(model_dir)
  assert results['global_step'] == 150
  assert resumed_from[0] == 0 < resumed_from[1] < 150
  print('top-1 killed and resumed %.4f, resumed from %s' % (results['top_1_accuracy'],
                                                            resumed_from))
  assert results['top_1_accuracy'] > 0.62


_EVAL_RACE = textwrap.dedent('''
    import os, re, sys
    from trainer import main
    from trainer.run import checkpoints
    check = checkpoints.checkpoint_damage
    deleted = []
    def delete_the_first_intact_one_after_checking(prefix):
      problem = check(prefix)
      if not deleted and problem is None and int(re.search(r'-(\\d+)$', prefix).group(1)) < 60:
        deleted.append(prefix)  # as keep_checkpoint_max does, between the check and the read
        for path in checkpoints.checkpoint_files(prefix):
          os.remove(path)
      return problem
    checkpoints.checkpoint_damage = delete_the_first_intact_one_after_checking
    sys.argv[0] = 'trainer.main'
    main.run()
    ''')


def test_continuous_eval_beside_training_skips_deleted_checkpoints_and_ends_at_the_last(
    small_dir, tmp_path):
  """An evaluation job (--mode=eval --eval_timeout) waiting beside training with
  keep_checkpoint_max=1. The first intact checkpoint it lists before the last is deleted after
  its check and before its read (the race with keep_checkpoint_max, made certain here): a log
  line, no crash. Each checkpoint is evaluated at most once, and the job ends with the final
  step instead of waiting out the timeout."""
  model_dir = str(tmp_path / 'model')
  args = _args(small_dir, model_dir, '--save_checkpoints_steps=10', '--keep_checkpoint_max=1',
               '--train_steps=60')
  os.makedirs(model_dir)
  with BackgroundRun('--mode=eval', '--eval_timeout=300', *args,
                     command=[sys.executable, '-c', _EVAL_RACE]) as evaluation:
    deadline = time.time() + 300
    while not any('Waiting for new checkpoint' in line for line in evaluation.lines):
      assert evaluation.proc.poll() is None and time.time() < deadline, evaluation.stderr[-3000:]
      time.sleep(0.1)
    with BackgroundRun('--mode=train', *args) as training:
      assert training.wait(300) == 0, training.stderr[-3000:]
    assert evaluation.wait(300) == 0, evaluation.stderr[-3000:]
  stderr = evaluation.stderr
  assert re.search(r'Skipping checkpoint \S+model.ckpt-\d+: it disappeared while being '
                   r'evaluated', stderr), stderr[-3000:]
  evaluated = re.findall(r'Restoring parameters from (\S+)', stderr)
  assert evaluated and len(evaluated) == len(set(evaluated)), evaluated
  assert evaluated[-1].endswith('model.ckpt-60')
  assert re.search(r'Saving dict for global step 60:', stderr), stderr[-3000:]


def test_a_storage_outage_outlasting_the_retries_is_a_clear_resumable_error():
  """After TensorFlow's own retries give up (the messages of TF 1.15 and 2.15), the run ends with
  a message and status 75, not a traceback; other errors are left alone."""
  outage = tf.errors.AbortedError(
      None, None, "Graph execution error:\n\nDetected at node 'save/SaveV2' defined at (most "
      "recent call last):\n  File train.py, line 1\nAll 10 retry attempts failed. "
      "The last failure: Unavailable: Error executing "
      "an HTTP request: libcurl code 52 meaning 'Server returned nothing (no headers, no data)'"
      "\n\t when reading metadata of gs://bkt/run/checkpoint")
  message = run_errors.storage_outage_message(outage)
  assert message.startswith("the storage did not answer within TensorFlow's retries (All 10 ")
  assert 'run the same command again to resume' in message
  assert run_errors.storage_outage_message(tf.errors.AbortedError(None, None, 'a step')) is None
  assert run_errors.storage_outage_message(ValueError('HTTP request')) is None


def test_ctrl_c_saves_the_step_reached_like_sigterm(small_dir, tmp_path):
  """Ctrl-C (SIGINT) in the middle of training: the step in flight is saved and the run exits
  with status 75 saying it was interrupted, no KeyboardInterrupt traceback. (Its resume is the
  SIGTERM test's: the same saved checkpoint.)"""
  model_dir = str(tmp_path / 'model')
  args = _args(small_dir, model_dir, '--mode=train', '--save_checkpoints_steps=10000')
  with BackgroundRun('--train_steps=10000', *args, preexec_fn=as_in_a_terminal) as run:
    logged = run.wait_for_step(15)
    run.proc.send_signal(signal.SIGINT)
    assert run.wait() == EXIT_RESUMABLE, run.stderr[-3000:]
  saved = re.search(r'interrupted \(Ctrl-C\): the checkpoint at step (\d+) in \S+ is saved; run '
                    r'the same command again to resume', run.stderr)
  assert saved, run.stderr[-3000:]
  assert 'Ctrl-C received: stopping after the step in flight' in run.stderr
  assert 'KeyboardInterrupt' not in run.stderr and 'Traceback' not in run.stderr
  step = int(saved.group(1))
  assert step >= logged and _checkpoint_steps(model_dir) == [0, step]


def test_a_second_ctrl_c_stops_at_once(tmp_path):
  """A step that does not end (a training phase that sleeps): the first Ctrl-C waits for it,
  the second ends the process at once with status 130 (128 + SIGINT)."""
  proc = _stuck_training(tmp_path, 60)
  proc.send_signal(signal.SIGINT)
  time.sleep(1)
  assert proc.poll() is None  # the first one waits for the step in flight
  proc.send_signal(signal.SIGINT)
  _, stderr = proc.communicate(timeout=20)
  assert proc.returncode == errors.EXIT_INTERRUPTED, stderr
  assert 'Second Ctrl-C: stopping now, without saving. No checkpoint was saved.' in stderr
  assert 'Traceback' not in stderr


def test_a_diverging_run_stops_at_the_step_keeping_the_last_finite_checkpoint(small_dir,
                                                                              tmp_path):
  """--base_learning_rate=1e9 with a checkpoint every step: the weights saved after the first
  update are already non-finite, the next loss is NaN. The run exits 2 with one line naming the
  step, the last finite loss and what to try; the non-finite checkpoint is in damaged/, and the
  newest one left has finite weights."""
  model_dir = str(tmp_path / 'model')
  proc = run_main(*_args(small_dir, model_dir, '--mode=train', '--train_steps=50',
                         '--save_checkpoints_steps=1', '--base_learning_rate=1e9'))
  assert proc.returncode == 2, proc.stderr[-3000:]
  error = [l for l in proc.stderr.splitlines() if l.startswith('error: ')]
  assert len(error) == 1 and 'Traceback' not in proc.stderr, proc.stderr[-3000:]
  assert re.match(r'error: training diverged: the loss became NaN or Inf at step \d+ \(the last '
                  r'finite loss was [\d.]+ at step \d+\)\. The newest checkpoint with finite '
                  r'weights is kept: \S+model.ckpt-\d+\. Try a lower --base_learning_rate \(this '
                  r'run: 1e\+09\), --gradient_clip_norm=1.0', error[0]), error[0]
  kept = tf.train.latest_checkpoint(model_dir)
  assert kept in error[0] and not checkpoints.nonfinite_variables(kept)
  damaged = os.listdir(os.path.join(model_dir, checkpoints.DAMAGED_DIR))
  assert any(name.endswith('.index') for name in damaged), damaged


@pytest.mark.skipif(os.geteuid() != 0, reason='mounts a small tmpfs (root, unshare --mount)')
def test_a_full_disk_stops_with_one_line_and_keeps_the_newest_intact_checkpoint(small_dir,
                                                                                 tmp_path):
  """model_dir on a 50 MiB tmpfs; each checkpoint of this CNN takes about 19 MiB: the third save
  finds the disk full. One error line names the directory and the space a checkpoint needs;
  the unfinished save is deleted; the newest checkpoint left is intact."""
  mount = str(tmp_path / 'small-disk')
  os.makedirs(mount)
  model_dir = mount + '/model'
  # Inside the mount namespace, after the run: what the tmpfs holds (it goes away with it).
  check = ('import os, sys; from trainer.run import checkpoints as c; d = sys.argv[1]; '
           'k = c.newest_intact_checkpoint(d, move_aside=False); '
           'print("AFTER", k, c.checkpoint_damage(k), [n for n in os.listdir(d) if "_temp" in n])')
  command = ('mount -t tmpfs -o size=50m none "$0" && "$@"; status=$?; '
             '"$1" -c \'%s\' "$0/model" 1>&2; exit $status' % check)
  args = _args(small_dir, model_dir, '--mode=train', '--train_steps=60',
               '--save_checkpoints_steps=10')
  proc = subprocess.run(['unshare', '--mount', 'sh', '-c', command, mount, sys.executable, '-m',
                         'trainer.main'] + main_args(args), cwd=REPO, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, universal_newlines=True, timeout=600)
  assert proc.returncode == 2, proc.stderr[-3000:]
  error = [l for l in proc.stderr.splitlines() if l.startswith('error: ')]
  assert len(error) == 1 and 'Traceback' not in proc.stderr, proc.stderr[-3000:]
  assert re.match(r'error: the disk of --model_dir=%s is full \(no space left on device\)\. Each '
                  r'checkpoint of this network takes 1\d\.\d MiB.* Free at least \d+\.\d MiB there '
                  r'\([\d.]+ MiB are free now\), or choose another --model_dir; then run the same '
                  r'command again: it resumes from the newest intact checkpoint, step (10|20), '
                  r'which is kept\.' % re.escape(model_dir), error[0]), error[0]
  after = re.search(r'^AFTER (\S+) (\S+) (.*)$', proc.stderr, re.MULTILINE)
  assert after, proc.stderr[-3000:]
  assert after.group(1).endswith(error[0].split('step ')[-1].split(',')[0])  # the step named
  assert after.group(2) == 'None' and after.group(3) == '[]', after.group(0)  # intact, no temp
