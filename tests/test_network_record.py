"""model_config.json, the record of a run's network for tools outside Estimator
(trainer/run/network_record.py), in process: it gives back the configs it was written from, drops
what a newer writer added with a warning, and refuses a damaged one saying what to do. That a
training run writes it: test_main.py and test_predict.py."""

import json

import pytest

from trainer.errors import PipelineError
from trainer.run import network_record

from helpers import config_from_args

pytestmark = pytest.mark.one_runtime('the run record is Python and JSON, the same on both')


@pytest.fixture
def written(tmp_path):
  """(model_dir, the Config recorded in it, the record as a dict)."""
  config = config_from_args('--fake_data', '--model=resnet', '--model_dir=' + str(tmp_path),
                            '--resnet_depth=34', '--moving_average_decay=0.99',
                            '--lr_decay_epochs=3,6.5', '--train_steps=10')
  network_record.write(str(tmp_path), config)
  return str(tmp_path), config, json.loads((tmp_path / network_record.FILE).read_text())


def test_the_record_gives_back_the_configs_it_was_written_from(written, tmp_path):
  model_dir, config, record = written
  assert sorted(record) == ['data', 'format', 'model'] and record['format'] == 1
  assert record['model']['lr_decay_epochs'] == [3.0, 6.5] and record['data']['data_dir'] is None
  model, data = network_record.read(model_dir)
  assert model == config.model and data == config.data
  assert (model.resnet_depth, model.moving_average_decay) == (34, 0.99)
  for name in ('mean_rgb', 'stddev_rgb', 'lr_decay_epochs'):
    assert isinstance(getattr(model, name), tuple), name
  assert network_record.read(str(tmp_path / 'elsewhere')) is None  # runs of earlier versions

  # Written again (a restarted run): replaced, not appended to.
  other = config_from_args('--fake_data', '--model=cnn', '--model_dir=' + str(tmp_path / 'b'),
                           '--image_size=28', '--train_steps=10')
  network_record.write(model_dir, other)
  assert network_record.read(model_dir) == (other.model, other.data)


def test_settings_of_a_newer_writer_are_dropped_with_a_warning(written, caplog):
  model_dir, config, record = written
  record['model']['stochastic_depth'] = 0.1
  record['data']['mixup'] = True
  record['optimizer_state'] = {}
  with open(network_record.path(model_dir), 'w') as f:
    json.dump(record, f)
  caplog.set_level('WARNING')
  assert network_record.read(model_dir) == (config.model, config.data)
  warned = ' '.join(r.getMessage() for r in caplog.records)
  assert network_record.FILE in warned
  for name in ('model.stochastic_depth', 'data.mixup', 'optimizer_state'):
    assert name in warned


@pytest.mark.parametrize('damage, message', [
    (lambda text, record: text[:40], 'is not a network record of this pipeline'),
    (lambda text, record: '[1, 2]', 'not a JSON object'),
    (lambda text, record: text.replace('"model": {', '"network": {', 1),
     'no "model" section'),
    (lambda text, record: dict(record, data=[1]), '"data" is not a JSON object'),
    (lambda text, record: dict(record, format=None), '"format" is None, not 1'),
    (lambda text, record: dict(record, data={'data_dir': None}), "\"data\": .*'num_classes'"),
    (lambda text, record: dict(record, model=dict(record['model'], resnet_depth=35)),
     '"model": resnet_depth must be one of'),
    (lambda text, record: dict(record, format=2),
     'format 2, written by a newer version of this pipeline; this one reads format 1'),
])
def test_a_damaged_record_is_refused_with_what_to_do(written, damage, message):
  model_dir, _, record = written
  with open(network_record.path(model_dir)) as f:
    damaged = damage(f.read(), record)
  with open(network_record.path(model_dir), 'w') as f:
    f.write(damaged if isinstance(damaged, str) else json.dumps(damaged))
  with pytest.raises(PipelineError, match=message) as refusal:
    network_record.read(model_dir)
  assert str(refusal.value).startswith(network_record.path(model_dir))
  assert "delete it and pass the network's settings as flags." in str(refusal.value)


def _recorded(model_dir, *args):
  """Records the network of `args` (a fake-data run) in model_dir, as training does."""
  network_record.write(model_dir, config_from_args('--fake_data', '--model_dir=' + model_dir,
                                                   '--train_steps=10', *args))


def test_a_run_remembers_its_network_in_every_mode(tmp_path):
  model_dir = str(tmp_path / 'run')
  _recorded(model_dir, '--model=resnet', '--resnet_depth=18', '--image_size=16',
            '--num_classes=7')
  for mode in ('eval', 'train'):
    config = config_from_args('--fake_data', '--mode=' + mode, '--model_dir=' + model_dir,
                              '--train_steps=20')
    model = config.model
    assert (model.model, model.resnet_depth, model.image_size, model.num_classes) == (
        'resnet', 18, 16, 7), mode
  # A flag that agrees with the record is fine.
  assert config_from_args('--fake_data', '--mode=eval', '--model_dir=' + model_dir,
                          '--resnet_depth=18').model.resnet_depth == 18


@pytest.mark.parametrize('flag', ['--resnet_depth=50', '--model=cnn', '--num_classes=10',
                                  '--image_size=32'])
def test_a_network_flag_that_disagrees_with_the_record_is_refused(tmp_path, flag):
  model_dir = str(tmp_path / 'run')
  _recorded(model_dir, '--model=resnet', '--resnet_depth=18', '--image_size=16',
            '--num_classes=7')
  name, value = flag[2:].split('=')
  with pytest.raises(PipelineError) as refusal:
    config_from_args('--fake_data', '--mode=eval', '--model_dir=' + model_dir, flag)
  message = str(refusal.value)
  assert message.startswith('%s disagrees with the network recorded in %s' % (
      flag, network_record.path(model_dir)))
  assert '(%s=' % name in message and 'Leave --%s out' % name in message
  assert value not in message.split('(')[1].split(')')[0]  # the recorded value is the other


def test_a_warm_start_takes_the_backbone_of_the_checkpoints_run(tmp_path):
  source = str(tmp_path / 'source')
  _recorded(source, '--model=resnet', '--resnet_depth=34', '--image_size=16', '--num_classes=7')
  config = config_from_args('--fake_data', '--mode=train', '--model_dir=' + str(tmp_path / 'new'),
                            '--init_checkpoint=' + source, '--num_classes=3', '--image_size=24',
                            '--train_steps=5')
  assert (config.model.resnet_depth, config.model.num_classes, config.model.image_size) == (
      34, 3, 24)
  with pytest.raises(PipelineError, match="--resnet_depth=50 disagrees .*--init_checkpoint's "
                     'weights only fit that network'):
    config_from_args('--fake_data', '--mode=train', '--model_dir=' + str(tmp_path / 'new'),
                     '--init_checkpoint=' + source, '--resnet_depth=50', '--train_steps=5')
