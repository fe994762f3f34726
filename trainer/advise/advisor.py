"""The advice: for each target the predicted step time and its bounds, what binds, whether the
job fits, time and cost per epoch and to the run's end; then the fastest and the cheapest
target, or "stay on the CPU" where this host is as fast or the whole run ends here before a job
elsewhere could start."""

from trainer.advise import step_model

# This host wins when no accelerator ends the run this much sooner: a CPU row is good to about
# 30% and most published accelerator cases to 1.3x, but some stay 2-4x off (docs/advise.md, "How
# well it predicts"), so a smaller gain is no reason to move.
STAY_ON_CPU_SPEEDUP = 1.5
# A job on an accelerator starts after its machine is created, its container pulled and its
# graph compiled (Vertex AI: "the job startup time that's otherwise needed for compute resource
# creation", cloud.google.com/vertex-ai/docs/training/persistent-resource-train). A minute is
# taken as a floor, an assumption not measured here: a whole run shorter than that on this host
# cannot finish sooner elsewhere.
REMOTE_JOB_START_SECONDS = 60.0


def _row(cost, target, input_rate_per_core, here_input_rate, steps_per_epoch, train_steps,
         iterations_per_loop):
  if target['kind'] == 'cpu':
    input_rate = here_input_rate
  else:
    input_rate = (input_rate_per_core * target['host_vcpus']
                  if input_rate_per_core and target.get('host_vcpus') else None)
  prediction = step_model.predict(cost, target, input_rate,
                                  iterations_per_loop if target['kind'] == 'tpu' else 1)
  fits, needed = step_model.memory_fits(cost, target)
  price = target.get('price') or {}
  row = {
      'target': target['name'], 'kind': target['kind'], 'road': target['road'],
      'machine': target.get('machine') or target.get('detail'),
      'step_seconds': prediction.seconds, 'lower_seconds': prediction.lower,
      'upper_seconds': prediction.upper, 'binds': prediction.binds,
      'compute_seconds': prediction.compute_seconds, 'memory_seconds': prediction.memory_seconds,
      'input_seconds': prediction.input_seconds, 'feed_seconds': prediction.feed_seconds,
      'overhead_seconds': prediction.overhead_seconds,
      'input_share': prediction.input_share, 'input_bound': prediction.input_bound,
      'examples_per_sec': cost.batch_size / prediction.seconds,
      'memory_needed_bytes': needed, 'fits': fits,
      'epoch_seconds': steps_per_epoch * prediction.seconds if steps_per_epoch else None,
      'run_seconds': train_steps * prediction.seconds if train_steps else None,
      'price_per_hour': price or None,
  }
  for kind in ('on_demand', 'spot'):
    if price.get(kind) is not None:
      for span in ('epoch', 'run'):
        if row[span + '_seconds'] is not None:
          row['%s_cost_%s' % (span, kind)] = row[span + '_seconds'] / 3600.0 * price[kind]
  return row


def advise(cost, targets, input_rate_per_core=None, here_input_rate=None, steps_per_epoch=None,
           train_steps=None, iterations_per_loop=100):
  """The advice for `cost` (a job_cost.JobCost) on `targets` (targets.select's list, this host
  first).

  Args:
    input_rate_per_core: the job's input_fn on this host, examples/s per core (None: not
      measured, the input left out of every prediction).
    here_input_rate: the same on all of this host's cores.
    steps_per_epoch, train_steps: the job's length, for time and cost per epoch and per run.
    iterations_per_loop: steps per host round trip on a TPU.

  Returns:
    {'rows': one dict per target, 'fastest': name, 'cheapest': name or None,
     'verdict': one sentence}.
  """
  rows = [_row(cost, t, input_rate_per_core, here_input_rate, steps_per_epoch, train_steps,
               iterations_per_loop) for t in targets]
  usable = [r for r in rows if r['fits'] is not False and r['road'] != 'historic']
  historic = [r for r in rows[1:] if r['road'] == 'historic']
  fastest = min(usable, key=lambda r: r['step_seconds'])
  priced = [r for r in usable if r.get('run_cost_on_demand') is not None or
            r.get('epoch_cost_on_demand') is not None]
  # Per run when the job's length is known, else per epoch (the report says which).
  cheapest = min(priced, key=lambda r: r.get('run_cost_on_demand') or r['epoch_cost_on_demand'],
                 default=None)
  here = rows[0]
  accelerators = [r for r in usable if r['kind'] != 'cpu']
  best = min(accelerators, key=lambda r: r['step_seconds'], default=None)
  if best is None:
    verdict = ('no accelerator fits the job' if len(rows) > 1 + len(historic) else
               'no current accelerator was asked (--targets)')
  elif here['run_seconds'] is not None and here['run_seconds'] < REMOTE_JOB_START_SECONDS:
    verdict = ('stay on the CPU: the whole run takes %.3g s here, less than an accelerator '
               "job's start-up (%d s or more)" % (here['run_seconds'], REMOTE_JOB_START_SECONDS))
  elif here['step_seconds'] <= STAY_ON_CPU_SPEEDUP * best['step_seconds']:
    verdict = ('stay on the CPU: no accelerator is predicted %.1fx faster than this host '
               '(%s binds the step on %s)' % (STAY_ON_CPU_SPEEDUP, best['binds'], best['target']))
  else:
    verdict = ('move to an accelerator: %s is predicted %.1fx faster than this host%s' % (
        best['target'], here['step_seconds'] / best['step_seconds'],
        '; %s is the cheapest' % cheapest['target'] if cheapest else ''))
  return {'rows': rows, 'fastest': fastest['target'],
          'cheapest': cheapest['target'] if cheapest else None, 'verdict': verdict}
