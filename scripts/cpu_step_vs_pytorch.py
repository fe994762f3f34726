"""make train's training step beside plain PyTorch's on this CPU, in one process pair, alternating.

  python3 scripts/cpu_step_vs_pytorch.py [--tf_venv=.venv-tf2] [--torch_venv=.venv-keras]
      [--pairs=6] [--steps_per_window=3] [--isa_cap=avx2] [--precision=bfloat16]

Two long-lived workers build their network once: the project's ResNet-18 model_fn (make train's:
32x32x3, batch 256, momentum SGD, weight decay, synthetic input, the host settings of
trainer/host/threads.py) in --tf_venv, and the same ResNet-18 layout in plain PyTorch
(torch.nn, channels-last and NCHW, SGD with momentum 0.9 and weight decay 5e-5, PyTorch's own
thread defaults) in --torch_venv. After a warm-up the driver asks them for windows of steps in
the order A B C, C B A, A B C, ...: a drift of the machine's speed costs every worker the same
over two rounds, and no two workers ever run at once. Prints each worker's median examples/s and
the ratios to PyTorch's channels-last step; --output writes them as JSON.

--precision=bfloat16 runs both in their own best bfloat16 setting on a CPU that has it (AVX512_BF16
or AMX): the project's `--precision=bfloat16` off TPU (TensorFlow 2.x's oneDNN bfloat16 rewrite,
trainer/run/cpu_bfloat16.py) against PyTorch's `torch.autocast('cpu', dtype=torch.bfloat16)`
around the forward pass and the loss (PyTorch's CPU automatic mixed precision; float32 weights and
optimizer in both).

--isa_cap=avx2 holds oneDNN (TF 2.x, PyTorch), MKL and PyTorch's own kernels to AVX2 on an
AVX-512 host (ONEDNN_MAX_CPU_ISA, DNNL_MAX_CPU_ISA, MKL_ENABLE_INSTRUCTIONS,
ATEN_CPU_CAPABILITY). intel-tensorflow 1.15.2's MKL-DNN 0.x has no such switch: with
--tf_venv=.venv-mkl the cap reaches only MKL, and the script says so.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BATCH, IMAGE_SIZE, CLASSES = 256, 32, 10
ISA_CAPS = {'avx2': {'ONEDNN_MAX_CPU_ISA': 'AVX2', 'DNNL_MAX_CPU_ISA': 'AVX2',
                     'MKL_ENABLE_INSTRUCTIONS': 'AVX2', 'ATEN_CPU_CAPABILITY': 'avx2'}}


def tf_worker(precision):
  """The project's model_fn train op in a bare session loop (trainer.benchmark model's graph)."""
  sys.path.insert(0, REPO)
  # The trainer's host settings (trainer/host/threads.py) must be in place before TensorFlow loads.
  import trainer  # noqa: F401  # pylint: disable=g-import-not-at-top,unused-import
  # isort: split
  from absl import flags as absl_flags  # pylint: disable=g-import-not-at-top
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top

  from trainer.benchmark import model_bench  # pylint: disable=g-import-not-at-top
  from trainer.cli import log_noise  # pylint: disable=g-import-not-at-top
  from trainer.flags import run_flags  # pylint: disable=g-import-not-at-top
  from trainer.flags import to_config  # pylint: disable=g-import-not-at-top
  from trainer.run import cpu_bfloat16  # pylint: disable=g-import-not-at-top
  from trainer.run import estimator as estimator_lib  # pylint: disable=g-import-not-at-top
  from trainer.run import results  # pylint: disable=g-import-not-at-top

  log_noise.quiet_unless_verbose(0)
  tf.logging.set_verbosity(tf.logging.ERROR)
  run_flags.define_run_flags()
  flags = absl_flags.FLAGS
  # make train's network and optimizer settings (Makefile, TRAIN_FLAGS_resnet).
  flags(['tf_worker', '--model=resnet', '--resnet_depth=18', '--image_size=%d' % IMAGE_SIZE,
         '--num_classes=%d' % CLASSES, '--base_learning_rate=0.2', '--weight_decay=5e-5',
         '--label_smoothing=0.1', '--precision=%s' % precision])
  config = to_config.config_from_flags(dict(
      flags.flag_values_dict(), fake_data=True, data_dir=None, model_dir='/tmp', job_dir=None,
      export_dir=None, mode='train', train_steps=1, train_epochs=None, train_batch_size=BATCH))
  graph = tf.Graph()
  with graph.as_default():
    train_op = model_bench.build_train_op(config)
    init = [tf.global_variables_initializer(), tf.local_variables_initializer()]
  # config_from_flags has refused bfloat16 where the rewrite cannot run (cpu_bfloat16.check).
  session_config = cpu_bfloat16.apply(estimator_lib.host_session_config(), precision, False)
  sess = tf.Session(graph=graph, config=session_config)
  sess.run(init)
  runtime = results.tensorflow_runtime()
  name = 'TF %s (%s%s, %s)' % (runtime['tensorflow_version'], runtime['tensorflow_build'],
                               ', oneDNN' if runtime['mkl_enabled'] else '', precision)
  serve(name, lambda: sess.run(train_op))


def torch_worker(channels_last, precision):
  """ResNet-18 v1.5 in plain PyTorch, the layout of models/resnet.py (ImageNet stem)."""
  import torch  # pylint: disable=g-import-not-at-top
  from torch import nn  # pylint: disable=g-import-not-at-top

  class Block(nn.Module):

    def __init__(self, cin, cout, stride):
      super().__init__()
      self.c1, self.b1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
      self.c2, self.b2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
      self.project = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                    nn.BatchNorm2d(cout))
                      if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x):
      y = self.b2(self.c2(torch.relu(self.b1(self.c1(x)))))
      return torch.relu(y + self.project(x))

  layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
            nn.MaxPool2d(3, 2, 1)]
  cin = 64
  for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
    layers += [Block(cin, cout, stride), Block(cout, cout, 1)]
    cin = cout
  layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, CLASSES)]
  torch.manual_seed(0)
  model = nn.Sequential(*layers)
  images = torch.randn(BATCH, 3, IMAGE_SIZE, IMAGE_SIZE)
  labels = torch.randint(0, CLASSES, (BATCH,))
  if channels_last:
    model = model.to(memory_format=torch.channels_last)
    images = images.contiguous(memory_format=torch.channels_last)
  optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-5)
  loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)  # make train's

  def step():
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast('cpu', dtype=torch.bfloat16, enabled=precision == 'bfloat16'):
      loss = loss_fn(model(images), labels)
    loss.backward()
    optimizer.step()

  serve('PyTorch %s (%s, %d threads, %s)' % (
      torch.__version__, 'channels-last' if channels_last else 'NCHW', torch.get_num_threads(),
      'autocast bfloat16' if precision == 'bfloat16' else 'float32'), step)


def serve(name, step):
  """Says its name, then runs N steps for each line 'N' on stdin and answers the seconds."""
  print(name, flush=True)
  for line in sys.stdin:
    steps = int(line)
    began = time.perf_counter()
    for _ in range(steps):
      step()
    print(time.perf_counter() - began, flush=True)


def _start(python, argv, env):
  proc = subprocess.Popen([python, os.path.abspath(__file__)] + argv, cwd=REPO, env=env,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          universal_newlines=True, bufsize=1)
  name = proc.stdout.readline().strip()
  if not name:
    raise SystemExit('error: worker %s %s did not start (see its messages above)' % (
        python, ' '.join(argv)))
  return proc, name


def _ask(proc, steps):
  proc.stdin.write('%d\n' % steps)
  return float(proc.stdout.readline())


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--worker', choices=['tf', 'torch', 'torch-nchw'], help=argparse.SUPPRESS)
  parser.add_argument('--tf_venv', default='.venv-tf2', help='virtualenv of the TensorFlow '
                      'runtime (.venv-tf2, .venv-mkl, .venv)')
  parser.add_argument('--torch_venv', default='.venv-keras', help='virtualenv with torch')
  parser.add_argument('--pairs', type=int, default=6, help='rounds of one window per worker')
  parser.add_argument('--steps_per_window', type=int, default=3)
  parser.add_argument('--warmup_steps', type=int, default=3)
  parser.add_argument('--isa_cap', choices=sorted(ISA_CAPS), help='hold the vector ISA to this')
  parser.add_argument('--precision', choices=['float32', 'bfloat16'], default='float32',
                      help='bfloat16: the project\'s CPU bfloat16 rewrite against PyTorch\'s '
                      'autocast')
  parser.add_argument('--output', help='JSON file for the result (a new file, unless --overwrite)')
  parser.add_argument('--overwrite', action='store_true', help='replace --output if it exists')
  args = parser.parse_args()
  if args.output and os.path.exists(args.output) and not args.overwrite:
    parser.exit(2, 'error: --output %s exists: pass --overwrite to replace it, or another '
                'path.\n' % args.output)
  if args.worker == 'tf':
    return tf_worker(args.precision)
  if args.worker:
    return torch_worker(args.worker == 'torch', args.precision)

  env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL='2')
  env.update(ISA_CAPS.get(args.isa_cap, {}))
  if args.isa_cap and 'mkl' in args.tf_venv:
    print('note: intel-tensorflow 1.15.2 (MKL-DNN 0.x) has no ISA switch: only its MKL calls '
          'are capped', file=sys.stderr)
  if args.precision == 'bfloat16':
    if args.isa_cap:
      parser.exit(2, 'error: --precision=bfloat16 needs the CPU\'s bfloat16 instructions, which '
                  '--isa_cap=%s takes away: drop one of them.\n' % args.isa_cap)
    ask = 'from trainer.run import cpu_bfloat16; print(cpu_bfloat16.has_rewrite())'
    try:
      answer = subprocess.run([os.path.join(args.tf_venv, 'bin', 'python'), '-c', ask], cwd=REPO,
                              env=env, stdout=subprocess.PIPE, universal_newlines=True).stdout
    except OSError as e:
      parser.exit(2, 'error: --tf_venv=%s: %s\n' % (args.tf_venv, e))
    if answer.strip() != 'True':
      parser.exit(2, 'error: --precision=bfloat16 needs TensorFlow 2.9+\'s oneDNN bfloat16 '
                  'rewrite, which %s lacks: pass --tf_venv=.venv-tf2.\n' % args.tf_venv)
  precision = ['--precision=%s' % args.precision]
  workers = [_start(os.path.join(args.tf_venv, 'bin', 'python'), ['--worker=tf'] + precision, env),
             _start(os.path.join(args.torch_venv, 'bin', 'python'), ['--worker=torch'] + precision,
                    env),
             _start(os.path.join(args.torch_venv, 'bin', 'python'),
                    ['--worker=torch-nchw'] + precision, env)]
  for proc, _ in workers:
    _ask(proc, args.warmup_steps)
  rates = [[] for _ in workers]
  for round_ in range(args.pairs * 2):
    order = range(len(workers)) if round_ % 2 == 0 else reversed(range(len(workers)))
    for i in order:
      rates[i].append(BATCH * args.steps_per_window / _ask(workers[i][0], args.steps_per_window))
  for proc, _ in workers:
    proc.stdin.close()
    proc.wait()
  medians = [statistics.median(r) for r in rates]
  cpu = next((line.split(':', 1)[1].strip() for line in open('/proc/cpuinfo')
              if line.startswith('model name')), 'unknown CPU')
  print('ResNet-18 @ %d px, batch %d, training step in %s, %s%s; %d windows of %d steps each' % (
      IMAGE_SIZE, BATCH, args.precision, cpu,
      ', ISA held to %s' % args.isa_cap if args.isa_cap else '',
      len(rates[0]), args.steps_per_window))
  for (_, name), median, r in zip(workers, medians, rates):
    print('  %-60s %7.1f examples/s (%.1f-%.1f)  %.2fx PyTorch channels-last' % (
        name, median, min(r), max(r), median / medians[1]))
  if args.output:
    with open(args.output, 'w') as f:
      json.dump({'cpu_model': cpu, 'isa_cap': args.isa_cap, 'precision': args.precision,
                 'batch_size': BATCH,
                 'steps_per_window': args.steps_per_window,
                 'workers': [{'name': name, 'examples_per_sec': r, 'median': m}
                             for (_, name), m, r in zip(workers, medians, rates)]}, f, indent=2)
  return 0


if __name__ == '__main__':
  sys.exit(main())
