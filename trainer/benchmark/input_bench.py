"""`python -m trainer.benchmark input`: examples/sec of the training input_fn alone (read, decode,
augment, batch) on real TFRecords, with no model; optionally cut after each stage of the
pipeline to show where the time goes."""

import time

import tensorflow.compat.v1 as tf

from trainer.benchmark import reference_input
from trainer.benchmark import report
from trainer.benchmark import timing
from trainer.data import input_fn as input_fn_lib
from trainer.data import preprocessing
from trainer.data import records


def _dataset_rates(dataset, batch_size, windows):
  """Examples/sec per window of producing `dataset`'s batches in the graph (nothing is copied
  back to Python)."""
  with tf.Graph().as_default():
    produce = tf.group(tf.nest.flatten(tf.data.make_one_shot_iterator(dataset()).get_next()))
    with tf.Session() as sess:
      times = []
      for _ in range(windows.total_steps):
        sess.run(produce)
        times.append(time.perf_counter())
  return windows.rates(times, batch_size)


def input_rates(data, batch_size, windows):
  """Examples/sec per window of the training input_fn alone."""
  return _dataset_rates(
      lambda: input_fn_lib.input_fn_builder(data, is_training=True)({'batch_size': batch_size}),
      batch_size, windows)


def _window_rate(make_dataset, batch_size, warmup_steps, steps):
  """Examples/sec of `steps` batches of the dataset `make_dataset()` builds, in a graph and
  session of their own, after `warmup_steps` untimed batches. The session ends with the dataset
  read to its end (a take), so no background thread of it survives into the next window."""
  with tf.Graph().as_default():
    dataset = make_dataset().take(warmup_steps + steps + 1)
    produce = tf.group(tf.nest.flatten(tf.data.make_one_shot_iterator(dataset).get_next()))
    with tf.Session() as sess:
      for _ in range(warmup_steps):
        sess.run(produce)
      start = time.perf_counter()
      for _ in range(steps):
        sess.run(produce)
      seconds = time.perf_counter() - start
      try:
        while True:
          sess.run(produce)
      except tf.errors.OutOfRangeError:
        pass
  return steps * batch_size / seconds


def reference_rates(data, batch_size, windows, reference_path):
  """Examples/sec of this project's training input_fn and of the Cloud TPU reference's
  (`reference_input`), side by side over the same records: alternating windows (A B, B A,
  A B, ...), so that a drift of the machine's speed costs both the same. Each window builds its
  pipeline afresh and warms it up for `windows.warmup_steps` batches: a pipeline left idle
  between its windows would otherwise fill its prefetch buffers on the other's time.

  Returns:
    {'project': [rates], 'reference': [rates], 'ratio': [project / reference per pair]}.
  """
  make = {
      'project': lambda: input_fn_lib.input_fn_builder(data, is_training=True)(
          {'batch_size': batch_size}),
      'reference': lambda: reference_input.reference_train_dataset(
          reference_path, data.data_dir, data.image_size, batch_size),
  }
  rates = {'project': [], 'reference': []}
  for pair in range(windows.windows):
    for name in (('project', 'reference') if pair % 2 == 0 else ('reference', 'project')):
      rates[name].append(_window_rate(make[name], batch_size, windows.warmup_steps,
                                      windows.steps_per_window))
  rates['ratio'] = [a / b for a, b in zip(rates['project'], rates['reference'])]
  return rates


def input_stage_rates(data, batch_size, windows):
  """Where the input pipeline's time goes: the same records, shuffle and parallel map cut after
  each stage of a JPEG 'distorted_bbox' training example. Each stage's map returns a small value
  that needs the stage's work (one pixel of its output)."""
  autotune = tf.data.experimental.AUTOTUNE

  def shuffled_records():
    dataset = records.record_dataset(data.file_pattern(True), True, seed=0)
    dataset = dataset.map(lambda r: records.parse_image_record(data, r),
                          num_parallel_calls=autotune)
    return dataset.shuffle(1024, seed=0).repeat().enumerate().map(
        lambda index, element: (input_fn_lib.example_seed(0, index),) + element)

  def stage(fn):
    return lambda: input_fn_lib.with_host_options(shuffled_records().map(
        fn, num_parallel_calls=autotune).batch(batch_size, drop_remainder=True).prefetch(autotune))

  def window(encoded, seed):
    begin, size = preprocessing.distorted_bbox(tf.image.extract_jpeg_shape(encoded), seed)
    return tf.stack([begin[0], begin[1], size[0], size[1]])

  stages = [
      ('read, parse, shuffle', stage(lambda seed, encoded, label: label)),
      ('+ decode the whole JPEG', stage(
          lambda seed, encoded, label: tf.io.decode_jpeg(encoded, channels=3)[0, 0, 0])),
      ('+ decode the crop window only', stage(
          lambda seed, encoded, label: tf.image.decode_and_crop_jpeg(
              encoded, window(encoded, seed), channels=3)[0, 0, 0])),
      ('+ resize the crop to %d (float32)' % data.image_size, stage(
          lambda seed, encoded, label: preprocessing.decode_distorted_bbox_crop(
              encoded, data.image_size, seed)[0, 0, 0])),
      ('whole input_fn (+ round to uint8, flip, batch)',
       lambda: input_fn_lib.input_fn_builder(data, is_training=True)(
           {'batch_size': batch_size})),
  ]
  return [(name, _dataset_rates(make, batch_size, windows)) for name, make in stages]


def bench_input(data, batch_size, windows, input_stages=False, output=None, reference=None):
  """Runs the input benchmark on `data` (a `trainer.data.data_config.DataConfig` of real
  TFRecords) and writes its record; with `input_stages` also times each stage of a JPEG
  'distorted_bbox' training example; with `reference` (a tensorflow/tpu r1.15 checkout) also
  times the Cloud TPU reference's input beside this project's (`reference_rates`). Returns the
  record (dict)."""
  if reference:
    reference_input.check_reference(reference, data)  # before any timing
  rates = input_rates(data, batch_size, windows)
  cores = report.runtime_facts()['usable_cores']
  measurements = {'examples_per_sec': timing.summarize(rates),
                  'examples_per_sec_per_core': timing.summarize([r / cores for r in rates])}
  details = dict(windows.as_record(), data_dir=data.data_dir, image_size=data.image_size,
                 batch_size=batch_size, train_crop=data.train_crop, random_flip=data.random_flip,
                 color_distortion=data.color_distortion, cache_decoded=data.cache_decoded,
                 num_train_examples=data.num_train_examples)
  rows = [['training input_fn', report.fmt(measurements['examples_per_sec']),
           report.fmt(measurements['examples_per_sec_per_core'])]]
  if reference:
    side_by_side = reference_rates(data, batch_size, windows, reference)
    measurements['side_by_side'] = {k: timing.summarize(v) for k, v in side_by_side.items()}
    details['reference'] = reference
    for name in ('project', 'reference', 'ratio'):
      digits = 2 if name == 'ratio' else 1
      rows.append(['side by side: ' + name,
                   report.fmt(measurements['side_by_side'][name], digits=digits),
                   '' if name == 'ratio' else report.fmt(timing.summarize(
                       [r / cores for r in side_by_side[name]]))])
  if input_stages:
    measurements['stages'] = []
    for name, stage_rates in input_stage_rates(data, batch_size, windows):
      summary = timing.summarize(stage_rates)
      # Core-microseconds per example: what each stage adds is the difference to the one above.
      summary.update(stage=name, core_microseconds_per_example=1e6 * cores / summary['median'])
      measurements['stages'].append(summary)
      rows.append([name, report.fmt(summary), '%.0f core-us/example'
                   % summary['core_microseconds_per_example']])
  return report.write_record('input', details, measurements, rows,
                             ['what', 'examples/sec median (min-max)', 'per core'], output)
