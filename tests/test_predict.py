"""--mode=predict's inputs and refusals (the predictions themselves are checked against the
SavedModel and evaluation in test_main.py's export test, for every model)."""

import json
import os

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from trainer.data import predict_input
from trainer.errors import PipelineError
from trainer.run import network_record

from helpers import config_from_args
from helpers import ok
from helpers import read_records
from helpers import refused
from helpers import run_main


def test_each_kind_of_input_is_recognised_and_named(small_dir, text_small_dir, tmp_path):
  source = predict_input.resolve(os.path.join(small_dir, 'validation-*'), 'image')
  assert source.kind == 'records' and len(source.paths) == 2
  described = list(predict_input.describe_inputs(source))
  assert len(described) == len(read_records(os.path.join(small_dir, 'validation-*')))
  assert described[0][0] == 'validation/00000.png' and described[0][2] is None
  assert all(label is not None for _, label, _ in described)

  text = list(predict_input.describe_inputs(
      predict_input.resolve(os.path.join(text_small_dir, 'validation-*'), 'text')))
  path = sorted(tf.io.gfile.glob(os.path.join(text_small_dir, 'validation-*')))[0]
  assert text[0][0] == path + ':0' and text[0][1] in (0, 1) and text[0][2]

  (tmp_path / 'a.txt').write_text('first\n\nthird, with a comma\n')
  lines = predict_input.resolve(str(tmp_path / 'a.txt'), 'text')
  assert lines.kind == 'lines'
  assert [t for _, _, t in predict_input.describe_inputs(lines)] == [
      'first', '', 'third, with a comma']
  (tmp_path / 'b.csv').write_text('id,Text\n1,"quoted, with a comma"\n2,plain\n')
  table = predict_input.resolve(str(tmp_path / 'b.csv'), 'text')
  assert (table.kind, table.text_column) == ('csv', 1)
  assert list(predict_input.describe_inputs(table)) == [
      ('%s:2' % (tmp_path / 'b.csv'), None, 'quoted, with a comma'),
      ('%s:3' % (tmp_path / 'b.csv'), None, 'plain')]


@pytest.mark.parametrize('files, modality, message', [
    ({}, 'image', 'matches no file'),
    ({'a.png': b'x', 'b.txt': b'x'}, 'image', 'files of several kinds'),
    ({'a.txt': b'hello'}, 'image', 'holds text files, but this is an image model'),
    ({'a.jpg': b'x'}, 'text', 'holds image files, but this is a text model'),
    ({'a.data': b'not a record file at all'}, 'image', 'is not a TFRecord file'),
    ({'a.csv': b'id,review\n1,good\n'}, 'text', "none named 'text'"),
    ({'a.csv': b'text\n"two\nlines"\n'}, 'text', 'row 2: the text spans several lines'),
    ({'a.csv': b'id,text\n1,fine\n\n'}, 'text', 'row 3 has 0 fields'),
    ({'a.csv': b'id,text\n1,\xff\xfe\n'}, 'text', 'cannot be read as a UTF-8 CSV file'),
])
def test_inputs_that_cannot_be_predicted_are_refused_before_any_work(files, modality, message,
                                                                     tmp_path):
  for name, content in files.items():
    (tmp_path / name).write_bytes(content)
  with pytest.raises(PipelineError, match=message):
    predict_input.resolve(str(tmp_path / '*'), modality)


@pytest.mark.parametrize('args, message', [
    (['--mode=predict', '--predict_output=/tmp/x.jsonl'], 'needs --predict_input'),
    (['--predict_input=/tmp/*.png', '--train_steps=1'], 'read by --mode=predict only'),
    (['--predict_logits', '--train_steps=1'],
     'read by --mode=predict only; add --mode=predict or drop --predict_logits'),
    (['--mode=predict', '--predict_input=/tmp/*.png', '--predict_output=/tmp/o',
      '--predict_top_k=0'], '--predict_top_k must be >= 1'),
])
def test_prediction_flags_are_checked(small_dir, tmp_path, args, message):
  with pytest.raises(PipelineError, match=message):
    config_from_args('--data_dir=' + small_dir, '--model_dir=' + str(tmp_path), '--model=cnn',
                     *args)


def test_predict_refuses_a_model_dir_without_checkpoint_and_writes_nothing(small_dir, tmp_path):
  output = tmp_path / 'out' / 'p.jsonl'
  proc = run_main('--mode=predict', '--model=cnn', '--data_dir=' + small_dir,
                  '--model_dir=' + str(tmp_path / 'empty'), '--predict_output=' + str(output),
                  '--predict_input=' + os.path.join(small_dir, 'validation-*'))
  refused(proc, 'no checkpoint in', 'train first')
  assert not output.exists()
  assert not (tmp_path / 'empty' / network_record.FILE).exists()  # written by training only


def test_mirrored_prediction_and_a_failed_one_that_leaves_no_complete_looking_output(
    small_dir, tmp_path):
  """MirroredStrategy predicts too (its Estimator gets the batch size from the input_fn), with
  --predict_logits the logits the probabilities come from. A TFRecord whose image bytes are not an
  image fails the run with a message naming where: the lines written so far stay in a .partial
  file; the output path is not created. The training run recorded its network (model_config.json).
  """
  model_dir = str(tmp_path / 'model')
  training = ['--model=cnn', '--train_steps=1', '--mode=train', '--data_dir=' + small_dir,
              '--model_dir=' + model_dir, '--train_batch_size=8', '--skip_host_call']
  ok(run_main(*training))
  model, data = network_record.read(model_dir)
  assert model == config_from_args(*training).model
  assert (model.model, model.num_classes, model.image_size, data.data_dir) == (
      'cnn', 10, 28, small_dir)
  good = read_records(os.path.join(small_dir, 'validation-*'), 3)
  bad = tf.train.Example(features=tf.train.Features(feature={
      'image/encoded': tf.train.Feature(bytes_list=tf.train.BytesList(value=[b'not an image'])),
  })).SerializeToString()
  for name, records in (('good', good), ('mixed', good + [bad])):
    with tf.io.TFRecordWriter(str(tmp_path / (name + '.tfrecord'))) as writer:
      for record in records:
        writer.write(record)
  common = ['--mode=predict', '--model=cnn', '--data_dir=' + small_dir, '--model_dir=' + model_dir,
            '--eval_batch_size=2']
  ok(run_main('--predict_input=' + str(tmp_path / 'good.tfrecord'),
              '--mirrored_devices=/cpu:0,/cpu:1', '--predict_logits', '--predict_top_k=10',
              '--predict_output=' + str(tmp_path / 'good.jsonl'), *common))
  lines = [json.loads(l) for l in (tmp_path / 'good.jsonl').read_text().splitlines()]
  assert [l['input'] for l in lines] == ['validation/0000%d.png' % i for i in range(3)]
  for line in lines:  # --predict_logits: float32 logits, unrounded, that give the probabilities
    logits = np.array(line['logits'], np.float64)
    assert logits.shape == (10,) and np.argmax(logits) == line['class']
    assert all(float(np.float32(x)) == x for x in line['logits'])
    softmax = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    assert len(line['top_k']) == 10
    for entry in line['top_k']:
      assert abs(softmax[entry['class']] - entry['probability']) < 1e-5
  assert any(round(x, 6) != x for line in lines for x in line['logits'])  # not rounded
  output = tmp_path / 'p.jsonl'
  proc = run_main('--predict_input=' + str(tmp_path / 'mixed.tfrecord'),
                  '--predict_output=' + str(output), *common)
  refused(proc, 'prediction stopped after 2 inputs: an input from validation/00002.png on',
          str(output) + '.partial')
  assert not output.exists()
  partial = (tmp_path / 'p.jsonl.partial').read_text().splitlines()
  assert len(partial) == 2 and json.loads(partial[0])['input'] == 'validation/00000.png'
  assert 'logits' not in json.loads(partial[0])  # without --predict_logits
