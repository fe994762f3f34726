"""Training progress in the logs (step, loss, learning rate, examples/sec and ETA) and in
TensorBoard (the first training batch's input images, the run's hyperparameters)."""

import math
import time

from absl import logging
import tensorflow.compat.v1 as tf

from trainer.models import model_fn as model_fn_lib
from trainer.models import optimization


class ProgressHook(tf.train.SessionRunHook):
  """Logs progress every `every_n_secs` and keeps the run's training throughput.

  Works on TPU and CPU/GPU: the global step lives on the host, the learning rate is recomputed on
  the host from the same schedule, and the loss is read where the model_fn exposed it (CPU/GPU;
  on TPU, TPUEstimator logs the loss and examples/sec itself after each iterations_per_loop:
  `trainer.run.estimator` sets its log_step_count_steps).

  Attributes:
    measured_steps, measured_seconds: steps and wall time since the first step of this hook's
      session (the first step, which includes graph optimisation and input warm-up, is excluded).
  """

  def __init__(self, model_config, max_steps, every_n_secs=30.0):
    """max_steps: the run's total train_steps (for the ETA), not the end of this train() call."""
    self._config = model_config
    self._max_steps = max_steps
    self._every_n_secs = every_n_secs
    self._batch_size = model_config.train_batch_size
    self._start = None      # (time, step) after the first step
    self._last_log = None   # (time, step) of the last log line
    self._latest = None     # (time, step, fetched values) of the latest step
    self.last_finite_loss = None  # (step, loss) of the latest step whose loss was finite
    self.measured_steps = 0
    self.measured_seconds = 0.0

  def begin(self):
    self._global_step = tf.train.get_global_step()
    losses = tf.get_collection(model_fn_lib.TRAIN_LOSS_COLLECTION)
    self._fetches = {'step': self._global_step}
    if not self._config.is_model_fn:  # a legacy model_fn's schedule is its own
      self._fetches['lr'] = optimization.learning_rate_schedule(self._config, self._global_step)
    if losses:
      self._fetches['loss'] = losses[0]

  def before_run(self, run_context):
    return tf.train.SessionRunArgs(self._fetches)

  def after_run(self, run_context, run_values):
    now = time.time()
    values = run_values.results
    step = int(values['step'])
    self._latest = (now, step, values)
    if 'loss' in values and math.isfinite(values['loss']):
      self.last_finite_loss = (step, float(values['loss']))
    if self._start is None:
      self._start = self._last_log = (now, step)
      return
    self.measured_steps = step - self._start[1]
    self.measured_seconds = now - self._start[0]
    if now - self._last_log[0] >= self._every_n_secs:
      self._log(now, step, values)
      self._last_log = (now, step)

  @property
  def latest_step(self):
    """The global step fetched with the latest training step, or None before the first."""
    return self._latest[1] if self._latest else None

  def end(self, session):
    """Always logs the last step, so even a run shorter than every_n_secs reports progress."""
    if self._latest is not None and self._latest[1] != self._last_log[1]:
      self._log(*self._latest)

  def _log(self, now, step, values):
    last_time, last_step = self._last_log
    rate = (step - last_step) * self._batch_size / max(now - last_time, 1e-9)
    steps_per_sec = self.measured_steps / max(self.measured_seconds, 1e-9)
    eta = (self._max_steps - step) / steps_per_sec if steps_per_sec > 0 else float('inf')
    loss = ' loss %.4f' % values['loss'] if 'loss' in values else ''
    lr = ' lr %.5f' % values['lr'] if 'lr' in values else ''
    logging.info('step %d/%d%s%s  %.1f examples/sec  ETA %s', step, self._max_steps, loss, lr,
                 rate, _format_seconds(eta))


class LocalStepCounter(tf.train.SessionRunHook):
  """Counts the train steps this process ran (in between-graph training every worker advances the
  shared global_step; this is its own share)."""

  def __init__(self):
    self.steps = 0

  def after_run(self, run_context, run_values):
    self.steps += 1


class TraceHook(tf.train.SessionRunHook):
  """Writes a full TensorFlow trace of each step whose global step (as the step starts) lies in
  [start, end) to <output_dir>/timeline-<step>.json, in the Chrome trace format (open it in
  chrome://tracing or https://ui.perfetto.dev): every op, its device, thread and duration."""

  def __init__(self, output_dir, start, end):
    self._output_dir = output_dir
    self._start, self._end = start, end
    self._step = None
    self.written = []

  def begin(self):
    self._global_step = tf.train.get_global_step()

  def after_create_session(self, session, coord):
    self._step = int(session.run(self._global_step))

  def before_run(self, run_context):
    options = None
    if self._start <= self._step < self._end:
      options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
    return tf.train.SessionRunArgs(None, options=options)

  def after_run(self, run_context, run_values):
    if self._start <= self._step < self._end:
      from tensorflow.python.client import timeline  # the Chrome-trace writer TF's own hooks use
      path = '%s/timeline-%d.json' % (self._output_dir.rstrip('/'), self._step)
      tf.io.gfile.makedirs(self._output_dir)
      with tf.io.gfile.GFile(path, 'w') as f:
        f.write(timeline.Timeline(run_values.run_metadata.step_stats)
                .generate_chrome_trace_format())
      self.written.append(path)
      logging.info('Wrote the trace of step %d to %s', self._step, path)
    self._step += 1


class InputImagesHook(tf.train.SessionRunHook):
  """Writes a few input images of the first training step of a session to TensorBoard (tag
  `input_images/N` in output_dir), as the input pipeline fed them (after augmentation, before
  normalisation): a check that the pipeline feeds what you think. CPU/GPU only: the model_fn
  records the images there (models.model_fn.INPUT_IMAGES_COLLECTION)."""

  def __init__(self, output_dir):
    self._output_dir = output_dir
    self._images = None
    self.written = 0

  def begin(self):
    collection = tf.get_collection(model_fn_lib.INPUT_IMAGES_COLLECTION)
    self._images = collection[0] if collection else None
    self._global_step = tf.train.get_global_step()

  def before_run(self, run_context):
    if self._images is None:
      return None
    return tf.train.SessionRunArgs({'images': self._images, 'step': self._global_step})

  def after_run(self, run_context, run_values):
    if self._images is None:
      return
    self._images = None  # once per session
    values = run_values.results
    images = values['images']
    with tf.Graph().as_default(), tf.Session() as session:  # PNG-encode them off the step
      pngs = session.run(tf.map_fn(tf.image.encode_png, tf.constant(images), dtype=tf.string))
    summary = tf.Summary()
    for i, png in enumerate(pngs):
      summary.value.add(tag='input_images/%d' % i, image=tf.Summary.Image(
          encoded_image_string=png, height=images.shape[1], width=images.shape[2],
          colorspace=3))
    _write_events(self._output_dir, '.input_images', [summary], int(values['step']))
    self.written = len(summary.value)


def write_hparams(output_dir, hparams, metrics):
  """Writes the run's hyperparameters as a TensorBoard HParams summary (the HParams tab compares
  runs by them) to output_dir.

  Args:
    output_dir: the run's model_dir (local or gs://).
    hparams: dict name -> bool, int, float or str.
    metrics: (tag, group) pairs of the scalars the HParams tab shows per run, e.g.
      ('top_1_accuracy', 'eval') for model_dir/eval's.
  """
  from tensorboard.plugins.hparams import api as hp  # TensorBoard ships with TensorFlow
  config = hp.hparams_config_pb(
      hparams=[hp.HParam(name) for name in sorted(hparams)],
      metrics=[hp.Metric(tag, group=group) for tag, group in metrics])
  # TensorBoard builds its own copy of the Summary proto class: pass TensorFlow's.
  _write_events(output_dir, '.hparams', [tf.Summary.FromString(s.SerializeToString())
                                         for s in (config, hp.hparams_pb(hparams))])


def _write_events(output_dir, suffix, summaries, step=None):
  """Writes Summary protos to an events file of their own in output_dir. FileWriter needs graph
  mode (TF 2 runs eagerly outside it); the suffix keeps the file apart from the Estimator's, as
  an events file name holds only the second and the host, and a writer truncates a file of the
  same name."""
  with tf.Graph().as_default():
    writer = tf.summary.FileWriter(output_dir, filename_suffix=suffix)
    for summary in summaries:
      writer.add_summary(summary, step)
    writer.close()


def _format_seconds(seconds):
  if seconds == float('inf'):
    return '?'
  seconds = int(round(seconds))
  return '%d:%02d:%02d' % (seconds // 3600, seconds % 3600 // 60, seconds % 60)
