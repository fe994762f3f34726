"""Runs a pipeline command and kills it at a chosen point of its work, for the random-kill harness
(tests/test_kill_anywhere.py).

  python tests/kill_at.py POINT:N:SIGNAL MODULE [ARGS...]     (or `none` for no kill)

runs `python -m MODULE ARGS` in this process and, the N-th time the program reaches POINT, sends
itself SIGNAL: KILL (kill -9: nothing more runs) or TERM (the command's own preemption handling
goes on from there). The points, each reached from the pipeline's real code paths:

  step        after a training step of trainer.main (its progress hook)
  data        inside a Saver's data write (a checkpoint's, or the SavedModel export's variables):
              a thread watching the save's folder kills the process (KILL) once TensorFlow's
              save op has created its temporary folder (PREFIX_temp..., whose files it merges
              into the checkpoint's); a save that ends before the watcher saw it is killed right
              after (the message says which)
  checkpoint  inside a checkpoint save: the Saver has written the new checkpoint's files and is
              about to name it in the `checkpoint` state file (TensorFlow's write, or on gs://
              the state fence's: trainer/storage/state_fence.py)
  results     on gs://, before results.json is written through its fence (the lease was checked)
  best        before best/checkpoint is written (on gs:// through its fence), the lease checked
              and the new best checkpoint copied into best/; best.json comes next
  rename      before any staged file is renamed into place (shards, dataset.json, results.json,
              Keras checkpoints, model.keras: `trainer.storage.gfile.rename`, tf.io.gfile.rename)
  export      inside a SavedModel export: variables written, saved_model.pb not yet
  keras_step  after a logged period of trainer.train_keras (before its checkpoint)
  keras_checkpoint  on gs://, inside a checkpoint of trainer.train_keras: its weights written
              and the lease checked, checkpoint.json not yet written through its fence
  keras_model on gs://, before trainer.train_keras writes model.keras through its fence (the
              lease checked)
"""

import importlib
import os
import runpy
import signal
import sys
import threading
import traceback


def _patch(module_name, owner, name, point, state, counted=lambda *args, **kwargs: True):
  """Wraps `owner.name` (owner: a module, or a class of `module_name`; or the object itself) to
  count the calls `counted` (given the call's arguments) accepts."""
  module = (importlib.import_module(module_name) if isinstance(module_name, str)
            else module_name)
  target = getattr(module, owner) if owner else module
  original = getattr(target, name)

  def wrapped(*args, **kwargs):
    if counted(*args, **kwargs):
      state['calls'] += 1
      if state['calls'] == state['n']:
        _kill(point, state, 'in', stack=True)
    return original(*args, **kwargs)
  setattr(target, name, wrapped)


def _fence_of(file_name):
  """A `counted` for StateFence.write: the writes of the fence on `file_name` (model_dir-relative,
  e.g. 'checkpoint', 'best/best.json')."""
  return lambda fence, text: fence.name == file_name


def _kill(point, state, where, stack=False):
  sys.stderr.write('kill_at: %s #%d: SIG%s, %s\n' % (point, state['n'], state['signal'], where))
  if stack:
    traceback.print_stack(limit=7)
  sys.stderr.flush()
  os.kill(os.getpid(), getattr(signal, 'SIG' + state['signal']))


def _patch_data_write(state):
  """Wraps Saver.save: its n-th call is killed while the save op writes (see `data` above)."""
  from tensorflow.python.training import saver  # pylint: disable=g-import-not-at-top
  original = saver.Saver.save

  def save(self, sess, save_path, *args, **kwargs):
    state['calls'] += 1
    if state['calls'] != state['n']:
      return original(self, sess, save_path, *args, **kwargs)
    folder, done = os.path.dirname(save_path) or '.', threading.Event()

    def watch():  # os.listdir releases the GIL: the save op's thread runs on
      while not done.is_set():
        temporary = [name for name in os.listdir(folder) if '_temp' in name]
        if temporary:
          _kill('data', state, 'inside the data write (%s exists)' % temporary[0])
          return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    result = original(self, sess, save_path, *args, **kwargs)
    done.set()
    watcher.join()
    _kill('data', state, 'after the data write (the watcher did not see it)')
    return result
  saver.Saver.save = save


def install(point, n, signal_name):
  state = {'calls': 0, 'n': n, 'signal': signal_name}
  if point == 'step':
    _patch('trainer.run.hooks', 'ProgressHook', 'after_run', point, state)
  elif point == 'data':
    _patch_data_write(dict(state, signal='KILL'))  # a SIGTERM waits for the main thread
  elif point == 'checkpoint':
    try:
      _patch('tensorflow.python.checkpoint.checkpoint_management', None,
             'update_checkpoint_state_internal', point, state)
    except ImportError:  # TF 1.15
      _patch('tensorflow.python.training.checkpoint_management', None,
             'update_checkpoint_state_internal', point, state)
    _patch('trainer.storage.state_fence', 'StateFence', 'write', point, state,
           _fence_of('checkpoint'))
  elif point == 'results':
    _patch('trainer.storage.state_fence', 'StateFence', 'write', point, state,
           _fence_of('results.json'))
  elif point == 'best':
    _patch('trainer.storage.state_fence', 'StateFence', 'write', point, state,
           _fence_of('best/checkpoint'))
    import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
    # Its unfenced write (local disk; gs:// before the fence), as trainer.run.best_checkpoint
    # makes it.
    _patch(tf.train, None, 'update_checkpoint_state', point, state,
           lambda save_dir, *args, **kwargs: save_dir.rstrip('/').endswith('/best'))
  elif point == 'rename':
    _patch('trainer.storage.gfile', None, 'rename', point, state)
    try:
      import tensorflow as tf  # pylint: disable=g-import-not-at-top
    except ImportError:
      tf = None
    if tf is not None:  # tf.io.gfile and tf.compat.v1.io.gfile are two module objects
      _patch(tf.io.gfile, None, 'rename', point, state)
      _patch(tf.compat.v1.io.gfile, None, 'rename', point, state)
  elif point == 'export':
    _patch('tensorflow.python.saved_model.builder_impl', '_SavedModelBuilder', 'save', point,
           state)
  elif point == 'keras_step':
    _patch('trainer.keras_run.progress', 'Progress', 'on_epoch_end', point, state)
  elif point == 'keras_checkpoint':
    _patch('trainer.storage.state_fence', 'StateFence', 'write', point, state,
           _fence_of('checkpoints/checkpoint.json'))
  elif point == 'keras_model':
    _patch('trainer.storage.state_fence', 'StateFence', 'write', point, state,
           _fence_of('model.keras'))
  else:
    raise SystemExit('kill_at: unknown point %r' % point)


def main():
  import trainer  # noqa: F401  # pylint: disable=g-import-not-at-top,unused-import  # host threads before TF
  spec, module = sys.argv[1], sys.argv[2]
  if spec != 'none':
    point, n, signal_name = spec.split(':')
    install(point, int(n), signal_name)
  sys.argv = [module] + sys.argv[3:]
  # As `python -m` does: the current directory first on sys.path (a user's --network or
  # --model_fn module is imported from there).
  sys.path.insert(0, os.getcwd())
  runpy.run_module(module, run_name='__main__', alter_sys=True)


if __name__ == '__main__':
  main()
