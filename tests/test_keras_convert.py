"""The way off Estimator (Keras runtime: TF 2.21 + Keras 3 + JAX): checkpoints of the four
networks and of a user's network (through its Keras twin), trained on real data by the
pipeline's TF 1.15 and TF 2.15 runtimes, convert to Keras models whose logits equal the
pipeline's `--mode=predict` logits within 1e-4 under the TensorFlow, the JAX and the PyTorch
backend; a .keras file of the old layer names upgrades to one torch loads; the serving export
answers like today's SavedModel (two runs export one); the reference ResNet-50 layout, moving
averages and bfloat16 tensors convert; what does not map is refused by name."""

import json
import os

import numpy as np
import pytest

keras = pytest.importorskip('keras', minversion='3', reason='the Keras 3 runtime (.venv-keras)')

# pylint: disable=g-import-not-at-top,wrong-import-position
import tensorflow as tf

from trainer import export_keras as export_keras_lib
from trainer.errors import PipelineError
from trainer.keras_models import build
from trainer.keras_models import layers as layers_lib
from trainer.models.model_config import ModelConfig

from helpers import needs_gcs
from helpers import read_records
from helpers import refused
from keras_runs import export_flags
from keras_runs import export_keras
from keras_runs import FOLDER_RUNS
from keras_runs import KERAS_TWINS
from keras_runs import PYTORCH_RUNS
from keras_runs import RUNS

TOLERANCE = 1e-4
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'fixtures')


_FOLDER_NETWORKS = {RUNS[name][1] for name in FOLDER_RUNS}


def _backends(name):
  if name in FOLDER_RUNS:
    return ['jax']
  has_folder_run = RUNS[name][1] in _FOLDER_NETWORKS
  return ['tensorflow', 'torch'] if has_folder_run else ['tensorflow', 'jax', 'torch']


# Every network on every backend: the text runs, the user's network (mobilenet) and InceptionV3's
# one run (on an image folder) on all three; the CNN's and the ResNet's Fashion-MNIST runs on
# TensorFlow and PyTorch, their image-folder runs (other data and runtime, the same converter) on
# JAX (the checkpoint format is the runtimes' common one). The serving export is written where a
# run has today's SavedModel to compare it with (a ResNet and a BiLSTM); the Keras trainer's tests
# write the CNN's and InceptionV3's. A run's tests share one pytest-xdist worker, which trains it
# once (`make test` runs `--dist loadgroup`): spread over two, each trained it.
@pytest.mark.parametrize('name, backend', [
    pytest.param(name, backend, marks=pytest.mark.xdist_group(name))
    for name in sorted(set(RUNS) - set(PYTORCH_RUNS)) for backend in _backends(name)])
def test_converted_logits_equal_the_pipelines_predictions(pipeline_runs, name, backend, tmp_path):
  run = pipeline_runs(name)
  output = str(tmp_path / 'model.keras')
  compare_serving = backend == 'tensorflow' and run['export_dir'] is not None
  proc, summary = export_keras(
      '--model_dir=' + run['model_dir'], '--output=' + output,
      '--check_predictions=' + run['predictions'], '--check_input=' + run['predict_input'],
      '--serving_dir=' + (str(tmp_path / 'serving') if compare_serving else ''),
      *(['--keras_network=' + KERAS_TWINS[name]] if name in KERAS_TWINS else []),
      backend=backend)
  assert proc.returncode == 0, proc.stderr[-3000:]
  check = summary['check']
  print('%s %s (trained on %s): %d inputs, largest logit difference %.3g (largest logit %.3g)'
        % (name, backend, run['runtime'], check['examples'], check['max_abs_logit_difference'],
           check['max_abs_logit']))
  assert summary['backend'] == backend
  assert check['examples'] == len(read_records(run['predict_input']))
  assert check['max_abs_logit_difference'] <= TOLERANCE
  assert check['classes_equal'] == check['examples']
  # The ResNets' runs kept the weights' moving averages, and predicted with them: so did this.
  assert summary['moving_average'] == name.startswith('resnet')
  assert os.path.getsize(output) > 0
  if compare_serving:
    _check_serving_export(run, summary['serving_dir'], name)


def _answers(export_dir, inputs, input_name):
  served = tf.saved_model.load(export_dir).signatures['serving_default']
  out = served(**{input_name: tf.constant(inputs)})
  return out['classes'].numpy(), out['logits'].numpy()


def _check_serving_export(run, serving_dir, name):
  """The Keras serving export answers the raw inputs (encoded images, texts) of the validation
  split like today's SavedModel of the same run."""
  examples = [tf.train.Example.FromString(r).features.feature
              for r in read_records(run['predict_input'])]
  key, input_name = (('text/raw', 'text') if name.startswith('bilstm') else
                     ('image/encoded', 'image_bytes'))
  inputs = [e[key].bytes_list.value[0] for e in examples]
  today = tf.io.gfile.glob(os.path.join(run['export_dir'], '[0-9]*'))[0]
  classes, logits = _answers(today, inputs, input_name)
  keras_classes, keras_logits = _answers(serving_dir, inputs, input_name)
  np.testing.assert_array_equal(keras_classes, classes)
  assert np.abs(keras_logits - logits).max() <= TOLERANCE


def test_an_old_format_file_upgrades_to_one_every_backend_loads(tmp_path, monkeypatch):
  """A .keras file written with the earlier layer names ('block1.conv2d': the separator was
  '.', which torch refuses) upgrades with one command, run here on torch; the upgraded file
  holds the same weights and computes the same logits."""
  monkeypatch.setattr(layers_lib, 'SCOPE_SEPARATOR', '.')  # as the earlier version built it
  old_model = build.build_model(ModelConfig(model='cnn', num_classes=10, image_size=8))
  old = str(tmp_path / 'old.keras')
  old_model.save(old)
  assert 'block1.conv2d' in [l.name for l in old_model.layers]
  new = str(tmp_path / 'new.keras')
  proc, summary = export_keras('--upgrade=' + old, '--output=' + new, backend='torch')
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert summary['backend'] == 'torch' and summary['layers_renamed'] == 6
  assert summary['weights'] == len(old_model.weights)
  new_model = keras.saving.load_model(new)
  assert 'block1-conv2d' in [l.name for l in new_model.layers]
  images = np.random.RandomState(0).randint(0, 256, (4, 8, 8, 3)).astype(np.float32)
  np.testing.assert_array_equal(new_model.predict(images, verbose=0),
                                old_model.predict(images, verbose=0))
  proc, _ = export_keras('--upgrade=' + old, '--output=' + new)  # refused before any backend work
  refused(proc, 'already exists')
  proc, _ = export_keras('--upgrade=' + str(tmp_path), '--output=' + str(tmp_path / 'x.keras'))
  refused(proc, 'cannot be upgraded')


def _save_checkpoint(tensors, prefix):
  """A name-based (TF1 Saver format) checkpoint of {name: ndarray} at `prefix`."""
  names = sorted(tensors)
  tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[''] * len(names),
                    tensors=[tensors[n] for n in names])
  return prefix


def _reference_checkpoint(depth, prefix):
  """A checkpoint with the names and shapes of the Cloud TPU reference ResNet (tests/fixtures,
  listed from a checkpoint its code wrote), seeded random values (positive variances)."""
  with open(os.path.join(FIXTURES, 'reference_resnet%d_variables.json' % depth)) as f:
    variables = json.load(f)
  rng = np.random.RandomState(depth)
  tensors = {name: np.abs(rng.standard_normal(shape)).astype(np.float32) * 0.1
             for name, shape in variables}
  tensors['global_step'] = np.int64(1)
  return _save_checkpoint(tensors, prefix), tensors


def test_the_reference_resnet50_layout_converts_every_weight(tmp_path):
  prefix, tensors = _reference_checkpoint(50, str(tmp_path / 'model.ckpt-1'))
  output = str(tmp_path / 'r50.keras')
  summary = export_keras_lib.convert(export_flags(
      checkpoint=prefix, output=output, model='resnet', resnet_depth='50', num_classes=1001,
      image_size=64))
  assert summary['layout'] == 'Cloud TPU reference ResNet'
  # Every weight, none of the optimizer's slots (*/Momentum) or the step.
  assert summary['weights'] == sum(1 for n in tensors if n.split('/')[-1] not in ('Momentum',
                                                                             'global_step'))
  model = keras.saving.load_model(output)
  layer = {l.name: l for l in model.layers}
  # Stem, then stage 1 block 1: its projection (the 2nd convolution created), then its 1x1.
  np.testing.assert_array_equal(layer['conv2d'].kernel.numpy(), tensors['conv2d/kernel'])
  np.testing.assert_array_equal(layer['stage1_block1-conv2d'].kernel.numpy(),
                                tensors['conv2d_1/kernel'])
  np.testing.assert_array_equal(layer['stage1_block1-conv2d_1'].kernel.numpy(),
                                tensors['conv2d_2/kernel'])
  np.testing.assert_array_equal(layer['stage4_block3-batch_normalization_2'].moving_variance
                                .numpy(), tensors['batch_normalization_52/moving_variance'])
  np.testing.assert_array_equal(layer['dense'].kernel.numpy(), tensors['dense/kernel'])


def test_a_reference_resnet18_is_refused_for_its_extra_projection(tmp_path):
  prefix, _ = _reference_checkpoint(18, str(tmp_path / 'model.ckpt-1'))
  with pytest.raises(PipelineError, match='reference ResNet with 21 convolutions; this ResNet '
                                          'has 20'):
    export_keras_lib.convert(export_flags(checkpoint=prefix, output=str(tmp_path / 'x.keras'),
                                    model='resnet', resnet_depth='18', num_classes=1001,
                                    image_size=32))


@pytest.mark.xdist_group('cnn')
def test_bfloat16_tensors_are_widened_and_unmapped_weights_named(pipeline_runs, tmp_path):
  run = pipeline_runs('cnn')
  reader = tf.train.load_checkpoint(run['model_dir'])
  tensors = {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}
  narrowed = {n: (tf.cast(v, tf.bfloat16).numpy() if v.dtype == np.float32 else v)
              for n, v in tensors.items()}
  prefix = _save_checkpoint(narrowed, str(tmp_path / 'bf16' / 'model.ckpt-20'))
  output = str(tmp_path / 'bf16.keras')
  summary = export_keras_lib.convert(export_flags(model_dir=run['model_dir'], checkpoint=prefix,
                                            output=output))
  assert summary['widened_from_bfloat16'] == summary['weights'] == 22
  kernel = {l.name: l for l in keras.saving.load_model(output).layers}['logits'].kernel.numpy()
  np.testing.assert_array_equal(kernel, narrowed['logits/kernel'].astype(np.float32))

  extra = dict(tensors, **{'block4/conv2d/kernel': tensors['block3/conv2d/kernel']})
  prefix = _save_checkpoint(extra, str(tmp_path / 'extra' / 'model.ckpt-20'))
  with pytest.raises(PipelineError, match='holds 1 weights the Keras network does not have '
                                          r'\(first: block4/conv2d/kernel\)'):
    export_keras_lib.convert(export_flags(model_dir=run['model_dir'], checkpoint=prefix,
                                    output=str(tmp_path / 'x.keras')))
  missing = {n: v for n, v in tensors.items() if not n.startswith('dense/')}
  prefix = _save_checkpoint(missing, str(tmp_path / 'missing' / 'model.ckpt-20'))
  with pytest.raises(PipelineError, match='has no tensor dense/kernel, which the Keras weight '
                                          'dense/kernel needs'):
    export_keras_lib.convert(export_flags(model_dir=run['model_dir'], checkpoint=prefix,
                                    output=str(tmp_path / 'x.keras')))


@pytest.mark.xdist_group('cnn')
def test_bad_requests_are_refused_with_what_to_do(pipeline_runs, tmp_path):
  run = pipeline_runs('cnn')
  proc, _ = export_keras('--model_dir=' + str(tmp_path), '--output=' + str(tmp_path / 'x.keras'))
  refused(proc, 'has no model_config.json', 'pass --model and --data_dir')
  proc, _ = export_keras('--model_dir=' + run['model_dir'], '--output=' + str(tmp_path / 'x.h5'))
  refused(proc, 'give a path ending in .keras')
  proc, _ = export_keras('--model_dir=' + run['model_dir'], '--output=' + str(tmp_path / 'x.keras'),
                         '--use_moving_average')
  refused(proc, 'holds no moving averages', 'without --use_moving_average')
  proc, _ = export_keras('--model_dir=' + run['model_dir'], '--output=' + str(tmp_path / 'x.keras'),
                         '--num_classes=7')
  refused(proc, '--num_classes=7 disagrees with the network recorded in', '(num_classes=10)')
  proc, _ = export_keras('--model_dir=' + run['model_dir'], '--output=' + str(tmp_path / 'x.keras'),
                         '--check_predictions=' + run['predictions'])
  refused(proc, '--check_predictions and --check_input go together')


@pytest.mark.xdist_group('cnn')
@needs_gcs
def test_a_run_on_gcs_converts_to_gcs(pipeline_runs):
  run = pipeline_runs('cnn')
  gcs_run = 'gs://bkt/keras-%s/run' % os.getpid()
  for path in tf.io.gfile.glob(os.path.join(run['model_dir'], '*')):
    if not tf.io.gfile.isdir(path):
      tf.io.gfile.copy(path, gcs_run + '/' + os.path.basename(path), overwrite=True)
  output = gcs_run.replace('/run', '/keras/model.keras')
  proc, summary = export_keras('--model_dir=' + gcs_run, '--output=' + output,
                               '--check_predictions=' + run['predictions'],
                               '--check_input=' + run['predict_input'])
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert summary['checkpoint'].startswith(gcs_run + '/model.ckpt-')
  assert summary['check']['max_abs_logit_difference'] <= TOLERANCE
  assert tf.io.gfile.exists(output)
  assert tf.io.gfile.exists(output.replace('model.keras', 'model_serving/saved_model.pb'))


@pytest.mark.xdist_group('resnet')
def test_averages_are_all_or_nothing_and_a_failed_check_writes_nothing(pipeline_runs, tmp_path):
  """Without model_config.json the user says whether to use the moving averages; with them,
  every weight needs one; logits that disagree leave no model behind."""
  run = pipeline_runs('resnet')
  reader = tf.train.load_checkpoint(run['model_dir'])
  tensors = {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}
  prefix = _save_checkpoint(tensors, str(tmp_path / 'copy' / 'model.ckpt-30'))
  settings = dict(checkpoint=prefix, model='resnet', resnet_depth='18', image_size=16,
                  data_dir=run['data_dir'])
  with pytest.raises(PipelineError, match='pass --use_moving_average or --nouse_moving_average'):
    export_keras_lib.convert(export_flags(output=str(tmp_path / 'x.keras'), **settings))
  partial = {n: v for n, v in tensors.items() if n != 'dense/bias/ExponentialMovingAverage'}
  prefix = _save_checkpoint(partial, str(tmp_path / 'partial' / 'model.ckpt-30'))
  with pytest.raises(PipelineError, match='no moving average of 1 weights \\(first: dense/bias\\)'):
    export_keras_lib.convert(export_flags(output=str(tmp_path / 'x.keras'), use_moving_average=True,
                                    **dict(settings, checkpoint=prefix)))
  # The raw weights are not what the run predicted with: the check fails and nothing is written.
  output = tmp_path / 'raw' / 'model.keras'
  with pytest.raises(PipelineError, match='the Keras model\'s logits differ from'):
    export_keras_lib.convert(export_flags(
        output=str(output), use_moving_average=False, check_predictions=run['predictions'],
        check_input=run['predict_input'], **settings))
  assert not output.exists() and not output.parent.exists()
