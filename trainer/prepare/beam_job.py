"""Runs trainer.prepare's Beam pipeline to its end, and ties a Dataflow job to the writer's lease.

On Dataflow the workers write the output, not the process that holds the lease: a launcher killed
mid-job leaves the job writing. So the job's id (with its project and region) is recorded in the
lease from the job's start until it has ended, and a run that would take the lease over refuses
while one is named, saying how to see and cancel the job (trainer/storage/lease.py); the workers
check the lease's token before each visible write (trainer/storage/writer_token.py). Ctrl-C
cancels the job, which Beam would leave running.
"""

from absl import logging
from apache_beam.options import pipeline_options
from apache_beam.runners import runner


def run_to_end(pipeline, options, lease):
  """Runs `pipeline` (built with `options`) to its end, for the holder of `lease` (a held
  trainer.storage.lease.Lease, or None). A Dataflow job's id is in `lease` from its start until
  it has ended. Ctrl-C cancels the job.

  Raises:
    what the runner raised (a failed job: Beam's own exception); KeyboardInterrupt.
  """
  result = pipeline.run()
  job_id = getattr(result, 'job_id', None)  # DataflowPipelineResult's
  job_id = job_id() if callable(job_id) else None
  if job_id and lease:
    cloud = options.view_as(pipeline_options.GoogleCloudOptions)
    lease.record(dataflow_job=job_id, dataflow_project=cloud.project, dataflow_region=cloud.region)
    logging.info('Dataflow job %s converts into %s (named in its writer\'s lease until it ends).',
                 job_id, lease.directory)
  ended = False
  try:
    result.wait_until_finish()
    ended = True
  except KeyboardInterrupt:
    ended = _cancel(result, job_id)
    raise
  except Exception:  # a failed job has ended; an error of the polling itself says nothing
    ended = _has_ended(result)
    raise
  finally:
    if job_id and lease and ended:
      lease.record(dataflow_job=None)  # else it stays named: the lease is kept (lease.release)


def _has_ended(result):
  try:
    return runner.PipelineState.is_terminal(result.state)
  except Exception:  # pylint: disable=broad-except  # not known: it may run
    return False


def _cancel(result, job_id):
  """Cancels a Dataflow job on Ctrl-C; whether it did (bool: if not, the lease keeps naming it)."""
  if not job_id:
    return True
  try:
    result.cancel()
  except Exception as e:  # pylint: disable=broad-except  # the job outlives us: say so
    logging.error('Could not cancel Dataflow job %s (%s): it may still write; cancel it with '
                  '`gcloud dataflow jobs cancel %s`.', job_id, e, job_id)
    return False
  logging.warning('Cancelled Dataflow job %s.', job_id)
  return True
