"""`--precision=bfloat16` off TPU: training in bfloat16 on CPUs that compute it natively.

The graph stays float32 (variables, the loss, the optimizer, what is exported); TensorFlow's
grappler pass `auto_mixed_precision_onednn_bfloat16` (TF 2.9 and later, RewriterConfig field
`auto_mixed_precision_onednn_bfloat16`; its allow list covers the convolutions and matmuls, its
deny list keeps softmax, cross-entropy and the like in float32) rewrites the session's graph so
that those run in bfloat16 on oneDNN's kernels, in training and in the run's evaluations (so
results.json's accuracy is the bfloat16 network's; the SavedModel serves in float32). It pays
only where the CPU computes bfloat16 itself (`trainer.host.cpu.CpuInfo.computes_bfloat16`);
without it oneDNN would emulate bfloat16, slower than float32.

Covered: one process on the CPU, the image networks. Not covered, so refused: TF 1.15, oneDNN
turned off (TF_ENABLE_ONEDNN_OPTS=0: the pass would not run), GPUs, MirroredStrategy and
TF_CONFIG clusters (not measured), and the BiLSTM, whose recurrence must stay float32
(models/bilstm.py), which the rewrite's matmul rule cannot promise.

The convolutions' filter gradients (Conv2DBackpropFilter) stay float32: with them in bfloat16,
make train's ResNet-18 step ran 14% slower on a Zen 5 (1,542 against 1,797 examples/s; float32
gradients are also the more precise). The rewrite's lists are changed the one way TensorFlow
offers, its environment variables TF_AUTO_MIXED_PRECISION_GRAPH_REWRITE_<LIST>_ADD/_REMOVE, read
when a session's graph is rewritten (tensorflow/core/grappler/optimizers/
auto_mixed_precision_lists.h, UpdateList); `apply` adds KEEP_FLOAT32 to a value already set.

Measured on AMD EPYC Zen 5 (2 vCPUs, TF 2.15.1): make train's ResNet-18 step 1.28x float32's
(1.16x with the filter gradients in bfloat16 too; BENCHMARKS.md, "bfloat16 on the CPU").
"""

import os

import tensorflow.compat.v1 as tf
from tensorflow.core.protobuf import rewriter_config_pb2

from trainer.errors import PipelineError
from trainer.host import cpu as host_cpu
from trainer.models.model_config import TEXT_MODELS
from trainer.run import tf_build

REWRITE = 'auto_mixed_precision_onednn_bfloat16'
# Ops the rewrite's allow list would run in bfloat16 that stay float32 (the module docstring).
KEEP_FLOAT32 = ('Conv2DBackpropFilter',)
ALLOWLIST_REMOVE = 'TF_AUTO_MIXED_PRECISION_GRAPH_REWRITE_ALLOWLIST_REMOVE'


def has_rewrite():
  """Whether this TensorFlow has the oneDNN bfloat16 rewrite (TF >= 2.9; not TF 1.15)."""
  return REWRITE in rewriter_config_pb2.RewriterConfig.DESCRIPTOR.fields_by_name


def check(model, single_process=True, cpu=None, gpus=None):
  """Refuses --precision=bfloat16 off TPU where it would not run as the module docstring says.

  Args:
    model: the network (--model or a --network MODULE:CALLABLE).
    single_process: False for MirroredStrategy (--num_gpus, --mirrored_devices) or a TF_CONFIG
      cluster.
    cpu: a trainer.host.cpu.CpuInfo (default: this machine's).
    gpus: the GPUs TensorFlow sees (default: asked).

  Raises:
    PipelineError: in one line, what is missing and what to do.
  """
  drop = ': drop --precision (float32).'
  if not has_rewrite():
    raise PipelineError(
        '--precision=bfloat16 without --use_tpu uses TensorFlow 2.9+\'s oneDNN bfloat16 rewrite; '
        'this is TensorFlow %s: run it on the TF 2.15 runtime (make train RUNTIME=tf2, or '
        '.venv-tf2) or drop --precision.' % tf.__version__)
  if not tf_build.mkl_enabled():
    raise PipelineError('--precision=bfloat16 without --use_tpu runs on oneDNN, which is off in '
                        'this process (TF_ENABLE_ONEDNN_OPTS=0?): unset that, or drop '
                        '--precision.')
  if model in TEXT_MODELS:
    raise PipelineError('--precision=bfloat16 without --use_tpu would also run the %s\'s '
                        'recurrence in bfloat16, which is kept float32 on purpose%s'
                        % (model, drop))
  if not single_process:
    raise PipelineError('--precision=bfloat16 without --use_tpu covers one process on the CPU, '
                        'not MirroredStrategy or a TF_CONFIG cluster%s' % drop)
  if gpus is None:
    gpus = tf.config.list_physical_devices('GPU')
  if gpus:
    raise PipelineError('--precision=bfloat16 without --use_tpu is the CPU\'s bfloat16 (oneDNN), '
                        'and TensorFlow sees GPUs, which it does not cover%s' % drop)
  cpu = cpu or host_cpu.read_cpu()
  if not cpu.has_bfloat16_instructions:
    raise PipelineError(
        '--precision=bfloat16 without --use_tpu needs a CPU with AVX512_BF16 or AMX-BF16 (AMD '
        'Zen 4 or later, Intel Cooper Lake or Sapphire Rapids and later); %s has neither, and '
        'emulated bfloat16 is slower than float32%s' % (cpu.model or cpu.machine, drop))
  if not cpu.computes_bfloat16:
    raise PipelineError(
        '--precision=bfloat16 without --use_tpu needs oneDNN\'s bfloat16 instructions, and the '
        'environment holds oneDNN below them (%s=%s): unset it%s'
        % ('/'.join(host_cpu.ONEDNN_ISA_VARIABLES), cpu.onednn_max_isa, drop))


def without(session_config):
  """A copy of `session_config` (a tf.ConfigProto, or None) with the rewrite off."""
  plain = tf.ConfigProto()
  if session_config is not None:
    plain.CopyFrom(session_config)
  if has_rewrite():
    setattr(plain.graph_options.rewrite_options, REWRITE, rewriter_config_pb2.RewriterConfig.OFF)
  return plain


def apply(session_config, precision, use_tpu):
  """Turns the rewrite on in `session_config` (a tf.ConfigProto, changed in place) for a
  bfloat16 run off TPU, with KEEP_FLOAT32 out of its allow list in this process's environment
  (ALLOWLIST_REMOVE, for the sessions created after this); returns session_config."""
  if precision == 'bfloat16' and not use_tpu:
    setattr(session_config.graph_options.rewrite_options, REWRITE,
            rewriter_config_pb2.RewriterConfig.ON)
    given = [name for name in os.environ.get(ALLOWLIST_REMOVE, '').split(',') if name]
    os.environ[ALLOWLIST_REMOVE] = ','.join(given + [n for n in KEEP_FLOAT32 if n not in given])
  return session_config
