"""`python -m trainer.main` end to end on real Fashion-MNIST, in fresh processes, tiny settings."""

import csv
import glob
import json
import os
import shutil
import time

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from trainer.cli import help_text
from trainer.data import dataset_json
from trainer.run import network_record
from trainer.run import recorded_network

from helpers import config_from_args
from helpers import directory_files
from helpers import INCEPTION_ON_TF2
from helpers import ok
from helpers import predict_in_fresh_process
from helpers import read_records
from helpers import refused
from helpers import requires_isolation
from helpers import results_of
from helpers import run_main
from helpers import TINY
from helpers import TINY_BY_MODEL
from helpers import write_subset


def _events_tags(model_dir):
  tags = set()
  for path in glob.glob(os.path.join(model_dir, 'events.out.tfevents.*')):
    for event in tf.train.summary_iterator(path):
      tags.update(v.tag for v in event.summary.value)
  return tags


def _tiny(model, request):
  """(flags, data_dir) of the tiny real setting for `model`."""
  args, fixture = TINY_BY_MODEL[model]
  return list(args), request.getfixturevalue(fixture)


# Not InceptionV3 (two minutes per runtime; resuming is the same code for every network, and
# InceptionV3 trains, evaluates and exports in the export test below). The resumed run exports:
# the export test's checks run on it, so these networks train once for both.
RESUMED_AND_EXPORTED = ['bilstm', 'cnn', 'resnet']


@pytest.mark.parametrize('model', RESUMED_AND_EXPORTED)
def test_train_and_eval_resumes_and_a_finished_run_trains_nothing(model, request, tmp_path):
  args, data_dir = _tiny(model, request)
  model_dir = str(tmp_path / 'model')
  common = args + ['--data_dir=' + data_dir, '--model_dir=' + model_dir, '--steps_per_eval=5']
  first = ok(run_main('--train_steps=10', *common))
  results = results_of(model_dir)
  assert results['global_step'] == 10 and results['model'] == model
  assert results['num_eval_examples'] == len(read_records(os.path.join(data_dir, 'validation-*')))
  for key in ('top_1_accuracy', 'top_5_accuracy', 'loss', 'examples_per_sec', 'tensorflow_version'):
    assert results[key] is not None, key
  assert results['tensorflow_version'] == tf.__version__
  assert 'eval at step 5' in first.stderr  # the intermediate eval at the --steps_per_eval boundary
  assert 'examples/sec' in first.stderr and 'ETA' in first.stderr
  # TensorBoard: the host_call's scalars, the HParams of the run, the first batch's images.
  tags = _events_tags(model_dir)
  assert {'loss', 'learning_rate', 'train_top_1_accuracy', '_hparams_/experiment',
          '_hparams_/session_start_info'} <= tags
  assert ({'input_images/%d' % i for i in range(4)} <= tags) == (model != 'bilstm')
  # The network, recorded for tools that rebuild it outside Estimator (trainer.export_keras).
  recorded, data = network_record.read(model_dir)
  trained = config_from_args('--train_steps=10', *common)
  assert recorded == trained.model and recorded.model == model
  assert (data.data_dir, data.num_classes, data.image_size) == (
      data_dir, trained.data.num_classes, trained.data.image_size)

  export_dir = str(tmp_path / 'export')
  second = ok(run_main('--train_steps=15', '--export_dir=' + export_dir, *common))
  assert 'Resuming from the checkpoint at step 10 of 15' in second.stderr
  assert results_of(model_dir)['global_step'] == 15
  # The resumed run's export and --mode=predict (the export test's checks, on this run).
  _check_export_and_predict(model, args, data_dir, model_dir, tmp_path)

  checkpoints = sorted(os.listdir(model_dir))
  third = ok(run_main('--train_steps=15', *common))
  assert 'not training' in third.stderr
  assert results_of(model_dir)['global_step'] == 15
  assert [c for c in sorted(os.listdir(model_dir)) if 'ckpt' in c] == [
      c for c in checkpoints if 'ckpt' in c]


# One image and one text network: the modes are the same code for every network (the slow
# InceptionV3 and ResNet train and evaluate in the resume and export tests).
@pytest.mark.parametrize('model', ['bilstm', 'cnn'])
def test_train_then_eval_mode(model, request, tmp_path):
  args, data_dir = _tiny(model, request)
  model_dir = str(tmp_path / 'model')
  common = args + ['--data_dir=' + data_dir, '--model_dir=' + model_dir, '--skip_host_call']
  ok(run_main('--mode=train', '--train_steps=4', *common))
  assert results_of(model_dir)['global_step'] == 4
  assert 'top_1_accuracy' not in results_of(model_dir)
  assert not glob.glob(os.path.join(model_dir, 'eval*'))
  if model == 'cnn':  # evaluating moving averages that the checkpoint lacks: refused, not faked
    refused(run_main('--mode=eval', '--moving_average_decay=0.99', *common),
            'has no moving averages', '--moving_average_decay=0')
    assert tf.train.latest_checkpoint(model_dir).endswith('-4')
    assert 'top_1_accuracy' not in results_of(model_dir)
  ok(run_main('--mode=eval', *common))
  results = results_of(model_dir)
  assert results['mode'] == 'eval' and results['global_step'] == 4
  assert results['num_eval_examples'] == len(read_records(os.path.join(data_dir, 'validation-*')))
  assert 0.0 <= results['top_1_accuracy'] <= 1.0


def test_eval_without_checkpoint_is_refused(small_dir, tmp_path):
  proc = run_main('--mode=eval', '--data_dir=' + small_dir, '--model_dir=' + str(tmp_path), *TINY)
  assert proc.returncode == 2 and 'no checkpoint in' in proc.stderr


def test_eval_counts_all_10000_test_images(fashion_mnist_dir, tmp_path):
  model_dir = str(tmp_path / 'model')
  # image_size 8 keeps the 10,000-image evaluation cheap; the count is what is under test.
  ok(run_main('--train_steps=1', '--image_size=8', '--eval_batch_size=1024', '--skip_host_call',
               '--data_dir=' + fashion_mnist_dir, '--model_dir=' + model_dir,
               *[a for a in TINY if not a.startswith(('--image_size', '--eval_batch_size'))]))
  assert results_of(model_dir)['num_eval_examples'] == 10000


def _predict_lines(model_dir, data_dir, args, predict_input, output):
  """Runs --mode=predict; returns its JSON lines as dicts."""
  ok(run_main('--mode=predict', '--data_dir=' + data_dir, '--model_dir=' + model_dir,
               '--predict_input=' + predict_input, '--predict_output=' + output, *args))
  with open(output) as f:
    return [json.loads(line) for line in f]


def _check_lines_match(lines, classes, probabilities):
  """The lines' classes are `classes`, their top-k probabilities those of `probabilities`."""
  assert [line['class'] for line in lines] == list(classes)
  for line, row in zip(lines, probabilities):
    assert len(line['top_k']) == min(5, len(row))
    for entry in line['top_k']:
      assert entry['probability'] == pytest.approx(row[entry['class']], abs=1e-5)


@pytest.mark.parametrize('model', [
    pytest.param(m, marks=INCEPTION_ON_TF2 if m == 'inception_v3' else ())
    for m in sorted(set(TINY_BY_MODEL) - set(RESUMED_AND_EXPORTED))])
def test_export_and_predict_mode_classify_real_examples_alike(model, request, tmp_path):
  """The SavedModel (fresh process) and --mode=predict give the classes and probabilities of
  evaluation's weights and preprocessing, and on the records the same logits
  (`_check_export_and_predict`); the networks of the resume test are checked on its resumed
  run."""
  args, data_dir = _tiny(model, request)
  model_dir, export_dir = str(tmp_path / 'model'), str(tmp_path / 'export')
  trained = ok(run_main('--train_steps=20', '--data_dir=' + data_dir, '--model_dir=' + model_dir,
                         '--export_dir=' + export_dir, '--skip_host_call', *args))
  # One evaluation, so the best checkpoint is the final one: copied, not exported twice.
  assert results_of(model_dir)['best']['global_step'] == 20
  assert 'its SavedModel copied to %s/best/' % export_dir in trained.stderr
  _check_export_and_predict(model, args, data_dir, model_dir, tmp_path)


def _check_export_and_predict(model, args, data_dir, model_dir, tmp_path):
  """The run in model_dir has just evaluated and exported: its SavedModel (fresh process) and
  --mode=predict (records, image files, .txt and .csv texts) give the classes and probabilities
  of evaluation's weights and preprocessing, and on the records the same logits."""
  results = results_of(model_dir)
  labels, classes, probabilities, logits = predict_in_fresh_process(results['export_path'],
                                                                     data_dir, tmp_path)
  # The best checkpoint is the exported one (its last evaluation was its best): the best export
  # is a copy of that SavedModel, file for file.
  if results['best']['global_step'] == results['global_step']:
    assert directory_files(results['best_export_path']) == directory_files(results['export_path'])
  assert len(classes) == len(labels) == results['num_eval_examples']
  np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-4)
  np.testing.assert_allclose(probabilities, _softmax(logits), atol=1e-5)
  # Same weights and the same eval preprocessing as evaluation: the same accuracy and loss.
  assert (classes == labels).sum() == round(results['top_1_accuracy'] * len(labels))
  if model != 'inception_v3':  # 20-step InceptionV3: eval logits ~1e8, the softmax saturates
    np.testing.assert_allclose(_mean_xent(logits, labels), results['loss'], rtol=1e-3)

  # --mode=predict on the labelled validation records: one line per record in file order. The
  # run remembers its network (model_config.json): no --model, --resnet_depth, --image_size or
  # BiLSTM sizes are passed again.
  not_network = [a for a in args if a.split('=')[0][2:] not in recorded_network.NETWORK_FLAGS]
  lines = _predict_lines(model_dir, data_dir, not_network + ['--predict_logits'],
                         os.path.join(data_dir, 'validation-*'),
                         str(tmp_path / 'predictions.jsonl'))
  _check_lines_match(lines, classes, probabilities)
  # TPUEstimator.predict on the prepared records (token ids for text) and the SavedModel on the
  # raw inputs (the BiLSTM's in-graph tokenizer) give the same logits, example by example. A
  # 20-step InceptionV3's logits reach ~1e8: there the absolute tolerance scales with them.
  atol = 1e-4 * (np.abs(logits).max() if model == 'inception_v3' else 1.0)
  np.testing.assert_allclose([line['logits'] for line in lines], logits, rtol=1e-4, atol=atol)
  assert [line['label'] for line in lines] == list(labels)
  summary = results_of(model_dir, 'predict_results.json')
  assert summary['num_predictions'] == summary['num_labelled'] == len(labels)
  assert summary['top_1_accuracy'] == pytest.approx(results['top_1_accuracy'], abs=1e-6)
  examples = [tf.train.Example.FromString(r).features.feature
              for r in read_records(os.path.join(data_dir, 'validation-*'))]
  names = dataset_json.read(data_dir)['class_names']
  assert lines[0]['class_name'] == names[lines[0]['class']]
  if model == 'bilstm':
    texts = [e['text/raw'].bytes_list.value[0].decode('utf-8') for e in examples]
    assert [line['text'] for line in lines] == texts
    one_line = [' '.join(t.split()) for t in texts]  # a few snippets hold line breaks
    (tmp_path / 'texts.txt').write_text(''.join(t + '\n' for t in one_line), encoding='utf-8')
    with open(str(tmp_path / 'texts.csv'), 'w', newline='', encoding='utf-8') as f:
      writer = csv.writer(f)
      writer.writerow(['id', 'text'])
      writer.writerows(enumerate(one_line))
    for name in ('texts.txt', 'texts.csv'):
      text_lines = _predict_lines(model_dir, data_dir, args, str(tmp_path / name),
                                  str(tmp_path / (name + '.jsonl')))
      assert [line['text'] for line in text_lines] == one_line
      _check_lines_match(text_lines, classes, probabilities)
      assert text_lines[0]['input'] == '%s:%d' % (tmp_path / name, 1 if name.endswith('txt') else 2)
  else:
    assert [line['input'] for line in lines] == [
        e['image/filename'].bytes_list.value[0].decode() for e in examples]
    if model == 'inception_v3':
      return  # image files: the same code for every image network, and InceptionV3 is slow
    # The same images as files (PNG and JPEG names: the decoder reads the bytes, not the name).
    (tmp_path / 'images').mkdir()
    for i, e in enumerate(examples[:12]):
      suffix = '.png' if i % 2 else '.JPEG'
      (tmp_path / 'images' / ('%02d%s' % (i, suffix))).write_bytes(
          e['image/encoded'].bytes_list.value[0])
    image_lines = _predict_lines(model_dir, data_dir, args, str(tmp_path / 'images' / '*'),
                                 str(tmp_path / 'images.jsonl'))
    _check_lines_match(image_lines, classes[:12], probabilities[:12])
    assert image_lines[1]['input'] == str(tmp_path / 'images' / '01.png')


def _log_softmax(logits):
  """float64 log-softmax by log-sum-exp: exact where the float32 probabilities of a confident
  wrong prediction round to 0."""
  shifted = logits.astype(np.float64) - logits.max(axis=1, keepdims=True)
  return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def _softmax(logits):
  return np.exp(_log_softmax(logits))


def _mean_xent(logits, labels):
  """Mean softmax cross-entropy from logits, as evaluation computes it."""
  return float(np.mean(-_log_softmax(logits)[np.arange(len(labels)), labels]))


def test_evaluation_and_export_use_the_moving_average_weights(small_dir, tmp_path):
  """With an EMA, evaluation and export of a checkpoint use its averaged weights: the EMA loss
  differs from the raw weights' loss, and the SavedModel reproduces the EMA evaluation. The EMA is
  the same code for every model; the CNN is used because a few-step InceptionV3 has unsettled
  batch-norm statistics whose eval logits overflow the softmax (its EMA graph is covered by the
  XLA test and its export by the export test)."""
  args, _ = TINY_BY_MODEL['cnn']
  model_dir = str(tmp_path / 'model')
  # The average covers the last few steps (decay min(0.9, (1 + step) / (10 + step)) = 0.7 at
  # step 20) and each step moves the weights far (Adam at 5x the recipe's rate), so the averaged
  # and raw weights clearly differ.
  common = args + ['--data_dir=' + small_dir, '--model_dir=' + model_dir, '--skip_host_call',
                   '--base_learning_rate=0.005']
  ok(run_main('--mode=train', '--train_steps=20', '--moving_average_decay=0.9', *common))
  ok(run_main('--mode=eval', '--moving_average_decay=0', *common))
  raw = results_of(model_dir)
  ok(run_main('--mode=eval', '--moving_average_decay=0.9', '--export_dir=' + str(tmp_path / 'e'),
               *common))
  ema = results_of(model_dir)
  assert raw['global_step'] == ema['global_step'] == 20
  assert abs(raw['loss'] - ema['loss']) > 1e-3 * raw['loss'], (raw['loss'], ema['loss'])
  labels, _, _, logits = predict_in_fresh_process(ema['export_path'], small_dir, tmp_path)
  exported = _mean_xent(logits, labels)
  np.testing.assert_allclose(exported, ema['loss'], rtol=1e-3)
  assert abs(exported - raw['loss']) > 1e-3 * raw['loss']


def test_inception_refuses_images_below_75_pixels(small_dir, tmp_path):
  refused(run_main('--model=inception_v3', '--train_steps=1', '--data_dir=' + small_dir,
                    '--model_dir=' + str(tmp_path)), 'at least 75x75', '--image_size=75')


# ---- Bad input: a clear message, exit status 2, nothing lost -------------------------------------

def test_missing_data_dir_flag_is_an_error_not_fake_data(tmp_path):
  refused(run_main('--model_dir=' + str(tmp_path), '--train_steps=1'), '--data_dir is required')


def test_missing_and_empty_data_dir(tmp_path):
  refused(run_main('--data_dir=' + str(tmp_path / 'nope'), '--model_dir=' + str(tmp_path / 'm'),
                    '--train_steps=1', '--num_classes=10', '--label_offset=0', '--image_size=28',
                    '--num_train_examples=1', '--num_eval_examples=1'), 'does not exist')
  (tmp_path / 'empty').mkdir()
  refused(run_main('--data_dir=' + str(tmp_path / 'empty'), '--model_dir=' + str(tmp_path / 'm'),
                    '--train_steps=1'), '--num_classes', 'no dataset.json')
  refused(run_main('--data_dir=' + str(tmp_path / 'empty'), '--model_dir=' + str(tmp_path / 'm'),
                    '--train_steps=1', '--num_classes=10', '--label_offset=0', '--image_size=28',
                    '--num_train_examples=1', '--num_eval_examples=1'), 'no TFRecord files match')


def test_corrupt_tfrecord_is_reported_and_checkpoints_survive(small_dir, tmp_path):
  data_dir = str(tmp_path / 'data')
  shutil.copytree(small_dir, data_dir)
  model_dir = str(tmp_path / 'model')
  common = TINY + ['--data_dir=' + data_dir, '--model_dir=' + model_dir, '--skip_host_call']
  ok(run_main('--mode=train', '--train_steps=2', *common))
  shard = sorted(glob.glob(os.path.join(data_dir, 'validation-*')))[0]
  blob = bytearray(open(shard, 'rb').read())
  blob[4000:4010] = b'\xff' * 10  # flips bytes inside a record: its CRC no longer matches
  open(shard, 'wb').write(bytes(blob))
  refused(run_main('--mode=eval', *common), 'corrupt TFRecord data in the eval split', shard)
  assert tf.train.latest_checkpoint(model_dir).endswith('-2')


def test_labels_that_need_an_offset_are_refused(small_dir, tmp_path):
  data_dir = write_subset(small_dir, str(tmp_path / 'data'), 64, 64, label_offset=1)
  refused(run_main('--train_steps=1', '--data_dir=' + data_dir,
                    '--model_dir=' + str(tmp_path / 'm'), *TINY), 'out of range')


def test_a_decay_flag_the_schedule_does_not_read_is_refused(small_dir, tmp_path):
  # resnet trains with the step schedule, which has no --lr_decay_every_epochs.
  refused(run_main('--lr_decay_every_epochs=0.5', '--train_steps=1', '--data_dir=' + small_dir,
                    '--model_dir=' + str(tmp_path), *TINY),
           '--lr_decay_every_epochs is read by the exponential schedule only')


def test_lr_schedule_flag_replaces_the_recipe_schedule(small_dir, tmp_path):
  # --lr_schedule=constant overrides resnet's step schedule, so --lr_decay_epochs no longer applies.
  refused(run_main('--lr_schedule=constant', '--lr_decay_epochs=1', '--train_steps=1',
                    '--data_dir=' + small_dir, '--model_dir=' + str(tmp_path), *TINY),
           'but this run trains with the constant schedule')


def test_lr_schedule_keeps_the_rest_of_the_recipe():
  import types

  from trainer.flags.to_config import recipe_values
  unset = dict.fromkeys(['base_learning_rate', 'weight_decay', 'label_smoothing', 'warmup_epochs',
                         'lr_decay_every_epochs', 'moving_average_decay', 'gradient_clip_norm'])
  recipe = recipe_values(types.SimpleNamespace(
      model='inception_v3', lr_schedule='step', lr_decay_epochs=['1.9'], lr_decay_factor=0.1,
      **unset))
  assert (recipe['lr_schedule'], recipe['lr_decay_epochs'], recipe['lr_decay_factor']) == (
      'step', (1.9,), 0.1)
  assert (recipe['optimizer'], recipe['label_smoothing']) == ('rmsprop', 0.1)


@pytest.mark.parametrize('given, says', [
    (['30', 'sixty'], 'give numbers of epochs'), (['60', '30'], 'increasing order'),
    (['-1'], 'epochs >= 0'), (['nan'], 'give finite epochs'), (['inf'], 'give finite epochs')])
def test_lr_decay_epochs_are_numbers_in_order_or_refused(given, says):
  """trainer.main's --lr_decay_epochs obeys train_keras's rule (flags/value_rules.py): an error
  line, not a traceback from float()."""
  import types

  from trainer.errors import PipelineError
  from trainer.flags.to_config import recipe_values
  unset = dict.fromkeys(['base_learning_rate', 'weight_decay', 'label_smoothing', 'warmup_epochs',
                         'lr_decay_every_epochs', 'moving_average_decay', 'gradient_clip_norm',
                         'lr_schedule', 'lr_decay_factor'])
  with pytest.raises(PipelineError, match='--lr_decay_epochs=%s: .*%s' % (','.join(given), says)):
    recipe_values(types.SimpleNamespace(model='resnet', lr_decay_epochs=given, **unset))


def test_batch_not_divisible_by_cores_is_refused_before_any_work(tmp_path):
  model_dir = tmp_path / 'model'
  start = time.time()
  refused(run_main('--use_tpu', '--tpu=my-tpu', '--num_cores=8', '--train_batch_size=100',
                    '--train_steps=1', '--data_dir=gs://bkt/data', '--model_dir=gs://bkt/m'),
           '--train_batch_size=100 is not divisible by --num_cores=8')
  assert time.time() - start < 60 and not model_dir.exists()


def test_tpu_with_local_paths_is_refused(small_dir, tmp_path):
  refused(run_main('--use_tpu', '--tpu=my-tpu', '--train_steps=1', '--data_dir=' + small_dir,
                    '--model_dir=' + str(tmp_path), *TINY), 'a Cloud TPU cannot read')


def test_tpu_flags_without_use_tpu_are_refused(small_dir, tmp_path):
  refused(run_main('--tpu=my-tpu', '--train_steps=1', '--data_dir=' + small_dir,
                    '--model_dir=' + str(tmp_path), *TINY), '--tpu is only used with --use_tpu')


@requires_isolation
@pytest.mark.parametrize('tpu', ['no-such-tpu', 'grpc://10.240.1.2:8470'])
def test_unreachable_tpu_fails_within_seconds(tpu, tmp_path):
  # Local paths would be refused first: use gs:// ones; nothing is reachable in this namespace.
  start = time.time()
  proc = run_main('--use_tpu', '--tpu=' + tpu, '--train_steps=1', '--fake_data',
                  '--num_classes=10', '--image_size=16', '--train_batch_size=64',
                  '--eval_batch_size=64', '--model_dir=gs://bkt/model', '--tpu_connect_timeout=5')
  elapsed = time.time() - start
  assert proc.returncode == 2, proc.stderr[-3000:]
  assert 'TPU' in proc.stderr and ('unreachable' in proc.stderr or 'resolving' in proc.stderr)
  assert elapsed < 45, elapsed


@requires_isolation
def test_unreachable_bucket_fails_fast_with_a_clear_message(tmp_path):
  # TensorFlow's own gs:// client would retry for ~90 s; the google-cloud-storage check does not.
  start = time.time()
  proc = run_main('--data_dir=gs://no-such-bucket/data', '--model_dir=' + str(tmp_path),
                  '--train_steps=1', '--num_classes=10', '--label_offset=0', '--image_size=16',
                  '--num_train_examples=10', '--num_eval_examples=10', *TINY[:1])
  refused(proc, 'gs://no-such-bucket')
  assert time.time() - start < 60


def test_help_lists_the_pipelines_own_flags_in_groups_with_defaults():
  """--help (and -h) shows every flag of flags.run_flags under its group's title with its default,
  none of absl's or TensorFlow's; --helpfull still lists those."""
  short = run_main('--help')
  assert short.returncode == 0, short.stderr
  text = short.stdout
  titles = ['Model:', 'Optimizer (unset: the --model recipe):', 'Data:',
            'Mode, schedule and checkpoints:', 'Cloud TPU:', 'GPUs:', 'Output:']
  assert [text.index(title) for title in titles] == sorted(text.index(title) for title in titles)
  # Each flag once, inside its group, with its default where it has one.
  model_group = text[text.index('Model:'):text.index('Optimizer (')]
  assert ("--model: <resnet|inception_v3|cnn|bilstm>: Built-in network to train.\n"
          "      (default: 'resnet')") \
      in model_group
  tpu_group = text[text.index('Cloud TPU:'):text.index('GPUs:')]
  assert ("--iterations_per_loop: Steps run on the TPU per host round trip.\n"
          "      (default: '100')") \
      in tpu_group
  assert "--[no]use_tpu: " in tpu_group
  for name in ('train_batch_size', 'init_checkpoint', 'export_dir', 'num_gpus', 'data_dir'):
    assert text.count('  --%s: ' % name) == 1, name
  for foreign in ('logtostderr', '--flagfile', '--verbosity', '--helpxml', 'pdb'):
    assert foreign not in text, foreign
  assert all(help_text.wants_help(['main', '--model=cnn', arg])
             for arg in ('-h', '-?', '--helpshort'))
  assert not help_text.wants_help(['main', '--', '--help'])
  full = run_main('--helpfull')
  assert '--[no]logtostderr' in full.stdout and '--train_batch_size' in full.stdout
