"""A PyTorch fine-tune of a run's exported module (`trainer.export_keras --output=model.pt`) on
the arrays of `trainer.prepare arrays`, with the run's recipe (torch_run/recipe.py).

Batches are `trainer.data.arrays.TrainBatches`' (batch b a function of the seed and b alone), so a
resumed run reads the batches an uninterrupted one reads. Every `save_every_steps` and at the end
model_dir/checkpoint-STEP.pt holds the network, the optimizer, the step and the CPU's random
state (written aside and renamed: never half a file; the newest `keep` kept); a run starts from the
newest. On SIGTERM or a first Ctrl-C the step in flight finishes, a checkpoint is written and the
run stops with trainer.errors.Preempted (the command exits 75, EXIT_RESUMABLE). At the end:
model_dir/model.pt (the same format as the export, so `classifier.load` and another fine-tune take
it) and results.json (top-1 and loss on the validation arrays).

Devices: 'cpu', 'cuda', or 'xla' (PyTorch/XLA: PJRT_DEVICE=CPU, or TPU with torch_xla[tpu] on a
TPU VM; each step ends with torch_xla.sync(), which runs the traced graph).
"""

import dataclasses
import json
import math
import os
import re
import time

from absl import logging
import numpy as np
import torch

from trainer import errors
from trainer.data import arrays
from trainer.data import dataset_json
from trainer.errors import PipelineError
from trainer.host import stop_signals
from trainer.storage import gfile
from trainer.storage import lease as lease_lib
from trainer.storage import staged
from trainer.torch_models import classifier
from trainer.torch_run import recipe

DEVICES = ('cpu', 'cuda', 'xla')
_CHECKPOINT = re.compile(r'^checkpoint-(\d+)\.pt$')


@dataclasses.dataclass(frozen=True)
class Config:
  """A fine-tune: init_model (model.pt), data_dir (arrays), model_dir, train_steps, batch_size,
  seed, device (one of DEVICES), save_every_steps, log_every_steps, keep (checkpoints),
  lease_expiry_secs (the writer's lease on model_dir, trainer.storage.lease)."""
  init_model: str
  data_dir: str
  model_dir: str
  train_steps: int
  batch_size: int
  seed: int = 0
  device: str = 'cpu'
  save_every_steps: int = 100
  log_every_steps: int = 10
  keep: int = 2
  lease_expiry_secs: int = lease_lib.DEFAULT_EXPIRY_SECS


class _Device:
  """The torch device of `name` and the call that ends a step on it."""

  def __init__(self, name):
    self.sync = lambda: None
    self.seed = torch.manual_seed  # CUDA's generators too
    if name == 'xla':
      try:
        import torch_xla  # pylint: disable=g-import-not-at-top
      except ImportError as e:
        raise PipelineError('--device=xla needs PyTorch/XLA (%s): make .venv-torch-xla/.installed '
                            '(docs/migration.md, "Training on PyTorch/XLA").' % e)
      self.device, self.sync = torch_xla.device(), torch_xla.sync
      self.seed = torch_xla.manual_seed
    elif name == 'cuda' and not torch.cuda.is_available():
      raise PipelineError('--device=cuda: this PyTorch sees no CUDA GPU (torch %s).'
                          % torch.__version__)
    else:
      self.device = torch.device(name)


def _cpu(value):
  """`value` (nested dicts and lists of tensors) with every tensor on the CPU."""
  if torch.is_tensor(value):
    return value.detach().cpu()
  if isinstance(value, dict):
    return {k: _cpu(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return type(value)(_cpu(v) for v in value)
  return value


def _checkpoints(model_dir):
  """{step: path} of model_dir's checkpoints."""
  if not gfile.isdir(model_dir):
    return {}
  found = {}
  for name in gfile.listdir(model_dir):
    match = _CHECKPOINT.match(name)
    if match:
      found[int(match.group(1))] = os.path.join(model_dir, name)
  return found


def _save(config, module, opt, step, lease):
  """model_dir/checkpoint-STEP.pt, once `lease` (trainer.storage.lease) shows this run still
  holds model_dir; the newest `config.keep` kept."""
  lease.check()
  path = os.path.join(config.model_dir, 'checkpoint-%d.pt' % step)
  state = {'step': step, 'network': _cpu(module.network.state_dict()),
           'optimizer': _cpu(opt.state_dict()), 'cpu_rng': torch.get_rng_state()}
  if torch.cuda.is_initialized():
    state['cuda_rng'] = torch.cuda.get_rng_state_all()
  classifier.write(path, state)
  found = _checkpoints(config.model_dir)
  for old in sorted(found)[:-max(config.keep, 1)]:
    gfile.remove(found[old])
  logging.info('Saved %s', path)


def _resume(config, module, opt):
  """The step the newest checkpoint reached (its state loaded), or 0."""
  found = _checkpoints(config.model_dir)
  if not found:
    return 0
  step = max(found)
  if step > config.train_steps:
    raise PipelineError('%s has a checkpoint at step %d, past --train_steps=%d: give a larger '
                        '--train_steps, or another --model_dir.' % (config.model_dir, step,
                                                                    config.train_steps))
  saved = classifier.read(found[step])
  module.network.load_state_dict(saved['network'])
  opt.load_state_dict(saved['optimizer'])
  torch.set_rng_state(saved['cpu_rng'])
  if 'cuda_rng' in saved and torch.cuda.is_available():
    torch.cuda.set_rng_state_all(saved['cuda_rng'])
  logging.info('Resuming from %s at step %d', found[step], step)
  return step


def _tensor(inputs, device):
  if inputs.ndim == 4:  # uint8 NHWC images, 0-255
    return torch.from_numpy(np.ascontiguousarray(inputs.transpose(0, 3, 1, 2))).float().to(device)
  return torch.from_numpy(inputs.astype(np.int64)).to(device)


def _evaluate(module, inputs, labels, batch_size, device):
  module.eval()
  correct, total_loss = 0, 0.0
  with torch.no_grad():
    for x, y in arrays.eval_batches(inputs, labels, batch_size):
      logits = module(_tensor(x, device.device)).float().cpu()
      target = torch.from_numpy(y.astype(np.int64))
      correct += int((logits.argmax(1) == target).sum())
      total_loss += float(torch.nn.functional.cross_entropy(logits, target, reduction='sum'))
  module.train()
  return {'top_1_accuracy': correct / len(labels), 'loss': total_loss / len(labels),
          'num_eval_examples': len(labels)}


def _data(config, arch):
  info = dataset_json.read(config.data_dir)
  if not info or not arrays.is_arrays(info):
    raise PipelineError('--data_dir=%s holds no arrays of trainer.prepare: write them with '
                        '`python -m trainer.prepare arrays --source_dir=<TFRecord data> '
                        '--output_dir=%s` (where TensorFlow is).' % (config.data_dir,
                                                                     config.data_dir))
  for key in ('num_classes', 'image_size', 'max_seq_length'):
    if arch.get(key) and info.get(key) and arch[key] != info[key]:
      raise PipelineError('%s has %s %s, the model %s %s: fine-tune on data of the run\'s shape.'
                          % (config.data_dir, key, info[key], config.init_model, arch[key]))
  return info, arrays.load(config.data_dir, info, True), arrays.load(config.data_dir, info, False)


def train(config):
  """Fine-tunes per `config`; returns the results dict (also model_dir/results.json).

  Raises:
    PipelineError: a bad model file, data or device, with what to do.
    trainer.errors.Preempted: stopped by SIGTERM or Ctrl-C after saving a checkpoint.
  """
  if not gfile.exists(config.init_model):
    raise PipelineError('--init_model=%s does not exist: give a model.pt of `trainer.export_keras '
                        '--output=model.pt`.' % config.init_model)
  try:
    module = classifier.load(config.init_model)
  except (ValueError, OSError, RuntimeError, gfile.OpError) as e:
    raise PipelineError('--init_model=%s cannot be loaded: %s (give a model.pt of '
                        'trainer.export_keras).' % (config.init_model, e))
  arch = module.arch
  _, train_data, eval_data = _data(config, arch)
  device = _Device(config.device)
  device.seed(config.seed)
  module.to(device.device).train()
  opt = recipe.optimizer(arch, module.network)
  decayed = recipe.decayed_weights(module.network)
  if arch.get('moving_average_decay'):
    logging.warning('The run kept a moving average of its weights (decay %s); this fine-tune '
                    'trains and evaluates the weights themselves.', arch['moving_average_decay'])
  gfile.makedirs(config.model_dir)
  # One writer per model_dir, as trainer.main and train_keras hold it: a second fine-tune into the
  # same directory is refused (LeaseHeld), and one that lost the lease writes nothing further.
  with lease_lib.held(config.model_dir, '--model_dir', config.lease_expiry_secs,
                      'trainer.train_torch') as lease:
    return _train(config, module, opt, decayed, device, (train_data, eval_data), lease)


def _train(config, module, opt, decayed, device, data, lease):
  """train()'s loop, under the lease: checked before every checkpoint, confirmed before model.pt
  and results.json."""
  (inputs, labels), (eval_inputs, eval_labels) = data
  arch = module.arch
  step = _resume(config, module, opt)
  batches = arrays.TrainBatches(inputs, labels, config.batch_size, config.seed).batches(step)
  steps_per_epoch = len(labels) / float(config.batch_size)
  start, start_step, losses, saved = time.time(), step, [], step
  with stop_signals.SigtermFlag() as stop:
    while step < config.train_steps and not stop.requested:
      x, y = next(batches)
      rate = recipe.set_rate(opt, arch, step, config.batch_size, steps_per_epoch,
                             config.train_steps)
      opt.zero_grad()
      value = recipe.loss(arch, module(_tensor(x, device.device)),
                          _tensor(y, device.device), decayed)
      value.backward()
      if arch.get('gradient_clip_norm'):
        torch.nn.utils.clip_grad_norm_(recipe.trained(module.network), arch['gradient_clip_norm'])
      opt.step()
      device.sync()
      step += 1
      log = step % config.log_every_steps == 0 or step == config.train_steps
      save = step % config.save_every_steps == 0 or step == config.train_steps or stop.requested
      if log or save:  # reading the loss waits for the step: only here
        loss = float(value)
        if not math.isfinite(loss):
          raise PipelineError('the loss is %s at step %d: lower the rate (the recipe\'s '
                              'base_learning_rate) or the batch.' % (loss, step))
      if log:
        losses.append(loss)
        rate_per_sec = (step - start_step) * config.batch_size / (time.time() - start)
        logging.info('step %d/%d loss %.4f lr %.5f  %.1f examples/sec  ETA %ds', step,
                     config.train_steps, loss, rate, rate_per_sec,
                     (config.train_steps - step) * config.batch_size / rate_per_sec)
      if save:
        _save(config, module, opt, step, lease)
        saved = step
    if stop.requested and saved != step:  # the signal came between two steps
      _save(config, module, opt, step, lease)
    if not stop.requested:
      results = dict(_evaluate(module, eval_inputs, eval_labels, config.batch_size, device),
                     global_step=step, logged_losses=losses, device=str(device.device),
                     init_model=config.init_model, torch_version=torch.__version__)
    if stop.requested:  # in a step or in the evaluation: the step's checkpoint is written
      raise errors.Preempted('checkpoint saved at step %d' % step, stop.cause)
  module.cpu()
  lease.confirm()
  classifier.save(module, os.path.join(config.model_dir, 'model.pt'))
  with staged.staged_file(os.path.join(config.model_dir, 'results.json')) as f:
    f.write(json.dumps(results, indent=2, sort_keys=True) + '\n')
  logging.info('eval at step %d: top_1_accuracy %.4f loss %.4f on %d examples', step,
               results['top_1_accuracy'], results['loss'], len(eval_labels))
  return results
