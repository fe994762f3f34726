"""The scheduling of a Vertex AI job (CustomJobSpec.scheduling, custom_job.proto `Scheduling`):
Spot VMs, Flex-start, the run-time limit and what the service restarts; its rules, from the
sourced table in vertex_machines.json.

What the service does when a replica stops ("Understanding the training service",
https://cloud.google.com/vertex-ai/docs/training/understanding-training-service): a worker that
exits with a non-zero code is restarted at once on the same VM (up to 5 times, then the whole job
is retried up to 3 times); a worker whose VM goes through maintenance is restarted on another VM.
A preempted Spot VM stops the trainer with SIGTERM; it saves a checkpoint and exits 75
(trainer.errors.EXIT_RESUMABLE), not 0, so that the replica counts as stopped, not done, and its
restart resumes from $AIP_CHECKPOINT_DIR.
"""

import collections
import re

from trainer.cloud import machine_rules
from trainer.errors import PipelineError

STRATEGIES = ('STANDARD', 'SPOT', 'FLEX_START')
Scheduling = collections.namedtuple(
    'Scheduling', 'strategy max_wait_duration timeout restart_job_on_worker_restart '
    'disable_retries', defaults=(None, None, None, False, False))
_FLEX = machine_rules.TABLE['flex_start']
_DURATION = re.compile(r'^(\d+)([smhd]?)$')
_UNIT_SECONDS = {'': 1, 's': 1, 'm': 60, 'h': 3600, 'd': 86400}
# google.protobuf.Duration's range: +-315,576,000,000 s, about 10,000 years
# (google/protobuf/duration.proto); a longer one is refused by the API, not by the client library.
MAX_DURATION_SECONDS = 315576000000


def seconds(flag, text):
  """A duration flag's value in seconds: an integer with an optional unit s, m, h or d ('90m').

  Returns:
    None for None, else the whole number of seconds (int, >= 0).

  Raises:
    PipelineError: not such a duration, or longer than MAX_DURATION_SECONDS.
  """
  if text is None:
    return None
  match = _DURATION.match(text.strip())
  if not match:
    raise PipelineError('--%s=%s is not a duration: give a whole number with s, m, h or d (e.g. '
                        '--%s=12h).' % (flag, text, flag))
  value = int(match.group(1)) * _UNIT_SECONDS[match.group(2)]
  if value > MAX_DURATION_SECONDS:
    raise PipelineError('--%s=%s is %d s, longer than the longest duration Vertex AI takes '
                        '(google.protobuf.Duration: %d s, about 10,000 years): give a shorter '
                        'one (a job\'s --timeout is at most 7 days by default).'
                        % (flag, text, value, MAX_DURATION_SECONDS))
  return value


def check(job, warnings):
  """The rules of `job.scheduling` (a Scheduling, or None) with the job's machines; appends what
  the service's pages leave open to `warnings`.

  Raises:
    PipelineError: a combination the service refuses or the flags contradict, with what to pass.
  """
  s = job.scheduling
  if s is None:
    return
  if s.max_wait_duration is not None and s.strategy != 'FLEX_START':
    raise PipelineError('--max_wait_duration is how long a Flex-start job queues for its machines: '
                        'it needs --scheduling_strategy=FLEX_START.')
  if s.timeout is not None and s.timeout <= 0:
    raise PipelineError('--timeout must be longer than 0 s (the default is 7 days).')
  if s.restart_job_on_worker_restart and s.disable_retries:
    raise PipelineError('--disable_retries turns --restart_job_on_worker_restart off '
                        '(custom_job.proto, Scheduling): give one of them.')
  if s.strategy == 'FLEX_START':
    _check_flex_start(job)
  if s.strategy in ('SPOT', 'FLEX_START') and s.disable_retries:
    warnings.append('--disable_retries with --scheduling_strategy=%s: the job is not retried after '
                    '"internal errors" (custom_job.proto); whether a reclaimed VM is one is not '
                    'documented, so a preemption may end the job rather than resume it.'
                    % s.strategy)


def _check_flex_start(job):
  accelerator = job.accelerator_type
  if accelerator not in _FLEX['accelerators']:
    usable = [a for a in _FLEX['accelerators'] if a not in machine_rules.BLACKWELL]
    raise PipelineError(
        '--scheduling_strategy=FLEX_START takes %s machines only (and B200, which this '
        'trainer\'s image cannot use); this job asks for %s (%s).' % (
            ', '.join(usable), accelerator or 'a CPU machine',
            machine_rules.TABLE['sources']['flex_start'].split(' ')[0]))
  limit = _FLEX['max_timeout_seconds']
  if job.scheduling.timeout is not None and job.scheduling.timeout > limit:
    raise PipelineError('--timeout=%d s: a Flex-start job runs at most 7 days (%d s); give '
                        '--timeout=7d or less.' % (job.scheduling.timeout, limit))


def spec(s):
  """The `scheduling` of a CustomJobSpec (REST JSON, durations as '<seconds>s'), or None when
  nothing is asked (the service's defaults: STANDARD, 7 days)."""
  if s is None:
    return None
  body = {}
  if s.strategy:
    body['strategy'] = s.strategy
  if s.timeout is not None:
    body['timeout'] = '%ds' % s.timeout
  if s.max_wait_duration is not None:
    body['maxWaitDuration'] = '%ds' % s.max_wait_duration
  if s.restart_job_on_worker_restart:
    body['restartJobOnWorkerRestart'] = True
  if s.disable_retries:
    body['disableRetries'] = True
  return body or None
