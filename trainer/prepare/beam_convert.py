"""The conversion engine of `trainer.prepare` for image files: an Apache Beam pipeline that turns
planned shards of (file, label) into ImageNet-schema TFRecord shards and dataset.json.

    driver:  list the files -> plan the shards (training order shuffled with a fixed seed, equal
             contiguous runs) -> write the plan as JSON lines under output_dir/.prepare-plan/
    Beam:    read the plan -> Reshuffle (spread shards over workers) -> WriteShard (read, decode,
             repair, write one shard) -> combine the shards' summaries -> write dataset.json

One shard is one unit of work and streams its images, IMAGES_PER_CALL at a time, so a worker's
memory does not grow with the data (Beam's own fixed-shard sinks group every record by shard first,
which the local runners hold in memory). A shard is written under a temporary name and renamed when
complete, and dataset.json is written last, after every shard: a failed or repeated run never leaves
a shard or a dataset that looks complete. The plan travels as files, not inside the job graph,
because the paths of ImageNet's 1.28 M images exceed what Dataflow accepts in a job request.

Runs on Beam's DirectRunner (local processes) or DataflowRunner; docs/data.md has the Dataflow
command.
"""

import collections
import json
import os
import random
import re
import uuid

from absl import logging
import apache_beam as beam
from apache_beam.options import pipeline_options
import numpy as np
import tensorflow.compat.v1 as tf

from trainer.data import dataset_json
from trainer.data import records
from trainer.data import shards
from trainer.errors import PipelineError
from trainer.prepare import beam_job
from trainer.prepare import image_coder
from trainer.storage import lease
from trainer.storage import staged
from trainer.storage import writer_token

PLAN_DIR = shards.PLAN_DIR
SHARDS_PER_PLAN_FILE = 64
# Images read and checked per session call (ImageCoder.convert_many); about 3.5 MB of ImageNet
# JPEGs held at a time per worker.
IMAGES_PER_CALL = 32
# How a worker's error appears in the text of the exception a runner raises (pipeline_error).
_WORKER_ERROR = re.compile(r'\b(?:PipelineError|LeaseLost): ')

# One image to convert: where its bytes are, its label as stored, its class name (synset) and the
# name recorded as image/filename.
Item = collections.namedtuple('Item', ['source', 'label', 'synset', 'filename'])


def plan_shards(items, split, num_shards, shuffle_seed=None):
  """Deals `items` (a list of Item) into at most `num_shards` contiguous runs of (almost) equal
  size, shuffled first with random.Random(shuffle_seed) when it is not None (training data:
  every shard then mixes the classes). Returns a list of shard dicts: split, index, num_shards,
  items (Items; lists once the plan has been through JSON)."""
  items = list(items)
  if shuffle_seed is not None:
    random.Random(shuffle_seed).shuffle(items)
  runs = shards.shard_bounds(len(items), num_shards)
  # Slices share the Item objects: the driver holds each file's bookkeeping once.
  return [{'split': split, 'index': i, 'num_shards': len(runs), 'items': items[start:end]}
          for i, (start, end) in enumerate(runs)]


def existing_output(output_dir):
  """The shards, temporaries, dataset.json and plan an earlier run left in `output_dir`
  (sorted paths; `trainer.data.shards.is_conversion_output`); other files there are not the
  converter's and are left alone."""
  return shards.existing_conversion(output_dir)


def prepare_output_dir(output_dir, overwrite):
  """Creates `output_dir`; refuses one holding an earlier conversion unless `overwrite`, which
  then deletes only that conversion's files (`trainer.data.shards.prepare_output_dir`).

  Raises:
    PipelineError: output_dir holds shards or dataset.json and overwrite is False.
  """
  shards.prepare_output_dir(output_dir, overwrite)


def write_plan(output_dir, shard_plans):
  """Writes the shard dicts as JSON lines, SHARDS_PER_PLAN_FILE per file, under
  output_dir/PLAN_DIR; returns the files' paths."""
  plan_dir = '%s/%s' % (output_dir.rstrip('/'), PLAN_DIR)
  tf.io.gfile.makedirs(plan_dir)
  paths = []
  for start in range(0, len(shard_plans), SHARDS_PER_PLAN_FILE):
    path = '%s/plan-%05d.jsonl' % (plan_dir, len(paths))
    with tf.io.gfile.GFile(path, 'w') as f:
      for shard in shard_plans[start:start + SHARDS_PER_PLAN_FILE]:
        f.write(json.dumps(shard) + '\n')
    paths.append(path)
  return paths


def read_plan(path):
  """Yields the shard dicts of one plan file."""
  with tf.io.gfile.GFile(path) as f:
    for line in f:
      yield json.loads(line)


def empty_summary():
  """What WriteShard reports per shard, and the combined report: examples per split, the
  training images' channel sums (0-255 scale), the image sizes seen, repairs and skipped files."""
  return {'count': {}, 'sums': [[0.0] * 3, [0.0] * 3], 'pixels': 0, 'heights': {}, 'widths': {},
          'repaired': {}, 'skipped': [], 'unreadable': []}


def merge_summaries(summaries):
  """Adds up summaries (an iterable of empty_summary() dicts); associative, for CombineGlobally."""
  total = empty_summary()
  for s in summaries:
    for key in ('count', 'heights', 'widths', 'repaired'):
      for k, v in s[key].items():
        total[key][k] = total[key].get(k, 0) + v
    total['sums'] = (np.asarray(total['sums']) + np.asarray(s['sums'])).tolist()
    total['pixels'] += s['pixels']
    total['skipped'] += s['skipped']
    total['unreadable'] += s['unreadable']
  return total


def _report_problem(output_dir, message):
  """Records why the conversion fails, beside the plan, for the driver to say (`problems_found`):
  raised in a worker, the error would come with Beam's traceback of it."""
  folder = '%s/%s' % (output_dir.rstrip('/'), PLAN_DIR)
  tf.io.gfile.makedirs(folder)
  path = '%s/problem-%s.txt' % (folder, uuid.uuid4().hex[:12])
  with tf.io.gfile.GFile(path, 'w') as f:
    f.write(message + '\n')


def problems_found(output_dir):
  """The messages `_report_problem` left in `output_dir`, sorted; [] when there are none."""
  folder = '%s/%s' % (output_dir.rstrip('/'), PLAN_DIR)
  if not tf.io.gfile.isdir(folder):  # (TF 1.15's glob fails on a missing folder)
    return []
  found = []
  for path in sorted(tf.io.gfile.glob(folder + '/problem-*.txt')):
    with tf.io.gfile.GFile(path) as f:
      found.append(f.read().strip())
  return found


class WriteShard(beam.DoFn):
  """Converts the images of one planned shard and writes them as <split>-NNNNN-of-NNNNN in
  output_dir, under a temporary name renamed when complete; yields the shard's summary.

  An image that does not decode, with skip_unreadable off, ends its shard unwritten and is
  reported in a file beside the plan (`problems_found`); shards not yet started then stop too.
  It is not raised: a worker's exception makes Beam print its traceback before the driver's
  error line, and the driver (`convert`) words the error from that file instead.
  """

  def __init__(self, output_dir, jpeg_only, skip_unreadable, with_stats, writer=None):
    """writer: the lease holder's writer_token.WriterToken, checked before a shard is renamed
    into place (None: no lease)."""
    super(WriteShard, self).__init__()
    self._output_dir = output_dir.rstrip('/')
    self._writer = writer
    self._jpeg_only = jpeg_only
    self._skip_unreadable = skip_unreadable
    self._with_stats = with_stats
    self._coder = None

  def setup(self):
    self._coder = image_coder.ImageCoder()

  def teardown(self):
    if self._coder is not None:
      self._coder.close()

  def process(self, shard):
    summary = empty_summary()
    if not self._skip_unreadable and problems_found(self._output_dir):
      yield summary  # another shard found an unreadable image: the conversion fails anyway
      return
    split = shard['split']
    final = '%s/%s' % (self._output_dir, shards.shard_name(split, shard['index'],
                                                           shard['num_shards']))
    # Hidden: a worker killed mid-shard leaves a file no train-* pattern reads (removed when
    # dataset.json is written).
    temporary = staged.aside_name(final)
    heights, widths = collections.Counter(), collections.Counter()
    items = [Item(*item) for item in shard['items']]
    try:
      with tf.io.TFRecordWriter(temporary) as writer:
        for start in range(0, len(items), IMAGES_PER_CALL):
          chunk = items[start:start + IMAGES_PER_CALL]
          for item, converted in zip(chunk, self._coder.convert_many(
              [self._read(item) for item in chunk], self._jpeg_only)):
            example = self._example(item, split, converted, summary)
            if example is not None:
              writer.write(example)
              heights[converted[2]] += 1
              widths[converted[3]] += 1
          if summary['unreadable']:
            break
      if not summary['unreadable']:
        if self._writer:  # LeaseLost once another conversion holds output_dir
          self._writer.check(final)
        tf.io.gfile.rename(temporary, final, overwrite=True)
    finally:
      if tf.io.gfile.exists(temporary):
        tf.io.gfile.remove(temporary)
    summary['heights'], summary['widths'] = dict(heights), dict(widths)
    logging.vlog(1, 'wrote %s (%d examples)', final, summary['count'].get(split, 0))
    yield summary

  @staticmethod
  def _read(item):
    with tf.io.gfile.GFile(item.source, 'rb') as f:
      return f.read()

  def _example(self, item, split, converted, summary):
    """The serialized example of `item` from its convert_many() result, or None when it is
    skipped as unreadable; counts it in `summary`."""
    if isinstance(converted, image_coder.UnreadableImage):
      reason = str(converted)
      if not self._skip_unreadable:
        message = ('%s is not a readable image: %s. Remove or replace it, or pass '
                   '--skip_unreadable to leave it out (dataset.json then lists it).'
                   % (item.source, reason))
        _report_problem(self._output_dir, message)
        summary['unreadable'].append(item.source)
        return None
      logging.warning('skipping unreadable %s: %s', item.source, reason)
      summary['skipped'].append([item.source, reason])
      return None
    encoded, image_format, height, width, channels, repair = converted
    if self._with_stats and split == shards.TRAIN_SPLIT:
      summary['sums'] = (np.asarray(summary['sums']) +
                         self._coder.channel_sums(encoded)).tolist()
      summary['pixels'] += height * width
    if repair:
      logging.info('re-encoded %s as an RGB JPEG (%s)', item.source, repair)
      summary['repaired'][repair] = summary['repaired'].get(repair, 0) + 1
    summary['count'][split] = summary['count'].get(split, 0) + 1
    return records.image_example(encoded, image_format, height, width, channels, item.label,
                                 item.synset, item.filename).SerializeToString()


def _median(counts):
  """The median of a {value: count} histogram (None when empty)."""
  total = sum(counts.values())
  if not total:
    return None
  seen = 0
  for value in sorted(counts, key=int):
    seen += counts[value]
    if 2 * seen >= total:
      return int(value)


def write_dataset_json(summary, output_dir, info, writer=None):
  """The pipeline's last step: completes `info` (the dataset.json dict without the figures
  only the conversion knows) from the combined summary, writes dataset.json and removes the
  plan. Returns the written dict; None, writing nothing, when the conversion failed
  (`problems_found` says why). writer: as WriteShard's (LeaseLost, nothing written or removed,
  once another conversion holds output_dir)."""
  if summary['unreadable'] or problems_found(output_dir):  # (a retried shard reports none)
    return None
  empty = [split for split in (shards.TRAIN_SPLIT, shards.EVAL_SPLIT)
           if not summary['count'].get(split)]
  if empty:
    _report_problem(output_dir, 'no readable image in the %s split (%d skipped as unreadable); '
                    'dataset.json was not written.' % (' and '.join(empty),
                                                       len(summary['skipped'])))
    return None
  if writer:
    writer.check(dataset_json.path_of(output_dir))
  # Files of workers killed mid-shard; the lease's own are its heartbeat's.
  staged.remove_leftovers(output_dir, but=(lease.LEASE_FILE,))
  info = dict(info)
  info['num_train_examples'] = summary['count'].get(shards.TRAIN_SPLIT, 0)
  info['num_eval_examples'] = summary['count'].get(shards.EVAL_SPLIT, 0)
  info['image_height'] = _median(summary['heights'])
  info['image_width'] = _median(summary['widths'])
  if 'mean_rgb' not in info and summary['pixels']:
    sums = np.asarray(summary['sums']) / summary['pixels']
    info['mean_rgb'] = sums[0].tolist()
    info['stddev_rgb'] = np.sqrt(np.maximum(sums[1] - sums[0] ** 2, 0)).tolist()
  info['repaired'] = summary['repaired']
  info['num_skipped'] = len(summary['skipped'])
  info['skipped_unreadable'] = sorted(summary['skipped'])
  dataset_json.write(output_dir, info)
  plan_dir = '%s/%s' % (output_dir.rstrip('/'), PLAN_DIR)
  if tf.io.gfile.exists(plan_dir):
    tf.io.gfile.rmtree(plan_dir)
  return info


def pipeline_options_for(runner='DirectRunner', direct_num_workers=0, beam_args=()):
  """PipelineOptions: DirectRunner with `direct_num_workers` processes (0: one per core;
  1: in this process), or DataflowRunner and any other Beam option given in `beam_args`
  (a list of '--name=value' strings, e.g. --project, --region, --temp_location,
  --requirements_file, --setup_file)."""
  args = ['--runner=%s' % runner] + list(beam_args)
  if runner == 'DirectRunner':
    workers = direct_num_workers or len(os.sched_getaffinity(0))  # the cores this may use
    args += ['--direct_num_workers=%d' % workers,
             '--direct_running_mode=%s' % ('multi_processing' if workers > 1 else 'in_memory')]
  return pipeline_options.PipelineOptions(args)


def pipeline_error(error):
  """The PipelineError inside an exception a Beam runner raised (its text is all a runner keeps
  of a worker's exception), or None."""
  text = str(error)
  markers = list(_WORKER_ERROR.finditer(text))
  if isinstance(error, PipelineError):
    message = text
  elif markers:
    message = text[markers[-1].end():].strip()
  else:
    return None
  # A runner appends its own context ("[while running ...]") after the worker's message.
  return PipelineError(message.split(' [while running')[0].splitlines()[0])


def convert(splits, output_dir, info, num_shards, options, jpeg_only=False,
            skip_unreadable=False, with_stats=False, shuffle_seed=0, overwrite=False, lease=None):
  """Converts image files into TFRecord shards and dataset.json with one Beam pipeline.

  Args:
    splits: {'train': [Item], 'validation': [Item]} (shards.TRAIN_SPLIT / EVAL_SPLIT).
    output_dir: local or gs:// directory.
    info: the dataset.json dict without the counts and image size (class_names, label_offset,
      ...); mean_rgb/stddev_rgb computed from the training images when absent and with_stats.
    num_shards: {split: number of shards} (fewer when a split has fewer images).
    options: PipelineOptions (pipeline_options_for).
    jpeg_only: re-encode everything that is not a 3-component JPEG (ImageNet's schema).
    skip_unreadable: leave out files that do not decode (listed in dataset.json) instead of
      failing.
    with_stats: compute the training images' per-channel mean and stddev.
    shuffle_seed: seed of the training examples' order across shards.
    overwrite: replace an earlier conversion in output_dir instead of refusing.
    lease: the held trainer.storage.lease.Lease of output_dir, or None: the workers check its
      token before each shard and dataset.json, and a Dataflow job's id is recorded in it while
      the job runs (a taker refuses meanwhile).

  Returns:
    The dataset.json dict written.

  Raises:
    PipelineError: output_dir holds a conversion (without overwrite), an unreadable image
      (without skip_unreadable), named, or local paths for DataflowRunner.
  """
  if options.view_as(pipeline_options.StandardOptions).runner == 'DataflowRunner':
    local = [p for p in [output_dir] + [items[0].source for items in splits.values() if items]
             if not p.startswith('gs://')]
    if local:
      raise PipelineError('DataflowRunner workers cannot read or write this machine\'s files '
                          '(%s): put --source_dir and --output_dir on gs://.' % local[0])
  prepare_output_dir(output_dir, overwrite)
  shard_plans = []
  for split, items in splits.items():
    shard_plans += plan_shards(items, split, num_shards[split],
                               shuffle_seed if split == shards.TRAIN_SPLIT else None)
  plan_paths = write_plan(output_dir, shard_plans)
  logging.info('converting %s images in %d shards to %s',
               ' + '.join('%d %s' % (len(v), k) for k, v in splits.items()), len(shard_plans),
               output_dir)
  writer = (writer_token.WriterToken(lease.directory, lease.token, lease.flag) if lease
            else None)
  pipeline = beam.Pipeline(options=options)
  _ = (pipeline
       | 'Plan' >> beam.Create(plan_paths)
       | 'ReadPlan' >> beam.FlatMap(read_plan)
       | 'Spread' >> beam.Reshuffle()
       | 'WriteShards' >> beam.ParDo(WriteShard(output_dir, jpeg_only, skip_unreadable,
                                                with_stats, writer))
       | 'Combine' >> beam.CombineGlobally(merge_summaries)
       | 'WriteDatasetJson' >> beam.Map(write_dataset_json, output_dir, info, writer))
  try:
    beam_job.run_to_end(pipeline, options, lease)
  except Exception as e:  # pylint: disable=broad-except
    error = pipeline_error(e)
    if error is None:
      raise
    raise error
  written = dataset_json.read(output_dir)
  problems = problems_found(output_dir)
  if problems:
    raise PipelineError(problems[0] + (' (%d more unreadable images were found.)'
                                       % (len(problems) - 1) if len(problems) > 1 else ''))
  if written is None:
    raise PipelineError('the pipeline finished without writing %s/%s; see its log.'
                        % (output_dir, dataset_json.FILENAME))
  return written
