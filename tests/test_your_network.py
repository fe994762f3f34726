"""A user's own network through `--network=MODULE:CALLABLE` (models/network_contract.py): each way
a network can break the contract is refused at start in one line, before anything is written.
That such a network trains, evaluates, exports, predicts and dry-runs like a built-in one:
test_main.py and test_tpu_dry_run.py (helpers.USER_NETWORK). trainer.advise times it here."""

import json
import subprocess
import sys

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from trainer.errors import PipelineError
from trainer.run import input_checks

from helpers import config_from_args
from helpers import ok
from helpers import refused
from helpers import REPO
from helpers import run_main
from helpers import USER_NETWORK

_FAKE = ['--fake_data', '--image_size=16', '--num_classes=10', '--train_steps=1']


@pytest.mark.parametrize('args, says', [
    (['--network=user_networks'], 'is not MODULE:CALLABLE'),
    (['--network=no_such_package.nets:net'],
     'module no_such_package.nets cannot be imported (No module named'),
    (['--network=user_networks:missing'], "has no 'missing'"),
    (['--network=user_networks:not_callable'], 'is a int, not a callable'),
    (['--network=user_networks:wrong_signature'],
     'takes wrong_signature(images, training), which cannot be called as network(features, *, '
     'is_training, num_classes, params)'),
    (['--network=user_networks:wrong_width'], 'returned logits of shape [2, 11]; they must be '
     '[batch, num_classes] = [2, 10]'),
    (['--network=user_networks:integer_logits'], 'returned logits of dtype int32'),
    (['--network=user_networks:numpy_logits'], 'returned ndarray as its logits'),
    (['--network=user_networks:no_variables'], 'creates no trainable variable'),
    (['--network=user_networks:needs_a_param'],
     "raised KeyError when built for training on features image uint8 [2, 16, 16, 3]: "
     "'temperature'"),
    (['--network=' + USER_NETWORK, '--model=cnn'], 'both name the network: pass one'),
    (['--network=' + USER_NETWORK, '--network_params=[1]'], 'must be a JSON object'),
    (['--network=' + USER_NETWORK, '--network_params={"width": '], 'is not JSON'),
    (['--network=' + USER_NETWORK, '--network_params={"precision": "float16"}'],
     'sets precision, which the run passes to the network itself'),
    (['--model=cnn', '--network_params={"width": 2}'], 'is read by a --network=MODULE:CALLABLE '
     'only'),
    (['--network=' + USER_NETWORK, '--freeze_backbone'], '--freeze_backbone needs a built-in'),
])
def test_a_network_that_breaks_the_contract_is_refused_in_one_line(args, says, tmp_path):
  with pytest.raises(PipelineError) as refusal:
    config = config_from_args('--model_dir=' + str(tmp_path / 'run'), *(_FAKE + args))
    input_checks.check_network(config)
  assert says in str(refusal.value)
  assert '\n' not in str(refusal.value)


def test_the_command_refuses_a_broken_network_with_status_2_and_writes_nothing(tmp_path):
  model_dir = tmp_path / 'run'
  refused(run_main('--model_dir=' + str(model_dir), '--network=tests.user_networks:wrong_width',
                   *_FAKE), 'error: network tests.user_networks:wrong_width returned logits')
  assert not model_dir.exists()


def test_a_recorded_network_is_used_and_other_params_are_refused(tmp_path):
  """What a training run records (model_config.json) stands for the network in later runs."""
  from trainer.run import network_record  # pylint: disable=g-import-not-at-top
  model_dir = str(tmp_path)
  trained = config_from_args('--model_dir=' + model_dir, '--network=' + USER_NETWORK,
                             '--network_params={"width":0.5}', '--recipe=inception_v3', *_FAKE)
  assert (trained.model.model, trained.model.network_params) == (USER_NETWORK, '{"width": 0.5}')
  network_record.write(model_dir, trained)
  again = config_from_args('--model_dir=' + model_dir, '--mode=eval', *_FAKE)
  # The recipe too: evaluation restores the moving averages the run kept.
  assert again.model == trained.model
  assert (again.model.optimizer, again.model.moving_average_decay) == ('rmsprop', 0.9999)
  with pytest.raises(PipelineError, match='--network_params={"width": 2} disagrees with the '
                     'network recorded'):
    config_from_args('--model_dir=' + model_dir, '--network_params={"width": 2}', *_FAKE)
  with pytest.raises(PipelineError, match='--model=resnet disagrees'):
    config_from_args('--model_dir=' + model_dir, '--model=resnet', *_FAKE)


def test_trainer_advise_costs_the_network_it_is_given(tmp_path):
  """The advisor's job is the user network built with its --network_params: its weights are the
  width-0.5 MobileNet's, and each target gets a step time and a verdict."""
  output = tmp_path / 'advice.json'
  ok(subprocess.run([sys.executable, '-m', 'trainer.advise', '--network=' + USER_NETWORK,
                     '--network_params={"width": 0.5}', '--image_size=32', '--num_classes=10',
                     '--train_batch_size=128', '--train_steps=2000', '--output=%s' % output],
                    cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    universal_newlines=True, timeout=300))
  report = json.loads(output.read_text())
  from examples.mobilenet import mobilenet  # pylint: disable=g-import-not-at-top
  with tf.Graph().as_default():
    mobilenet({'image': tf.zeros([2, 32, 32, 3], tf.uint8)}, is_training=True, num_classes=10,
              params={'width': 0.5, 'precision': 'float32', 'mean_rgb': [0.0] * 3,
                      'stddev_rgb': [1.0] * 3})
    weight_bytes = 4 * sum(int(np.prod(v.shape.as_list())) for v in tf.trainable_variables())
  assert report['job']['name'].startswith(USER_NETWORK)
  assert report['job']['weight_bytes'] == weight_bytes and report['job']['flops_per_step'] > 0
  assert all(row['step_seconds'] > 0 for row in report['advice']['rows'])
  assert report['advice']['verdict']
  # This CPU's row times the network's own shapes, its depthwise convolutions included.
  host = report['host']
  assert host['shapes_timed'] + host['shapes_cached'] > 0 and host['shapes_failed'] == 0, host
