"""TF_CONFIG and CLUSTER_SPEC, parsed and checked once: one validator per variable, each refusing
a value of the wrong structure with the variable, the field and what is expected, before any
work (`flags.value_checks`), instead of a traceback from wherever it is read first.

What the platforms set (Google's pages, as of 2025):

- TF_CONFIG: {"cluster": {TASK_TYPE: ["host:port", ...], ...}, "task": {"type": TASK_TYPE,
  "index": N[, "trial": ID]}[, ...]}; task types chief / worker / ps (AI Platform: master), the
  evaluator not listed in the cluster
  (https://cloud.google.com/vertex-ai/docs/training/distributed-training,
  https://cloud.google.com/ai-platform/training/docs/distributed-training-details;
  TensorFlow's reading of it: https://www.tensorflow.org/guide/distributed_training#TF_CONFIG).
- CLUSTER_SPEC (Vertex AI): the same layout with the worker pools as task types (workerpool0 ..
  workerpool3), plus "environment" and "job"
  (https://cloud.google.com/vertex-ai/docs/training/distributed-training#cluster-spec).
"""

import json
import os

from trainer.errors import PipelineError

# The task type of a process that is not in TF_CONFIG's cluster (Vertex AI worker pool 3).
EVALUATOR = 'evaluator'


def tf_config(environ=None):
  """The checked TF_CONFIG dict ({} when unset or empty).

  Raises:
    PipelineError: see `_parse`.
  """
  return _parse('TF_CONFIG', environ, 'chief, worker, ps (AI Platform: master)', (EVALUATOR,))


def cluster_spec(environ=None):
  """The checked CLUSTER_SPEC dict ({} when unset or empty).

  Raises:
    PipelineError: see `_parse`.
  """
  return _parse('CLUSTER_SPEC', environ, 'workerpool0 .. workerpool3', ())


def _parse(name, environ, task_types, outside_cluster):
  """Parses and checks the JSON of variable `name`: an object whose optional "cluster" maps task
  types to lists of "host:port" strings, and whose "task" (required with a cluster) has an integer
  "index" and, with a cluster, a "type" in it (or in `outside_cluster`) and an index within that
  type's list.

  Raises:
    PipelineError: not JSON, or of another structure; naming the variable and the field.
  """
  environ = os.environ if environ is None else environ
  raw = environ.get(name) or ''
  if not raw.strip():
    return {}
  expected = ('%s must be a JSON object like {"cluster": {"chief": ["host:port"], "worker": '
              '["host:port", ...]}, "task": {"type": "worker", "index": 0}} (task types: %s), '
              'as Vertex AI and TensorFlow set it; unset it for a single-process run.'
              % (name, task_types))
  try:
    value = json.loads(raw)
  except ValueError as e:
    raise PipelineError('%s is not valid JSON (%s): %r. %s' % (name, e, raw[:200], expected))
  if not isinstance(value, dict):
    raise PipelineError('%s is %s, not an object. %s' % (name, json.dumps(value)[:100], expected))
  cluster = value.get('cluster')
  if cluster is None:
    cluster = {}
  if not isinstance(cluster, dict):
    raise PipelineError('%s "cluster" is %s, not an object of task type -> list of addresses. %s'
                        % (name, json.dumps(cluster)[:100], expected))
  for task_type, addresses in sorted(cluster.items()):
    if not isinstance(addresses, list) or not all(isinstance(a, str) for a in addresses):
      raise PipelineError('%s "cluster"."%s" is %s, not a list of "host:port" strings. %s'
                          % (name, task_type, json.dumps(addresses)[:100], expected))
  task = value.get('task')
  if task is None and not cluster:
    return value
  if not isinstance(task, dict):
    raise PipelineError('%s "task" is %s, not an object {"type": ..., "index": N}. %s'
                        % (name, json.dumps(task)[:100], expected))
  task_type, index = task.get('type'), task.get('index', 0)
  if isinstance(index, bool) or not isinstance(index, int):
    raise PipelineError('%s "task"."index" is %s, not an integer (the task\'s position in its '
                        'cluster list). %s' % (name, json.dumps(index)[:40], expected))
  if task_type in outside_cluster or not cluster:  # no cluster: a single process (its trial id)
    return value
  if not isinstance(task_type, str) or task_type not in cluster:
    raise PipelineError('%s "task"."type" is %s, which is not a task type of its "cluster" (%s). '
                        '%s' % (name, json.dumps(task_type)[:40],
                                ', '.join(sorted(cluster)) or 'empty', expected))
  if not 0 <= index < len(cluster[task_type]):
    raise PipelineError('%s "task"."index" is %d, outside "cluster"."%s", which lists %d '
                        'address(es): the index must be in [0, %d). %s'
                        % (name, index, task_type, len(cluster[task_type]),
                           len(cluster[task_type]), expected))
  return value
