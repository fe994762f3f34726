"""`--mode=dry_run`: builds the real `use_tpu=True` training, evaluation and prediction graphs
of a job for a Cloud TPU slice on a machine without one, and reports what TPUEstimator decided
on the host.

On a simulated slice (`--tpu_topology`, `trainer.tpu.simulated_slice`) TPUEstimator calls the
input_fn once per host with params['context'], builds the infeed enqueues, shards the model_fn
over the cores and builds the cross-replica sums and the host_call outfeed, exactly as on the
slice. With --use_tpu instead of --tpu_topology, the TPU that --tpu names answers itself (it must
be reachable). Nothing runs on a TPU: a hook stops each job before its session starts.

The report (<model_dir>/dry_run.json): the slice; each host's training input (the files it
reads, or that it deals out records); what crosses the infeed per step; the ops inside the TPU
computation that XLA cannot compile (`trainer.tpu.tpu_graph`); the evaluation: refused where
TF 1.x cannot evaluate on the slice, else its graph and each host's eval examples, counted by
running that host's recorded eval input_fn call again over the real data; and the prediction
graph, refused on a slice of several hosts.
"""

import contextlib
import dataclasses
import shutil
import tempfile
from typing import Optional

from absl import logging
import tensorflow.compat.v1 as tf

from trainer.data import input_fn as input_fn_lib
from trainer.data import predict_input
from trainer.data import records
from trainer.errors import PipelineError
from trainer.run import estimator as estimator_lib
from trainer.tpu import compatibility
from trainer.tpu import resolver
from trainer.tpu import simulated_slice
from trainer.tpu import topologies
from trainer.tpu import tpu_graph

REPORT_FILE = 'dry_run.json'


def _recording(input_fn, calls):
  """`input_fn` that records each call's per-core batch and params['context'] deployment."""
  def recording_input_fn(params):
    context = params.get('context')
    calls.append({'batch_size': params['batch_size'],
                  'deployment': context and tuple(context.current_input_fn_deployment())})
    return input_fn(params)
  return recording_input_fn


class _ReplayedContext(object):
  """params['context'] of a recorded input_fn call, for running that host's input again."""

  def __init__(self, deployment):
    self._deployment = deployment

  def current_input_fn_deployment(self):
    return self._deployment


def _replay_eval_input(config, call):
  """Runs one recorded eval input_fn call over the whole eval split; returns (real examples,
  padded examples, per-core batches)."""
  input_fn = input_fn_lib.input_fn_builder(config.data, is_training=False,
                                           global_batch_size=config.eval_batch_size)
  params = {'batch_size': call['batch_size']}
  if call['deployment']:
    params['context'] = _ReplayedContext(call['deployment'])
  real = padded = batches = 0
  with tf.Graph().as_default():
    features, _ = tf.data.make_one_shot_iterator(input_fn(params)).get_next()
    with tf.Session() as sess:
      while True:
        try:
          mask = sess.run(features['mask'])
        except tf.errors.OutOfRangeError:
          break
        real += int(mask.sum())
        padded += int((mask == 0).sum())
        batches += 1
  return real, padded, batches


def _host(call):
  """(host_id, num_hosts) of a recorded call (0, 1 without params['context'])."""
  return tuple(call['deployment'][1:3]) if call['deployment'] else (0, 1)


@dataclasses.dataclass(frozen=True)
class _Slice:
  """The slice the graphs are built for: simulated (`topology`, an accelerator type) or the resolved
  TPU of config.tpu (`topology` None: TPUEstimator asks the TPU itself)."""
  name: str
  num_hosts: int
  num_cores: int
  topology: Optional[str] = None

  def active(self):
    if self.topology:
      return simulated_slice.simulated_slice(self.num_hosts, self.num_cores)
    return contextlib.nullcontext()

  @property
  def tpu_master(self):
    # None: build_estimator resolves config.tpu.
    return simulated_slice.SIMULATED_MASTER if self.topology else None


def _capture(config, tpu_slice, mode):
  """(graph, recorded input_fn calls) of `mode` ('train', 'eval' or 'predict') of `config` on
  `tpu_slice`, stopped before its session starts."""
  calls = []
  with tpu_slice.active():
    estimator = estimator_lib.build_estimator(config, tpu_master=tpu_slice.tpu_master)
    train_input_fn, eval_input_fn = estimator_lib.input_fns(config, estimator)
    if mode == 'train':
      input_fn = _recording(train_input_fn, calls)
      run = lambda hooks: estimator.train(input_fn, max_steps=1, hooks=hooks)
    elif mode == 'eval':
      input_fn = _recording(eval_input_fn, calls)
      run = lambda hooks: estimator.evaluate(input_fn, steps=config.eval_steps, hooks=hooks)
    else:
      # --mode=predict's input over the eval split's records (fake data: the eval input).
      predict_input_fn = eval_input_fn if config.data.fake_data else (
          estimator_lib.predict_input_fn(config, estimator, predict_input.resolve(
              config.data.file_pattern(False), config.data.modality)))
      input_fn = _recording(predict_input_fn, calls)
      run = lambda hooks: next(estimator.predict(input_fn, hooks=hooks))
    return tpu_graph.capture_graph(run), calls


def _train_report(config, tpu_slice):
  """The training graph: one input_fn call per host, what each reads, the infeed and the ops."""
  graph, calls = _capture(config, tpu_slice, 'train')
  nodes, tpu_nodes = tpu_graph.graph_nodes(graph), tpu_graph.tpu_computation_nodes(graph)
  per_host = []
  for call in sorted(calls, key=_host):
    host_id, hosts = _host(call)
    host = {'host_id': host_id, 'num_hosts': hosts, 'per_core_batch_size': call['batch_size']}
    if not config.data.fake_data and not config.model.is_model_fn:  # its own input: unknown
      host['train_files'], host['train_split'] = records.host_files(
          config.data.file_pattern(True), host_id, hosts)
    per_host.append(host)
  return {
      'per_host': per_host, 'input_fn_calls': len(calls),
      'infeed': tpu_graph.infeed_report(nodes),
      'cross_replica_sums': sum(1 for n in nodes if n.op == 'CrossReplicaSum'),
      'tpu_ops': len(tpu_nodes), 'unsupported_ops': tpu_graph.unsupported_ops(tpu_nodes),
  }


def _graph_report(graph):
  tpu_nodes = tpu_graph.tpu_computation_nodes(graph)
  return {'tpu_ops': len(tpu_nodes), 'unsupported_ops': tpu_graph.unsupported_ops(tpu_nodes),
          'infeed': tpu_graph.infeed_report(tpu_graph.graph_nodes(graph))}


def _evaluation_report(config, tpu_slice):
  """Whether the job can evaluate on this slice (`estimator.check_tpu_evaluation` for
  --mode=train_and_eval) and, if it can, its evaluation graph and what each host's eval input
  reads: every eval example exactly once across the hosts, the same number of batches each."""
  report = {'on_tpu': config.eval_on_tpu, 'eval_steps': config.eval_steps}
  try:
    estimator_lib.check_tpu_evaluation(dataclasses.replace(config, mode='train_and_eval'),
                                       tpu_slice.num_hosts)
  except PipelineError as e:
    report['refused'] = str(e)
    return report
  graph, calls = _capture(config, tpu_slice, 'eval')
  report.update(_graph_report(graph))
  if config.data.fake_data or config.model.is_model_fn:  # no records of the pipeline's to count
    return report
  per_host, batches = [], set()
  for call in sorted(calls, key=_host):
    real, padded, host_batches = _replay_eval_input(config, call)
    per_host.append({'host_id': _host(call)[0], 'eval_examples': real, 'eval_padding': padded,
                     'eval_batches': host_batches})
    batches.add(host_batches)
  # Each step dequeues one per-core batch for every core of the host (on the CPU: one batch).
  replicas_per_host = tpu_slice.num_cores // tpu_slice.num_hosts if config.eval_on_tpu else 1
  report.update(per_host=per_host, eval_examples_read=sum(h['eval_examples'] for h in per_host),
                num_eval_examples=config.data.num_eval_examples,
                batches_match_eval_steps=batches == {config.eval_steps * replicas_per_host})
  return report


def _prediction_report(config, tpu_slice):
  """The prediction graph (`TPUEstimator.predict` on the TPU, fed the eval split's records by
  --mode=predict's input_fn), or
  why the slice cannot predict (`estimator.check_tpu_prediction`). The SavedModel export is built
  for the CPU (export_to_tpu=False) and is not part of it."""
  report = {'on_tpu': True}
  if config.model.is_model_fn:
    report['refused'] = ('--mode=predict is not run for a --model_fn job (it reads the '
                         "pipeline's own input formats)")
    return report
  try:
    estimator_lib.check_tpu_prediction(tpu_slice.num_hosts)
  except PipelineError as e:
    report['refused'] = str(e)
    return report
  graph, calls = _capture(config, tpu_slice, 'predict')
  report.update(_graph_report(graph), input_fn_calls=len(calls),
                outfeed_dequeues=sum(1 for n in tpu_graph.graph_nodes(graph)
                                     if n.op == 'OutfeedDequeueTuple'))
  return report


def _resolve_slice(config, topology):
  """The _Slice of `topology` (simulated), or of the TPU that config.tpu names (resolved and
  asked for its hosts and cores, as the real job does)."""
  if topology:
    return _Slice(topology, *topologies.slice_shape(topology), topology=topology)
  cluster = resolver.resolve_tpu(config.tpu, config.tpu_zone, config.gcp_project,
                                 timeout=config.tpu_connect_timeout)
  num_hosts, num_cores = resolver.slice_shape(
      cluster, timeout=max(60.0, config.tpu_connect_timeout))
  return _Slice(cluster.master() or compatibility.LOCAL_TPU, num_hosts, num_cores)


def dry_run(config, topology=None, step_time=None):
  """Builds the training, evaluation and prediction graphs of `config` for a TPU slice and
  checks what each host's input reads. The Estimators work in a scratch directory: the job's
  model_dir gets only the report.

  Args:
    config: `trainer.run.run_config.Config` with use_tpu (and, for a simulated slice, its
      num_cores).
    topology: the accelerator type to simulate (`trainer.tpu.topologies`); None takes the
      slice of the TPU that config.tpu names, which must be reachable (nothing runs on it).
    step_time: the step-time predictor of a simulated slice with --predict_step_time
      (`driver.run`'s), or None.

  Returns:
    the report dict (the driver writes it to <model_dir>/dry_run.json).

  Raises:
    PipelineError: an unknown topology, a TPU that cannot be resolved or does not fit the job
      (`estimator.check_tpu_slice`), or a graph that cannot be built.
  """
  tpu_slice = _resolve_slice(config, topology)
  estimator_lib.check_tpu_slice(config, tpu_slice.num_hosts, tpu_slice.num_cores)
  scratch = tempfile.mkdtemp(prefix='dry-run-')
  try:
    scratch_config = dataclasses.replace(
        config, model_dir=scratch, model=dataclasses.replace(config.model, model_dir=scratch))
    report = {
        'topology': tpu_slice.name, 'simulated': bool(topology),
        'num_hosts': tpu_slice.num_hosts, 'num_cores': tpu_slice.num_cores,
        'tensorflow_version': tf.__version__, 'model': config.model.model,
        'precision': config.model.precision,
        'per_core_batch_size': config.train_batch_size // tpu_slice.num_cores,
    }
    report.update(_train_report(scratch_config, tpu_slice))
    report['evaluation'] = _evaluation_report(scratch_config, tpu_slice)
    report['prediction'] = _prediction_report(scratch_config, tpu_slice)
    if topology and config.predict_step_time and step_time:
      report['step_time'] = step_time.predict_slice(config, topology)
  finally:
    shutil.rmtree(scratch, ignore_errors=True)
  logging.info('dry run on %s: %d hosts, %d cores, infeed %s, %d unsupported ops',
               tpu_slice.name, tpu_slice.num_hosts, tpu_slice.num_cores, report['infeed'],
               len(report['unsupported_ops']))
  step_time = report.get('step_time') or {}
  if step_time.get('target'):
    logging.info('predicted step on %s: %.4g s (bounds %.4g-%.4g s, %s binds; input not timed; '
                 'python -m trainer.advise compares every target)', step_time['target'],
                 step_time['predicted_seconds'], step_time['lower_seconds'],
                 step_time['upper_seconds'], step_time['binds'])
  return report
