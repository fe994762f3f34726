"""`python -m trainer.prepare imagenet` on Apache Beam: an ILSVRC-style tree of real photos (with a
CMYK JPEG, a PNG named .JPEG and a greyscale JPEG) into the Cloud TPU schema, read back record by
record, then trained and evaluated on."""

import collections
import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from trainer.data import dataset_json
from trainer.errors import PipelineError
from trainer.prepare import beam_convert
from trainer.prepare import image_coder
from trainer.prepare import imagenet
from trainer.storage import staged

from helpers import ok
from helpers import read_records
from helpers import refused
from helpers import REPO
from helpers import results_of
from helpers import run_main
from helpers import run_prepare
from ilsvrc_tree import CMYK_FIXTURE
from ilsvrc_tree import write_ilsvrc_tree

NUM_IMAGES = 60  # 10 classes: 4 training and 2 validation images each


def _features(record):
  feature = tf.train.Example.FromString(record).features.feature
  return {k: (v.bytes_list.value or v.int64_list.value)[0] for k, v in feature.items()}


def _prepare_cli(*args):
  return run_prepare('imagenet', *args)


def _prepared(source, output, *args):
  """dataset.json of a successful one-worker conversion of `source` into `output`."""
  ok(_prepare_cli('--source_dir=' + source, '--output_dir=' + output, '--direct_num_workers=1',
                  *args))
  return dataset_json.read(output)


@pytest.fixture(scope='module')
def converted(tmp_path_factory):
  """(source tree, {file: wnid}, {quirk: file}, output dir) converted by the command line with
  its defaults: DirectRunner, one worker process per core."""
  root = tmp_path_factory.mktemp('imagenet')
  source, output = str(root / 'ILSVRC'), str(root / 'out')
  truth, quirks = write_ilsvrc_tree(source, NUM_IMAGES)
  ok(_prepare_cli('--source_dir=' + source, '--output_dir=' + output, '--train_shards=4',
                  '--validation_shards=2'))
  return source, truth, quirks, output


def test_every_image_appears_once_with_its_label(converted):
  _, truth, _, output = converted
  info = dataset_json.read(output)
  wnids = sorted(set(truth.values()))
  assert info['class_names'] == wnids and info['label_offset'] == 1
  assert info['image_size'] == 224  # what the trainer takes, not the photos' median size
  assert (info['num_train_examples'], info['num_eval_examples']) == (40, 20)
  assert sorted(os.listdir(output)) == sorted(
      ['dataset.json'] + ['train-%05d-of-00004' % i for i in range(4)] +
      ['validation-%05d-of-00002' % i for i in range(2)])
  seen = collections.Counter()
  for split in ('train', 'validation'):
    for path in sorted(tf.io.gfile.glob(os.path.join(output, split + '-*'))):
      classes = set()
      for record in read_records(path):
        f = _features(record)
        name = f['image/filename'].decode()
        seen[name] += 1
        assert f['image/class/synset'].decode() == truth[name]
        assert f['image/class/label'] == 1 + wnids.index(truth[name])
        assert (name.startswith('ILSVRC2012_val_')) == (split == 'validation')
        assert f['image/format'] == b'JPEG' and f['image/colorspace'] == b'RGB'
        assert f['image/channels'] == 3
        classes.add(truth[name])
      if split == 'train':  # shuffled across shards: no shard holds one class only
        assert len(classes) > 1, path
  assert seen == collections.Counter(truth.keys())


def test_quirks_are_re_encoded_as_rgb_jpegs(converted):
  source, _, quirks, output = converted
  assert dataset_json.read(output)['repaired'] == {'cmyk': 1, 'png': 1, 'grayscale': 1}
  by_name = {_features(r)['image/filename'].decode(): _features(r)
             for r in read_records(os.path.join(output, 'train-*'))}
  with tf.Graph().as_default(), tf.Session() as sess:
    encoded = tf.placeholder(tf.string, [])
    decode = tf.io.decode_image(encoded, channels=3, expand_animations=False)
    for quirk, name in quirks.items():
      record = by_name[name]
      assert image_coder.jpeg_components(record['image/encoded']) == 3, quirk
      image = sess.run(decode, {encoded: record['image/encoded']})
      assert image.shape == (record['image/height'], record['image/width'], 3)
      with open(os.path.join(source, 'train', 'n00000000', name), 'rb') as f:
        original = sess.run(decode, {encoded: f.read()})
      # Quality 100 without chroma subsampling: within ~2 levels of the source's pixels on
      # average (1.7 measured for the CMYK photo, whose colour conversion adds its own rounding).
      assert np.abs(image.astype(int) - original).mean() < 2.5, quirk
  cmyk = by_name[quirks['cmyk']]
  assert (cmyk['image/height'], cmyk['image/width']) == (133, 200)
  with open(CMYK_FIXTURE, 'rb') as f:
    assert image_coder.jpeg_components(f.read()) == 4


def test_trainer_trains_and_evaluates_on_the_output(converted, tmp_path):
  output = converted[3]
  model_dir = str(tmp_path / 'model')
  ok(run_main('--model=cnn', '--image_size=32', '--train_batch_size=8', '--eval_batch_size=10',
              '--train_steps=6', '--steps_per_eval=6', '--skip_host_call',
              '--data_dir=' + output, '--model_dir=' + model_dir))
  results = results_of(model_dir)
  assert results['global_step'] == 6 and results['num_eval_examples'] == 20
  assert 0.0 <= results['top_1_accuracy'] <= 1.0


def test_validation_class_folders_and_a_synsets_file(tmp_path):
  source = str(tmp_path / 'ILSVRC')
  truth, _ = write_ilsvrc_tree(source, 40, flat_validation=False, validation_per_class=1)
  synsets = tmp_path / 'synsets.txt'
  synsets.write_text(''.join(w + '\n' for w in sorted(set(truth.values())) + ['n99999999']))
  info = _prepared(source, str(tmp_path / 'out'), '--synsets=' + str(synsets),
                   '--train_shards=3', '--validation_shards=1')
  assert info['num_classes'] == 11 and info['class_names'][-1] == 'n99999999'
  assert (info['num_train_examples'], info['num_eval_examples']) == (30, 10)
  labels = {_features(r)['image/filename'].decode(): _features(r)['image/class/label']
            for r in read_records(str(tmp_path / 'out' / 'validation-*'))}
  assert labels == {n: 1 + int(w[1:]) for n, w in truth.items() if n.startswith('ILSVRC')}


def test_source_layout_errors_say_what_to_fix(tmp_path):
  source = str(tmp_path / 'ILSVRC')
  write_ilsvrc_tree(source, 40, validation_per_class=1)
  with pytest.raises(PipelineError, match='has no train/ folder'):
    imagenet.list_images(str(tmp_path))
  labels = os.path.join(source, 'synset_labels.txt')
  with open(labels) as f:
    lines = f.read().splitlines()
  with open(labels, 'w') as f:
    f.write('\n'.join(lines[:-1]) + '\n')
  with pytest.raises(PipelineError, match='has 9 lines but .* holds 10 images'):
    imagenet.list_images(source)
  with open(labels, 'w') as f:
    f.write('\n'.join(lines[:-1] + ['n12345678']) + '\n')
  with pytest.raises(PipelineError, match='names wnids that are not classes of train/'):
    imagenet.list_images(source)
  os.remove(labels)
  with pytest.raises(PipelineError, match='pass --validation_labels'):
    imagenet.list_images(source)


def test_unreadable_image_fails_naming_it_or_is_skipped_and_listed(tmp_path):
  source, output = str(tmp_path / 'ILSVRC'), str(tmp_path / 'out')
  write_ilsvrc_tree(source, 40, validation_per_class=1)
  victim = os.path.join(source, 'train', 'n00000004', sorted(os.listdir(
      os.path.join(source, 'train', 'n00000004')))[0])
  with open(victim, 'rb') as f:
    jpeg = f.read()
  with open(victim, 'wb') as f:  # a truncated download: the header is fine, the data is cut
    f.write(jpeg[:len(jpeg) // 2])
  shards = ('--train_shards=2', '--validation_shards=1')
  args = ('--source_dir=' + source, '--output_dir=' + output, '--direct_num_workers=1') + shards
  refused(_prepare_cli(*args), os.path.basename(victim) + ' is not a readable image: '
                  'JPEG data does not decode', '--skip_unreadable')
  assert not os.path.exists(os.path.join(output, 'dataset.json'))
  assert not [n for n in os.listdir(output) if staged.final_name(n)]  # no half-written shard
  # What the failed run left (its plan, any finished shards) is not taken for a conversion.
  refused(_prepare_cli(*args), 'incomplete conversion', '--overwrite')  # before any pipeline
  info = _prepared(source, output, '--skip_unreadable', '--overwrite', *shards)
  assert info['num_skipped'] == 1 and info['skipped_unreadable'][0][0] == victim
  assert info['num_train_examples'] == 29
  assert len(read_records(os.path.join(output, 'train-*'))) == 29


def test_complete_output_is_refused_and_overwrite_replaces_it(converted, tmp_path):
  source, output = converted[0], str(tmp_path / 'out')
  shutil.copytree(converted[3], output)
  proc = _prepare_cli('--source_dir=' + source, '--output_dir=' + output,
                      '--direct_num_workers=1')
  assert proc.returncode == 2 and 'already holds a converted dataset' in proc.stderr
  info = _prepared(source, output, '--train_shards=2', '--validation_shards=1', '--overwrite')
  # The 4 + 2 shards of the earlier conversion are gone, not mixed with the new 2 + 1.
  assert sorted(n for n in os.listdir(output) if n != 'dataset.json') == [
      'train-00000-of-00002', 'train-00001-of-00002', 'validation-00000-of-00001']
  assert info['num_train_examples'] == len(read_records(os.path.join(output, 'train-*'))) == 40


def test_dataflow_options_reach_the_pipeline():
  """The options docs/data.md's Dataflow command passes (not run: no network here)."""
  from apache_beam.options import pipeline_options  # pylint: disable=g-import-not-at-top
  options = beam_convert.pipeline_options_for(
      'DataflowRunner', beam_args=['--project=my-project', '--region=us-central1',
                                   '--temp_location=gs://bucket/tmp', '--setup_file=./setup.py',
                                   '--requirements_file=req.txt', '--max_num_workers=64'])
  assert options.view_as(pipeline_options.StandardOptions).runner == 'DataflowRunner'
  cloud = options.view_as(pipeline_options.GoogleCloudOptions)
  assert (cloud.project, cloud.region, cloud.temp_location) == (
      'my-project', 'us-central1', 'gs://bucket/tmp')
  setup = options.view_as(pipeline_options.SetupOptions)
  assert (setup.setup_file, setup.requirements_file) == ('./setup.py', 'req.txt')
  assert options.view_as(pipeline_options.WorkerOptions).max_num_workers == 64
  # Dataflow's workers cannot see this machine's disk: refused before anything is written.
  with pytest.raises(PipelineError, match='put --source_dir and --output_dir on gs://'):
    beam_convert.convert({'train': [beam_convert.Item('/data/a.JPEG', 1, 'n1', 'a.JPEG')]},
                         'gs://bucket/out', {}, {'train': 1}, options)
  direct = beam_convert.pipeline_options_for(direct_num_workers=2).view_as(
      pipeline_options.DirectOptions)
  assert (direct.direct_num_workers, direct.direct_running_mode) == (2, 'multi_processing')


def test_plan_shards_is_equal_contiguous_and_seeded():
  items = [beam_convert.Item('f%d' % i, i % 3, 'w', 'f%d' % i) for i in range(10)]
  plan = beam_convert.plan_shards(items, 'train', 4, shuffle_seed=5)
  assert [len(s['items']) for s in plan] == [2, 3, 2, 3]
  assert plan == beam_convert.plan_shards(items, 'train', 4, shuffle_seed=5)
  assert sorted(i[0] for s in plan for i in s['items']) == sorted(i.source for i in items)
  unshuffled = beam_convert.plan_shards(items, 'validation', 20)
  assert len(unshuffled) == 10 and [s['items'][0][0] for s in unshuffled] == [
      'f%d' % i for i in range(10)]
  # The plan travels as JSON lines; WriteShard gets the same items back.
  travelled = json.loads(json.dumps(plan))
  assert [[beam_convert.Item(*i) for i in s['items']] for s in travelled] == [
      s['items'] for s in plan]


def test_batched_check_agrees_with_a_full_decode(converted):
  """convert_many's 1/8-scale check of kept JPEGs gives what a full decode gives, and finds
  each damaged file, alone or among good ones."""
  source = converted[0]
  paths = sorted(tf.io.gfile.glob(os.path.join(source, 'train', '*', '*.JPEG')))[:12]
  good = []
  for path in paths:
    with open(path, 'rb') as f:
      good.append(f.read())
  bad = [good[6][:len(good[6]) // 2], good[7][:-100], b'\xff\xd8\xff' + b'\0' * 50]
  coder = image_coder.ImageCoder()
  try:
    batched = coder.convert_many(good, jpeg_only=True)  # one batch, all readable: the fast path
    assert batched == [coder.convert(encoded, jpeg_only=True) for encoded in good]
    assert [r[5] for r in batched].count(None) == 12 - 3  # the 3 quirks were repaired
    for damaged in bad:
      alone = coder.convert_many([damaged], jpeg_only=True)
      among = coder.convert_many(good[8:] + [damaged], jpeg_only=True)
      assert isinstance(alone[0], image_coder.UnreadableImage)
      assert isinstance(among[-1], image_coder.UnreadableImage)
      assert among[:-1] == batched[8:]
  finally:
    coder.close()


def test_jpeg_frame_reads_the_size_of_real_jpeg_variants(converted):
  """Progressive, with an EXIF-like thumbnail holding its own frame header, with fill and stray
  bytes before a marker: the header's size and components match what TensorFlow decodes."""
  with open(sorted(tf.io.gfile.glob(os.path.join(converted[0], 'val', '*.JPEG')))[0], 'rb') as f:
    baseline = f.read()
  with tf.Graph().as_default(), tf.Session() as sess:
    image = tf.io.decode_jpeg(baseline)
    progressive, thumbnail = sess.run([
        tf.image.encode_jpeg(image, progressive=True),
        tf.image.encode_jpeg(tf.image.resize(image, [20, 30], method='nearest'))])
    app1 = b'Exif\0\0' + thumbnail
    after_app0 = 4 + struct.unpack('>H', baseline[4:6])[0]  # SOI, then APP0's marker and length
    variants = {
        'baseline': baseline,
        'progressive': progressive,
        'thumbnail': baseline[:2] + b'\xff\xe1' + struct.pack('>H', len(app1) + 2) + app1 +
                     baseline[2:],
        'fill': baseline[:2] + b'\xff\xff' + baseline[2:],
        'stray': baseline[:after_app0] + b'\x00\x00' + baseline[after_app0:],
    }
    encoded = tf.placeholder(tf.string, [])
    shape = tf.shape(tf.io.decode_jpeg(encoded))
    for name, data in variants.items():
      assert image_coder.jpeg_frame(data) == tuple(sess.run(shape, {encoded: data})), name
  assert image_coder.jpeg_frame(b'\xff\xd8\xff\xe0\x00') is None


def test_only_the_converters_files_are_replaced_or_counted(tmp_path):
  output = tmp_path / 'out'
  output.mkdir()
  for name in ('train-notes.txt', 'validation-report.csv', 'train-00000-of-00002.bak'):
    (output / name).write_text('mine')
  (output / 'train-logs').mkdir()
  assert beam_convert.existing_output(str(output)) == []
  # A shard, one written aside now and one by an earlier version, and dataset.json.
  leftovers = ['train-00000-of-00002', '.partial-0123456789ab.train-00001-of-00002',
               '.train-00001-of-00002.tmp-' + 'a' * 32, 'dataset.json']
  for name in leftovers:
    (output / name).write_text('')
  (output / beam_convert.PLAN_DIR).mkdir()
  with pytest.raises(PipelineError, match='already holds a converted dataset'):
    beam_convert.prepare_output_dir(str(output), overwrite=False)
  beam_convert.prepare_output_dir(str(output), overwrite=True)
  assert sorted(os.listdir(str(output))) == [
      'train-00000-of-00002.bak', 'train-logs', 'train-notes.txt', 'validation-report.csv']


def test_a_killed_workers_temporary_is_removed_and_empty_splits_refused(tmp_path):
  """A worker killed mid-shard leaves its file aside; dataset.json's writer removes it, but not
  the lease's own file (its heartbeat is renaming it) nor a file of the user's."""
  output = str(tmp_path)
  leftover = os.path.join(output, '.partial-0123456789ab.train-00000-of-00001')
  with open(leftover, 'w') as f:
    f.write('half a shard')
  kept = [os.path.join(output, name) for name in ('.partial-0123456789ab.writer.lease', 'notes')]
  for path in kept:
    with open(path, 'w') as f:
      f.write('x')
  summary = beam_convert.empty_summary()
  summary['count'] = {'train': 3, 'validation': 1}
  summary['heights'], summary['widths'] = {10: 4}, {12: 4}
  info = beam_convert.write_dataset_json(summary, output, {'name': 'x'})
  assert not os.path.exists(leftover) and info['image_height'] == 10
  assert all(os.path.exists(path) for path in kept)
  summary['count'] = {'train': 3}
  summary['skipped'] = [['a.JPEG', 'truncated']]
  os.remove(os.path.join(output, 'dataset.json'))
  assert beam_convert.write_dataset_json(summary, output, {'name': 'x'}) is None
  assert not os.path.exists(os.path.join(output, 'dataset.json'))
  problems = beam_convert.problems_found(output)  # the driver raises it, without a traceback
  assert len(problems) == 1 and 'no readable image in the validation split' in problems[0]


def test_the_other_converters_do_not_need_beam():
  code = ('import sys; import trainer.prepare.__main__, trainer.prepare.prepare_flags; '
          'print("apache_beam" in sys.modules)')
  assert subprocess.run([sys.executable, '-c', code], cwd=REPO, stdout=subprocess.PIPE,
                        universal_newlines=True, check=True).stdout.strip() == 'False'
