"""The training-step rate of torchvision's ResNet-18 in plain PyTorch on one GPU: the baseline of
the Keras trainer's GPU figures (BENCHMARKS.md, "Keras 3 on a GPU").

python3 scripts/torch_resnet18_rate.py [--batch_size=256] [--image_size=32] [--steps=200]
    [--settings eager fast fast_nchw]

Random float32 images already on the GPU (the input is not measured), 10 classes, SGD with
momentum 0.9 and weight decay 5e-5, cross-entropy. Settings: `eager` is PyTorch's defaults
(float32, cuDNN's TF32 convolutions, NCHW); `fast` the strongest plain-PyTorch setting of
PyTorch's performance tuning guide: channels-last memory format, bfloat16 autocast and
torch.compile of the model (`fast_nchw`: the same in NCHW). Prints one line per setting and batch size: images/s
over --steps steps after --warmup steps (compilation included in the warm-up), timed between two
torch.cuda.synchronize().
"""

import argparse
import time

import torch
import torchvision


def rate(batch_size, image_size, steps, warmup, fast=False, channels_last=True):
  model = torchvision.models.resnet18(num_classes=10).cuda()
  optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-5)
  loss_fn = torch.nn.CrossEntropyLoss()
  generator = torch.Generator(device='cuda').manual_seed(0)
  images = torch.rand(batch_size, 3, image_size, image_size, device='cuda', generator=generator)
  labels = torch.randint(0, 10, (batch_size,), device='cuda', generator=generator)
  forward = model
  if fast:
    if channels_last:
      model = model.to(memory_format=torch.channels_last)
      images = images.contiguous(memory_format=torch.channels_last)
    forward = torch.compile(model)

  def step():
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast('cuda', dtype=torch.bfloat16, enabled=fast):
      loss = loss_fn(forward(images), labels)
    loss.backward()
    optimizer.step()

  for _ in range(warmup):
    step()
  torch.cuda.synchronize()
  began = time.perf_counter()
  for _ in range(steps):
    step()
  torch.cuda.synchronize()
  return steps * batch_size / (time.perf_counter() - began)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--batch_size', type=int, nargs='+', default=[256])
  parser.add_argument('--image_size', type=int, default=32)
  parser.add_argument('--steps', type=int, default=200)
  parser.add_argument('--warmup', type=int, default=30)
  parser.add_argument('--settings', nargs='+', choices=['eager', 'fast', 'fast_nchw'],
                      default=['eager'])
  args = parser.parse_args()
  print('torch %s, torchvision %s, %s' % (torch.__version__, torchvision.__version__,
                                          torch.cuda.get_device_name()))
  for setting in args.settings:
    for batch_size in args.batch_size:
      print('torchvision resnet18 %s, batch %d, %d px: %.0f images/s' % (
          {'eager': 'eager fp32', 'fast': 'compiled, channels-last, bf16 autocast',
           'fast_nchw': 'compiled, NCHW, bf16 autocast'}[setting], batch_size, args.image_size,
          rate(batch_size, args.image_size, args.steps, args.warmup, setting != 'eager',
               setting == 'fast')))


if __name__ == '__main__':
  main()
