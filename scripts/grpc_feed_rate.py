"""What a TensorFlow 1.x client pays to feed a batch to a remote session over gRPC, on this host:
the path a 2018 Colab notebook's Keras model took to its TPU (tf.contrib.tpu's Keras support sent
every step's numpy batch in the step's own session.run, as a feed, to the TPU's gRPC server on
another VM). A tf.train.Server runs in a child process on loopback; the client feeds a float32
batch to an op placed there and fetches a scalar. Prints the median of several windows: seconds
per session.run for a tiny feed (the loop's floor) and for the batch, and the batch's MB/s.

  scripts/netns-run .venv/bin/python scripts/grpc_feed_rate.py [--shape=1024,28,28,1]

Loopback on this host's cores is the best case of the path: no network, no second VM. The
figure behind BENCHMARKS.md's Colab row (trainer/advise/targets.json's 'client_feed_rate' is the
published one it is set beside).
"""

import argparse
import statistics
import subprocess
import sys
import time

import numpy as np
import tensorflow.compat.v1 as tf

_SERVER = ('import sys, tensorflow.compat.v1 as tf; s = tf.train.Server.create_local_server(); '
           'print(s.target, flush=True); sys.stdin.read()')


def _window_seconds(session, fetch, feed, runs):
  start = time.perf_counter()
  for _ in range(runs):
    session.run(fetch, feed)
  return (time.perf_counter() - start) / runs


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--shape', default='1024,28,28,1', help='the fed batch, float32')
  parser.add_argument('--windows', type=int, default=7)
  parser.add_argument('--runs', type=int, default=20, help='session.runs per window')
  args = parser.parse_args()
  try:
    shape = [int(d) for d in args.shape.split(',')]
  except ValueError:
    parser.error('--shape=%s: give the batch\'s dimensions as integers, e.g. 1024,28,28,1'
                 % args.shape)
  if min(shape) < 1 or args.windows < 1 or args.runs < 1:
    parser.error('--shape, --windows and --runs take positive integers')
  server = subprocess.Popen([sys.executable, '-c', _SERVER], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, universal_newlines=True)
  try:
    target = server.stdout.readline().strip()
    graph = tf.Graph()
    with graph.as_default(), tf.device('/job:local/task:0/device:CPU:0'):
      batch = tf.placeholder(tf.float32, shape)
      tiny = tf.placeholder(tf.float32, [1])
      batch_sum, tiny_sum = tf.reduce_sum(batch), tf.reduce_sum(tiny)
    data = np.random.RandomState(0).rand(*shape).astype(np.float32)
    with tf.Session(target, graph=graph) as session:
      for fetch, feed in ((tiny_sum, {tiny: [1.0]}), (batch_sum, {batch: data})):
        session.run(fetch, feed)  # the first run sets the graph up on the server
      floor = statistics.median(_window_seconds(session, tiny_sum, {tiny: [1.0]}, args.runs)
                                for _ in range(args.windows))
      fed = statistics.median(_window_seconds(session, batch_sum, {batch: data}, args.runs)
                              for _ in range(args.windows))
  finally:
    server.stdin.close()
    server.wait()
  megabytes = data.nbytes / 1e6
  print('TensorFlow %s, a grpc:// session on loopback, batch %s float32 (%.2f MB)'
        % (tf.__version__, 'x'.join(map(str, shape)), megabytes))
  print('tiny feed: %.3f ms per session.run' % (floor * 1e3))
  print('batch feed: %.3f ms per session.run, %.0f MB/s (%.0f MB/s after the tiny run\'s floor)'
        % (fed * 1e3, megabytes / fed, megabytes / max(fed - floor, 1e-9)))


if __name__ == '__main__':
  main()
