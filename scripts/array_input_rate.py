"""How fast the Keras trainer's NumPy input (trainer/data/arrays.py) makes training batches on
the host, without a model: the rate the accelerator must not outrun (BENCHMARKS.md).

python3 scripts/array_input_rate.py DATA_DIR [--batch_size=256] [--batches=2000]

DATA_DIR is a directory of `trainer.prepare arrays`. Prints images/s of TrainBatches with the
one-hot targets the trainer adds (trainer/keras_run/recipe.one_hot_batches), one thread.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position

from trainer.data import arrays  # pylint: disable=g-import-not-at-top,wrong-import-position
from trainer.data import dataset_json  # pylint: disable=g-import-not-at-top,wrong-import-position


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('data_dir')
  parser.add_argument('--batch_size', type=int, default=256)
  parser.add_argument('--batches', type=int, default=2000)
  args = parser.parse_args()
  info = dataset_json.read(args.data_dir)
  inputs, labels = arrays.load(args.data_dir, info, True)
  stream = arrays.TrainBatches(inputs, labels, args.batch_size, seed=0).batches(0)
  identity = np.eye(info['num_classes'], dtype=np.float32)
  began = time.perf_counter()
  for _ in range(args.batches):
    images, batch_labels = next(stream)
    identity[batch_labels]  # pylint: disable=pointless-statement
  seconds = time.perf_counter() - began
  print('arrays input, batch %d: %.0f images/s on one host thread (%d batches in %.2f s)'
        % (args.batch_size, args.batches * args.batch_size / seconds, args.batches, seconds))


if __name__ == '__main__':
  main()
