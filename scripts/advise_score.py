"""Scores `trainer.advise` on this CPU: for each network at two batch sizes, the predicted step
time of the job's bare training loop (synthetic input: the model's own step, no input pipeline)
beside the step time `trainer.benchmark model --path=session` measures, one after the other on
an otherwise idle machine. Prints the table and writes runs/advise/score-<runtime>.json.

  .venv-tf2/bin/python scripts/advise_score.py    (about 4 minutes on 2 vCPUs)
"""

import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = [
    ('cnn 28px', ['--model=cnn', '--image_size=28', '--num_classes=10'], (64, 256)),
    ('resnet-18 32px', ['--model=resnet', '--resnet_depth=18', '--image_size=32',
                        '--num_classes=10'], (64, 128)),
    ('inception_v3 75px', ['--model=inception_v3', '--image_size=75', '--num_classes=10'],
     (8, 16)),
    ('bilstm 64 tokens', ['--model=bilstm', '--max_seq_length=64',
                          '--num_classes=2'], (16, 32)),
]


def _run(args):
  proc = subprocess.run([sys.executable] + args, cwd=REPO, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, universal_newlines=True)
  if proc.returncode:
    sys.exit('%s failed:\n%s' % (' '.join(args), proc.stderr[-3000:]))
  return proc


def score_case(flags, batch_size, work):
  advice_path = os.path.join(work, 'advice.json')
  bench_path = os.path.join(work, 'bench.json')
  for path in (advice_path, bench_path):
    if os.path.exists(path):
      os.remove(path)
  _run(['-m', 'trainer.advise', '--fake_data', '--train_steps=1', '--targets=',
        '--train_batch_size=%d' % batch_size, '--output=' + advice_path] + flags)
  _run(['-m', 'trainer.benchmark', 'model', '--path=session', '--batch_size=%d' % batch_size,
        '--output=' + bench_path] + flags)
  with open(advice_path) as f:
    advice = json.load(f)
  with open(bench_path) as f:
    bench = json.load(f)
  rate = bench['measurements']['session_examples_per_sec']['median']
  here = advice['advice']['rows'][0]
  measured = batch_size / rate
  return {'predicted_seconds': here['step_seconds'], 'lower_seconds': here['lower_seconds'],
          'upper_seconds': here['upper_seconds'], 'binds': here['binds'],
          'measured_seconds': measured, 'error': here['step_seconds'] / measured - 1.0,
          'host': advice['host'], 'gflop_per_step': advice['job']['flops_per_step'] / 1e9}


def main():
  work = tempfile.mkdtemp(prefix='advise-score-')
  rows = []
  for name, flags, batches in CASES:
    for batch_size in batches:
      row = dict(score_case(flags, batch_size, work), case=name, batch_size=batch_size)
      rows.append(row)
      print('%-18s batch %4d  predicted %8.1f ms (%6.1f-%6.1f)  measured %8.1f ms  error %+5.0f%%'
            '  %s' % (name, batch_size, 1e3 * row['predicted_seconds'],
                      1e3 * row['lower_seconds'], 1e3 * row['upper_seconds'],
                      1e3 * row['measured_seconds'], 100 * row['error'], row['binds']),
            flush=True)
  out_dir = os.path.join(REPO, 'runs', 'advise')
  os.makedirs(out_dir, exist_ok=True)
  runtime = 'tf%s' % rows[0]['host']['tensorflow']
  with open(os.path.join(out_dir, 'score-%s.json' % runtime), 'w') as f:
    json.dump(rows, f, indent=2)


if __name__ == '__main__':
  main()
