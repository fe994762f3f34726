"""Flags of the Cloud TPU: which TPU, and how the job runs on it."""

from absl import flags


def define_tpu_flags():
  """Defines --use_tpu, --tpu, --tpu_zone, --gcp_project, --iterations_per_loop, --num_cores and
  --tpu_connect_timeout (once per process)."""
  flags.DEFINE_bool('use_tpu', False, 'Train on a Cloud TPU; otherwise on the local CPU/GPU.')
  flags.DEFINE_string('tpu', None,
                      'Cloud TPU name or grpc://host:8470; `local` on a single-host TPU VM; on '
                      'a TPU VM slice, the TPU\'s name, from worker 0 (default: $TPU_NAME, '
                      '$COLAB_TPU_ADDR, or $KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS on GKE and AI '
                      'Platform). Checked at start: docs/platforms.md.')
  flags.DEFINE_string('tpu_zone', None, 'GCE zone of the TPU (default: from the metadata server).')
  flags.DEFINE_string('gcp_project', None,
                      'GCP project of the TPU (default: from the metadata server).')
  flags.DEFINE_integer('iterations_per_loop', 100, 'Steps run on the TPU per host round trip.')
  flags.DEFINE_integer('num_cores', None,
                       'TPU cores (replicas) of the slice. Default: read from the TPU. Batch '
                       'sizes must divide by it; both are checked against the slice right after '
                       'the TPU is resolved, before any work.')
  flags.DEFINE_float('tpu_connect_timeout', 10.0, 'Seconds allowed to resolve and reach the TPU.')
  flags.DEFINE_bool('eval_on_tpu', True,
                    'Evaluate on the TPU; false evaluates on this VM\'s CPU (what TF 1.15 needs '
                    'to evaluate during training on a slice of several hosts).')
  flags.DEFINE_string('tpu_topology', None,
                      '--mode=dry_run: the Cloud TPU accelerator type to build the job\'s TPU '
                      'graphs for (v2-8 ... v2-512, v3-8 ... v3-2048, v4-8 ... ; v5litepod-*, '
                      'v5p-* and v6e-* are refused as at start); sets the hosts and --num_cores. '
                      'Nothing runs on a TPU. trainer.advise: a slice to predict for.')
