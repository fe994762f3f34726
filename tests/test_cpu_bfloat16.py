"""`--precision=bfloat16` off TPU (trainer/run/cpu_bfloat16.py): oneDNN's bfloat16 rewrite of the
float32 graph on TensorFlow 2.9+, on CPUs with AVX512_BF16 or AMX-BF16; refused with one line
on TF 1.15, on other CPUs, with GPUs, with several processes or replicas, and for the BiLSTM."""

import collections
import dataclasses
import os

import pytest
import tensorflow.compat.v1 as tf
from tensorflow.core.protobuf import rewriter_config_pb2

from trainer.advise import host_probe
from trainer.advise import own_device
from trainer.advise import shape_probe
from trainer.benchmark import model_bench
from trainer.errors import PipelineError
from trainer.host import cpu as host_cpu
from trainer.run import cpu_bfloat16
from trainer.run import estimator as estimator_lib

from helpers import config_from_args
from helpers import ok
from helpers import refused
from helpers import results_of
from helpers import run_main
from helpers import TINY

TF1 = tf.__version__.startswith('1.')
HOST = host_cpu.read_cpu()
# Grappler's log line when the pass rewrote the graph (auto_mixed_precision.cc).
CONVERTED = 'nodes to bfloat16 precision'
# host_probe.measure's figures, as a fixed host for the prediction's plumbing.
FIGURES = {'conv_flops': 2e11, 'matmul_flops': 2e11, 'stream_bytes_per_sec': 2e10,
           'op_overhead': 1e-6, 'heavy_op_floor': 2e-5, 'step_overhead': 7e-5}


def _cpu(*flags):
  return host_cpu.CpuInfo(model='Some CPU', vendor=None, machine='x86_64',
                          flags=frozenset(('avx2', 'fma') + flags), logical_cpus=2,
                          physical_cores=2)


@pytest.mark.skipif(TF1, reason='TF 1.15 has no oneDNN bfloat16 rewrite: '
                    'test_tf1_refuses_bfloat16_off_tpu covers it')
def test_the_rewrite_runs_on_one_cpu_process_with_bfloat16_instructions_only(monkeypatch):
  # apply() sets TensorFlow's list variable in this process: undone after the test, so that later
  # runs here are forked from the preloaded trainer (tests/forked_main.py's LOAD_TIME).
  monkeypatch.setenv(cpu_bfloat16.ALLOWLIST_REMOVE, '')
  with pytest.raises(PipelineError, match=r'needs a CPU with AVX512_BF16 or AMX-BF16 \(.*\); '
                     'Some CPU has neither'):
    cpu_bfloat16.check('resnet', cpu=_cpu('avx512f'), gpus=[])
  for flag in host_cpu.BF16_FLAGS:  # Zen 4/5 and Cooper Lake; Sapphire Rapids' AMX
    cpu_bfloat16.check('resnet', cpu=_cpu(flag), gpus=[])
  # oneDNN held to AVX2 (ONEDNN_MAX_CPU_ISA) has no bfloat16 arithmetic on any CPU.
  capped = dataclasses.replace(_cpu('avx512_bf16'), onednn_max_isa=host_cpu.onednn_max_isa(
      {'ONEDNN_MAX_CPU_ISA': 'avx2'}))
  assert not capped.computes_bfloat16
  with pytest.raises(PipelineError, match=r'holds oneDNN below them \(ONEDNN_MAX_CPU_ISA/DNNL_MAX_CPU_ISA=AVX2\)'):
    cpu_bfloat16.check('resnet', cpu=capped, gpus=[])
  assert dataclasses.replace(capped, onednn_max_isa='AVX512_CORE_BF16').computes_bfloat16
  for kwargs, says in ((dict(gpus=['GPU:0']), 'TensorFlow sees GPUs'),
                       (dict(single_process=False), 'not MirroredStrategy or a TF_CONFIG')):
    with pytest.raises(PipelineError, match=says):
      cpu_bfloat16.check('resnet', cpu=_cpu('amx_bf16'), **dict(dict(gpus=[]), **kwargs))
  with pytest.raises(PipelineError, match="bilstm's recurrence"):
    cpu_bfloat16.check('bilstm', cpu=_cpu('amx_bf16'), gpus=[])
  for precision, use_tpu, on in (('bfloat16', False, 1), ('float32', False, 0),
                                 ('bfloat16', True, 0)):
    config = cpu_bfloat16.apply(tf.ConfigProto(), precision, use_tpu)
    assert config.graph_options.rewrite_options.auto_mixed_precision_onednn_bfloat16 == on


def test_the_step_time_probe_gets_the_runs_config_without_the_rewrite(monkeypatch):
  """cpu_bfloat16.without, on every host and runtime: a copy of the run's session config with the
  rewrite off (TF 1.15 has none: the copy as it is), the run's own config unchanged."""
  monkeypatch.setenv(cpu_bfloat16.ALLOWLIST_REMOVE, '')  # apply() sets it: undone after the test
  run = tf.ConfigProto(intra_op_parallelism_threads=2)
  if not TF1:
    run = cpu_bfloat16.apply(run, 'bfloat16', False)
  probed = cpu_bfloat16.without(run)
  assert probed.intra_op_parallelism_threads == 2
  assert cpu_bfloat16.without(None).intra_op_parallelism_threads == 0
  if not TF1:
    options = (run.graph_options.rewrite_options, probed.graph_options.rewrite_options)
    assert [getattr(o, cpu_bfloat16.REWRITE) for o in options] == [
        rewriter_config_pb2.RewriterConfig.ON, rewriter_config_pb2.RewriterConfig.OFF]


@pytest.mark.skipif(TF1 or not HOST.computes_bfloat16,
                    reason='needs TF 2.9+ and a CPU with AVX512_BF16 or AMX-BF16 (this host: '
                    '%s)' % HOST.describe())
def test_the_run_config_of_a_bfloat16_run_turns_the_rewrite_on(small_dir, tmp_path, monkeypatch):
  """What the trainer builds from the flags: the rewrite on, and off in the step-time probe."""
  monkeypatch.setenv(cpu_bfloat16.ALLOWLIST_REMOVE, '')  # apply() sets it: undone after the test
  config = config_from_args('--precision=bfloat16', '--train_steps=1', '--model_dir=' +
                            str(tmp_path), '--data_dir=' + small_dir, *TINY)
  session_config = estimator_lib.build_estimator(config).config.session_config
  assert session_config.graph_options.rewrite_options.auto_mixed_precision_onednn_bfloat16 == 1
  # The run's own step-time prediction probes this CPU with that config less the rewrite: its
  # float32 rates (the bfloat16 ones predicted the step about 2x too fast; own_device.py).
  probed = []
  monkeypatch.setattr(host_probe, 'measure_cached',
                      lambda config=None: probed.append(config) or dict(FIGURES, cached=False))
  monkeypatch.setattr(shape_probe, 'measure', lambda cost, rate, config=None: probed.append(
      config) or dict(shape_probe.NOT_TIMED))
  record = own_device.predict_run(config, session_config)
  assert record['target'] == 'this CPU' and record['precision'] == 'fp32', record
  assert len(probed) == 2  # the host's rates and its shapes, with one config
  rewrite = probed[0].graph_options.rewrite_options.auto_mixed_precision_onednn_bfloat16
  assert rewrite == rewriter_config_pb2.RewriterConfig.OFF and probed[1] is probed[0]
  assert probed[0].intra_op_parallelism_threads == session_config.intra_op_parallelism_threads
  assert session_config.graph_options.rewrite_options.auto_mixed_precision_onednn_bfloat16 == 1


@pytest.mark.skipif(TF1 or not HOST.computes_bfloat16,
                    reason='needs TF 2.9+ and a CPU with AVX512_BF16 or AMX-BF16 (this host: '
                    '%s)' % HOST.describe())
def test_the_rewrite_keeps_the_filter_gradients_float32(small_dir, tmp_path, monkeypatch):
  """One step of a bfloat16 run's ResNet train op, as the run's session config rewrites it: the
  convolutions in bfloat16, their filter gradients in float32 (cpu_bfloat16.KEEP_FLOAT32: the
  step was 14% slower with them in bfloat16), a list already in the variable kept."""
  monkeypatch.setenv(cpu_bfloat16.ALLOWLIST_REMOVE, 'Softmax')
  config = config_from_args('--precision=bfloat16', '--train_steps=1', '--model_dir=' +
                            str(tmp_path), '--data_dir=' + small_dir, *TINY)
  session_config = estimator_lib.build_estimator(config).config.session_config
  assert os.environ[cpu_bfloat16.ALLOWLIST_REMOVE] == 'Softmax,Conv2DBackpropFilter'
  options, metadata = tf.RunOptions(output_partition_graphs=True), tf.RunMetadata()
  with tf.Graph().as_default():
    train_op = model_bench.build_train_op(config)
    with tf.Session(config=session_config) as sess:
      sess.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
      sess.run(train_op, options=options, run_metadata=metadata)
  dtypes = collections.defaultdict(set)
  for graph in metadata.partition_graphs:
    for node in graph.node:
      if node.op.endswith(('Conv2D', 'Conv2DBackpropInput', 'Conv2DBackpropFilter')):
        dtypes[node.op.rsplit('Conv2D', 1)[1] or 'forward'].add(tf.as_dtype(node.attr['T'].type))
  assert dtypes['forward'] == dtypes['BackpropInput'] == {tf.bfloat16}, dict(dtypes)
  assert dtypes['BackpropFilter'] == {tf.float32}, dict(dtypes)


@pytest.mark.skipif(not TF1, reason='TF 2.15 has the rewrite')
def test_tf1_refuses_bfloat16_off_tpu(small_dir, tmp_path):
  refused(run_main('--precision=bfloat16', '--train_steps=1', '--data_dir=' + small_dir,
                   '--model_dir=' + str(tmp_path), *TINY),
          "uses TensorFlow 2.9+'s oneDNN bfloat16 rewrite; this is TensorFlow 1.15")


@pytest.mark.skipif(TF1 or not HOST.computes_bfloat16,
                    reason='needs TF 2.9+ and a CPU with AVX512_BF16 or AMX-BF16 (this host: '
                    '%s)' % HOST.describe())
def test_a_bfloat16_run_is_rewritten_and_exports_float32(small_dir, tmp_path):
  """The same run in float32 and bfloat16: grappler reports converting the bfloat16 run's graph
  only; both train and evaluate; the bfloat16 run's SavedModel is float32 (its network is built
  in float32 off TPU: no bfloat16 op is saved)."""
  for precision in ('float32', 'bfloat16'):
    model_dir = str(tmp_path / precision)
    proc = ok(run_main('--precision=' + precision, '--train_steps=2', '--steps_per_eval=2',
                       '--seed=3', '--skip_host_call', '--data_dir=' + small_dir,
                       '--model_dir=' + model_dir,
                       '--export_dir=' + str(tmp_path / (precision + '_export')), *TINY))
    assert (CONVERTED in proc.stderr) == (precision == 'bfloat16'), proc.stderr[-3000:]
    results = results_of(model_dir)
    assert results['global_step'] == 2 and results['precision'] == precision
  with tf.Graph().as_default(), tf.Session() as sess:
    meta = tf.saved_model.load(sess, ['serve'], results['export_path'])
    logits = meta.signature_def['serving_default'].outputs['logits']
    assert logits.dtype == tf.float32.as_datatype_enum
    assert not [n for n in sess.graph.as_graph_def().node
                if n.attr['T'].type == tf.bfloat16.as_datatype_enum]
