"""The training input of PyTorch's ImageNet recipe on one core of this host, examples/s: each
image read from a JPEG file, decoded with PIL and put through torchvision's RandomResizedCrop(224),
RandomHorizontalFlip, ToTensor and Normalize (pytorch/examples imagenet/main.py; PyTorch/XLA's
test/test_train_mp_imagenet.py uses the same transforms). The images are about 400x350 crops of
scikit-image's sample photos (the size of an average ImageNet photo, as `trainer.prepare photos`
cuts them), JPEG quality 90. One process, one thread: the per-core rate a DataLoader worker has,
before its inter-process copy of the tensor (not counted). It is the figure behind BENCHMARKS.md's
PyTorch/XLA row (trainer.advise --road=torch_xla --input_rate).

  .venv-keras/bin/python scripts/torchvision_input_rate.py [--seconds=20] [--photos_dir=DIR]

DIR: scikit-image's data folder (default: the one in .venv-tf2, which `make test` installs).
"""

import argparse
import glob
import io
import os
import statistics
import sys
import tempfile
import time
import types

import numpy as np
from PIL import Image
import torch

try:
  from torchvision import transforms
except RuntimeError as e:  # PyPI's torchvision beside PyTorch's CPU build (docs/migration.md):
  if 'torchvision::' not in str(e):  # its C++ operators cannot load; the transforms need none
    raise
  for _name in [n for n in sys.modules if n.startswith('torchvision')]:
    del sys.modules[_name]
  sys.modules['torchvision._meta_registrations'] = types.ModuleType('_meta_registrations')
  from torchvision import transforms

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CROP = (350, 400)  # height, width: trainer/prepare/photos.py's


def _jpegs(photos_dir, out_dir):
  paths = []
  for path in sorted(glob.glob(os.path.join(photos_dir, '*.png')) +
                     glob.glob(os.path.join(photos_dir, '*.jpg'))):
    image = Image.open(path).convert('RGB')
    if image.height < CROP[0] or image.width < CROP[1]:
      continue
    pixels = np.asarray(image)[:CROP[0], :CROP[1]]
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format='JPEG', quality=90)
    paths.append(os.path.join(out_dir, os.path.basename(path) + '.jpg'))
    with open(paths[-1], 'wb') as f:
      f.write(buffer.getvalue())
  if not paths:
    raise SystemExit('no photo of at least %dx%d in %s' % (CROP[1], CROP[0], photos_dir))
  return paths


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--seconds', type=float, default=20.0)
  parser.add_argument('--photos_dir', default=(glob.glob(os.path.join(
      REPO, '.venv-tf2/lib/python3*/site-packages/skimage/data')) or [''])[0])
  args = parser.parse_args()
  torch.set_num_threads(1)
  preprocess = transforms.Compose([
      transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(), transforms.ToTensor(),
      transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])])
  torch.manual_seed(0)
  with tempfile.TemporaryDirectory() as tmp:
    paths = _jpegs(args.photos_dir, tmp)
    rates, start, count = [], time.perf_counter(), 0
    window = time.perf_counter()
    while time.perf_counter() - start < args.seconds:
      with open(paths[count % len(paths)], 'rb') as f:
        image = Image.open(f).convert('RGB')
      preprocess(image)
      count += 1
      if count % 50 == 0:
        now = time.perf_counter()
        rates.append(50 / (now - window))
        window = now
  if not rates:
    raise SystemExit('fewer than 50 images in %.0f s: give more --seconds' % args.seconds)
  print('%d photos, %d images in %.0f s: median %.0f images/s per core (windows of 50: %.0f-%.0f)'
        % (len(paths), count, args.seconds, statistics.median(rates), min(rates), max(rates)))


if __name__ == '__main__':
  main()
