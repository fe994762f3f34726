"""`python -m trainer.benchmark conv`: the classic micro-benchmark, 128 random 256x256x3 images
convolved with 256 5x5 filters, stride 2, 'SAME'; seconds per iteration and achieved GFLOP/s."""

import time

import tensorflow.compat.v1 as tf

from trainer.benchmark import report
from trainer.benchmark import timing

CONV_SHAPE = dict(images=(128, 256, 256, 3), filters=(5, 5, 3, 256), stride=2)


def conv_flops():
  """Multiply-adds x 2 of the conv: N x H_out x W_out x C_out x (K x K x C_in)."""
  n, h, w, c_in = CONV_SHAPE['images']
  k, _, _, c_out = CONV_SHAPE['filters']
  s = CONV_SHAPE['stride']
  return 2 * n * (-(-h // s)) * (-(-w // s)) * c_out * k * k * c_in


def bench_conv(windows, output=None):
  """Times the convolution in `windows` (`timing.Windows`) and writes the record; returns it."""
  with tf.Graph().as_default():
    # Variables, so the convolution cannot be constant-folded away.
    images = tf.Variable(tf.random.normal(CONV_SHAPE['images']), name='images')
    filters = tf.Variable(tf.random.normal(CONV_SHAPE['filters']), name='filters')
    s = CONV_SHAPE['stride']
    conv = tf.nn.conv2d(images, filters, strides=[1, s, s, 1], padding='SAME')
    # Fetch one value of the output: grappler prunes ops reached only through control edges,
    # and fetching all 2 GiB of it would time the copy.
    run_conv = conv[0, 0, 0, 0]
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      times = []
      for _ in range(windows.total_steps):
        sess.run(run_conv)
        times.append(time.perf_counter())
  per_sec = windows.rates(times, 1)
  flops = conv_flops()
  measurements = {'seconds_per_iteration': timing.summarize([1.0 / r for r in per_sec]),
                  'gflops_per_sec': timing.summarize([r * flops / 1e9 for r in per_sec])}
  details = dict(CONV_SHAPE, padding='SAME', flops_per_iteration=flops, **windows.as_record())
  rows = [['conv 5x5/2, 128x256x256x3 -> 256',
           report.fmt(measurements['seconds_per_iteration'], digits=3),
           report.fmt(measurements['gflops_per_sec'])]]
  return report.write_record('conv', details, measurements, rows,
                             ['op', 's/iteration median (min-max)', 'GFLOP/s'], output)
