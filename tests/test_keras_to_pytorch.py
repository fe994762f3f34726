"""The PyTorch road (Keras runtime, torch 2.13): runs of every network, trained on real data by the
pipeline's TF 1.15 and TF 2.15 runtimes, export to native torch.nn modules
(`trainer.export_keras --output=PATH.pt`) whose logits equal the pipeline's `--mode=predict`
logits within 1e-4, every class equal; the ResNets' state_dicts load into torchvision's own
classes and give the same logits once the stem's pool pads as TensorFlow's 'SAME' did; the
InceptionV3 state_dict has torchvision's names; the BiLSTM's file tokenizes raw text as the
pipeline's TensorFlow tokenizer does."""

import json
import os
import re
import sys
import types

import numpy as np
import pytest

torch = pytest.importorskip('torch', reason="the PyTorch export needs torch: pip install "
                                            "'.[keras-torch]'")
keras = pytest.importorskip('keras', minversion='3', reason='the Keras 3 runtime (.venv-keras)')

# pylint: disable=g-import-not-at-top,wrong-import-position
import tensorflow as tf

from trainer import export_keras as export_keras_lib
from trainer.data import input_fn as input_fn_lib
from trainer.data import predict_input
from trainer.data import tokenizer
from trainer.errors import PipelineError
from trainer.flags import keras_flags
from trainer.torch_models import classifier
from trainer.torch_models import layers as torch_layers
from trainer.torch_models import text

from helpers import read_records
from keras_runs import export_flags

TOLERANCE = 1e-4
# The runs (keras_runs.RUNS) each network's export is checked on: stacked BiLSTM layers with max
# pooling (TF 1.15), one with its final states (TF 2.15), ResNet-18 and -50, InceptionV3, the CNN.
NETWORKS = ('resnet', 'resnet50', 'cnn', 'inception_v3', 'bilstm', 'bilstm_final')


def _torchvision():
  """torchvision's models. PyPI's torchvision is built against PyPI's (CUDA) torch; beside PyTorch's
  CPU build its C++ operators cannot load, and registering their meta kernels stops the import.
  The model classes are plain Python and need none of them: imported without that registration."""
  try:
    import torchvision
  except RuntimeError as e:
    if 'torchvision::' not in str(e):
      raise
    for name in [n for n in sys.modules if n.startswith('torchvision')]:
      del sys.modules[name]
    sys.modules['torchvision._meta_registrations'] = types.ModuleType(
        'torchvision._meta_registrations')
    import torchvision
  return torchvision.models


def _export(run, tmp_path):
  """The run exported to tmp_path/model.pt in this process (the converter's CLI is tested in
  test_keras_convert.py); returns (path, the summary)."""
  output = str(tmp_path / 'model.pt')
  keras.backend.clear_session()
  summary = export_keras_lib.convert(export_flags(
      model_dir=run['model_dir'], data_dir=run['data_dir'], output=output,
      check_predictions=run['predictions'], check_input=run['predict_input']))
  return output, summary


def _pipeline_logits(run):
  with open(run['predictions']) as f:
    return np.array([json.loads(line)['logits'] for line in f], np.float32)


def _images(run):
  """The validation split's images as the run's evaluation fed them: float [n, 3, H, W], 0-255."""
  flags = types.SimpleNamespace(model_dir=run['model_dir'], data_dir=run['data_dir'],
                                **{name: None for name in keras_flags.SETTINGS})
  _, data = export_keras_lib.run_settings(flags)
  dataset = input_fn_lib.predict_input_fn_builder(
      data, predict_input.resolve(run['predict_input'], 'image'))({'batch_size': 64})
  images = np.concatenate([batch['image'] for batch in dataset.as_numpy_iterator()])
  return torch.from_numpy(np.ascontiguousarray(images.transpose(0, 3, 1, 2), dtype=np.float32))


def _check_torchvision_resnet(output, builder, images, expected):
  """torchvision's class, the export's state_dict loaded strictly: the same logits once its stem's
  max pool is TensorFlow's 'SAME' one; with torchvision's own (padding 1 on both sides) they
  differ on these even maps (16 px images: an 8x8 map into the pool)."""
  saved = torch.load(output, weights_only=True)
  network = getattr(_torchvision(), builder)(num_classes=saved['arch']['num_classes'])
  network.load_state_dict(saved['state_dict'], strict=True)
  network.eval()
  normalized = classifier.load(output).normalize(images)
  with torch.no_grad():
    as_torchvision = network(normalized).numpy()
    network.maxpool = torch_layers.SameMaxPool2d(3, 2)
    as_tensorflow = network(normalized).numpy()
  assert np.abs(as_tensorflow - expected).max() <= TOLERANCE
  assert np.abs(as_torchvision - expected).max() > 10 * TOLERANCE


def _check_inception_names(output):
  """Every tensor under torchvision's name and shape; at 75 px the auxiliary head's 'cover'
  convolution is 1x1 (its map is 1x1 there), 5x5 in torchvision's 299 px class."""
  ours = torch.load(output, weights_only=True)['state_dict']
  theirs = _torchvision().inception_v3(num_classes=ours['fc.bias'].shape[0], aux_logits=True,
                                       init_weights=False).state_dict()
  assert set(ours) == set(theirs)
  differ = {k for k in ours if ours[k].shape != theirs[k].shape}
  assert differ == {'AuxLogits.conv1.conv.weight'}
  assert tuple(ours['AuxLogits.conv1.conv.weight'].shape) == (768, 128, 1, 1)


TORCHVISION = {'resnet': 'resnet18', 'resnet50': 'resnet50', 'cnn': None, 'inception_v3': None,
               'bilstm': None, 'bilstm_final': None}


@pytest.mark.parametrize('name', [pytest.param(n, marks=pytest.mark.xdist_group(n))
                                  for n in NETWORKS])
def test_each_network_exports_to_pytorch_with_the_pipelines_logits(pipeline_runs, name, tmp_path):
  """The export's own check, then its file through this package's loader (the BiLSTM from raw
  text); the ResNets' state_dict through torchvision's classes, InceptionV3's against the names
  and shapes of torchvision's."""
  run = pipeline_runs(name)
  output, summary = _export(run, tmp_path)
  check = summary['check']
  print('%s (trained on %s) in PyTorch: %d inputs, largest logit difference %.3g (largest logit '
        '%.3g)' % (name, run['runtime'], check['examples'], check['max_abs_logit_difference'],
                   check['max_abs_logit']))
  assert summary['format'] == 'pytorch'
  assert summary['torchvision'] == TORCHVISION[name]
  assert check['examples'] == len(read_records(run['predict_input']))
  assert check['max_abs_logit_difference'] <= TOLERANCE
  assert check['classes_equal'] == check['examples']
  assert summary['moving_average'] == name.startswith('resnet')
  module = classifier.load(output)
  assert not module.training
  if name.startswith('bilstm'):
    examples = [tf.train.Example.FromString(r).features.feature
                for r in read_records(run['predict_input'])]
    inputs = module.preprocess([e['text/raw'].bytes_list.value[0] for e in examples])
  else:
    inputs = _images(run)
  with torch.no_grad():
    logits = module(inputs).numpy()
  expected = _pipeline_logits(run)
  assert np.abs(logits - expected).max() <= TOLERANCE
  if TORCHVISION[name]:
    _check_torchvision_resnet(output, TORCHVISION[name], inputs, expected)
  if name == 'inception_v3':
    _check_inception_names(output)


def test_the_python_tokenizer_is_the_pipelines(rotten_tomatoes_dir):
  """The BiLSTM file's preprocess splits and lower-cases as trainer.prepare did (TensorFlow string
  ops), token by token (words outside the vocabulary included), and gives its token ids: on the
  real reviews and on text that tests the rule's corners."""
  vocabulary = tokenizer.read_vocabulary(os.path.join(rotten_tomatoes_dir,
                                                      tokenizer.VOCAB_FILENAME))
  examples = [tf.train.Example.FromString(r).features.feature
              for r in read_records(os.path.join(rotten_tomatoes_dir, 'validation-*'), 300)]
  texts = [e['text/raw'].bytes_list.value[0] for e in examples]
  texts += ['ÉCOLE d\'été: İstanbul — 3½ stars!!', 'naïve   café\u00a0\u2003tab\tend',
            'don\'t…stop', b'bad \xff\xfe bytes', '', '   ', '日本語のテキスト、句読点。',
            'e\u0301 combining', 'emoji 🎬🍿 ok', 'ﬁ ligature Straße ΣΑΣ ΟΔΟΣ.',
            'sep\x1cunit\x1fnext\x85line\vtab\u2028para\u2029end']
  assert [text.tokenize(t) for t in texts] == tokenizer.tokenize_python(texts)
  length = 24
  with tf.Graph().as_default():
    ids, _ = tokenizer.texts_to_ids(
        tf.constant([t.encode('utf-8') if isinstance(t, str) else t for t in texts]),
        vocabulary, length)
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.tables_initializer())
      expected = sess.run(ids)
  np.testing.assert_array_equal(np.array(text.token_ids(texts, vocabulary, length)), expected)


@pytest.mark.parametrize('flags, says', [
    ({'output': 'm.pt', 'serving_dir': 'serving'}, "--serving_dir is the Keras export's"),
    ({'output': 'm.pt', 'upgrade': 'old.keras'}, '--upgrade rewrites a .keras file'),
    ({'output': 'm.onnx'}, 'give a path ending in .keras (Keras 3) or .pt (PyTorch)'),
])
def test_what_a_pytorch_export_cannot_do_is_refused_before_any_work(flags, says, tmp_path):
  with pytest.raises(PipelineError, match=re.escape(says)):
    export_keras_lib.convert(export_flags(model_dir=str(tmp_path),
                                         **{k: str(tmp_path / v) for k, v in flags.items()}))
  assert not os.listdir(tmp_path)
