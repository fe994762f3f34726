"""The optimizer and loss of a PyTorch fine-tune, after the pipeline's recipes (models.recipes,
models.optimization), read from the exported module's `arch` (the run's ModelConfig):
  loss          cross-entropy with label smoothing (one-hot * (1 - e) + e / classes: PyTorch's
                `label_smoothing`, Szegedy et al. 2016, Sec. 7), + aux_loss_weight x the auxiliary
                head's for InceptionV3 (Sec. 8), + weight_decay x sum(w^2) / 2 over every weight
                but the batch norms' (models.optimization.weight_decay_loss);
  optimizer     'momentum': torch.optim.SGD (TF's MomentumOptimizer: accum = m * accum + g,
                w -= lr * accum, the same update); 'adam': torch.optim.Adam (TF's epsilon is added
                before the bias correction of the second moment, PyTorch's after: 1e-8 either way);
                'rmsprop': `TFRMSProp`, TF1's RMSPropOptimizer (decay 0.9, epsilon 1.0 inside the
                square root, mean square starting at 1), which torch.optim.RMSprop is not;
  rate          models.recipes.learning_rate, the schedules' reference, set before every step;
  clipping      the gradient's global norm, with gradient_clip_norm > 0.
"""

import torch
from torch import nn
from torch.nn import functional as F

from trainer.models import recipes


class TFRMSProp(torch.optim.Optimizer):
  """TF1's RMSPropOptimizer: ms = decay * ms + (1 - decay) * g^2 (ms starts at 1);
  mom = momentum * mom + lr * g / sqrt(ms + epsilon); w -= mom."""

  def __init__(self, params, lr, decay, momentum, epsilon):
    super().__init__(params, dict(lr=lr, decay=decay, momentum=momentum, epsilon=epsilon))

  @torch.no_grad()
  def step(self, closure=None):
    del closure
    for group in self.param_groups:
      for p in group['params']:
        if p.grad is None:
          continue
        state = self.state[p]
        if not state:
          state['ms'] = torch.ones_like(p)
          state['mom'] = torch.zeros_like(p)
        ms, mom = state['ms'], state['mom']
        ms.mul_(group['decay']).addcmul_(p.grad, p.grad, value=1 - group['decay'])
        mom.mul_(group['momentum']).addcdiv_(p.grad, (ms + group['epsilon']).sqrt(),
                                             value=group['lr'])
        p.sub_(mom)


def trained(network):
  """The parameters a fine-tune trains: those with requires_grad (not InceptionV3's batch-norm
  gammas, which TF's network does not have, nor the LSTM's second bias, which TF's has once)."""
  return [p for p in network.parameters() if p.requires_grad]


def optimizer(arch, network):
  """The recipe's optimizer over `network`'s trained parameters (its rate set by `set_rate`)."""
  params = trained(network)
  kind = arch['optimizer']
  if kind == 'momentum':
    return torch.optim.SGD(params, lr=0.0, momentum=arch['momentum'], nesterov=arch['nesterov'])
  if kind == 'rmsprop':
    return TFRMSProp(params, 0.0, arch['rmsprop_decay'], arch['momentum'],
                     arch['rmsprop_epsilon'])
  return torch.optim.Adam(params, lr=0.0)


def set_rate(opt, arch, step, batch_size, steps_per_epoch, total_steps):
  """Sets `opt`'s rate to the recipe's at `step`; returns it (float)."""
  rate = recipes.learning_rate(arch, step, batch_size, steps_per_epoch, total_steps)
  for group in opt.param_groups:
    group['lr'] = rate
  return rate


def decayed_weights(network):
  """The parameters weight decay applies to: the trained ones but the batch norms'."""
  norms = {id(p) for m in network.modules()
           if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d))
           for p in m.parameters()}
  return [p for p in trained(network) if id(p) not in norms]


def loss(arch, outputs, labels, decayed):
  """The training loss (float32 scalar) of the network's `outputs` (logits, or InceptionV3's
  (logits, aux_logits) in training mode) for int64 `labels`."""
  smoothing = arch['label_smoothing']
  if isinstance(outputs, tuple):
    logits, aux = outputs
    total = (F.cross_entropy(logits, labels, label_smoothing=smoothing) +
             arch['aux_loss_weight'] * F.cross_entropy(aux, labels, label_smoothing=smoothing))
  else:
    total = F.cross_entropy(outputs, labels, label_smoothing=smoothing)
  if arch['weight_decay']:
    total = total + arch['weight_decay'] * sum((w * w).sum() for w in decayed) / 2
  return total
