"""The fences of a training run on a gs:// model_dir (trainer/storage/state_fence.py): which run
gets them, and their claim as it starts, which makes every earlier holder of model_dir's lease
unable to name a checkpoint, results.json or a best checkpoint there."""

from trainer.run import best_checkpoint
from trainer.run import results as results_lib
from trainer.storage import state_fence


def claim(config, lease, fence):
  """Claims the state file's `fence` and the fences of results.json and best/'s two files, so
  that no earlier holder of the lease can write them any more, and deletes what a stalled earlier
  holder left (not a warm start's own checkpoint). Returns (results_fence, best_fences)."""
  fence.claim()
  results_fence = state_fence.StateFence(
      config.model_dir, lease, results_lib.RESULTS_FILE, 'the results file',
      'Run the same command again: it resumes from the newest checkpoint and writes them.')
  results_fence.claim()
  # Claimed by every training run (one that only trains too), so that no earlier holder can
  # name its copy in best/ once this run holds the lease.
  best_fences = {name: state_fence.StateFence(config.model_dir, lease, name, what,
                                              best_checkpoint.FENCE_AGAIN)
                 for name, what in best_checkpoint.FENCED_FILES.items()}
  for best_fence in best_fences.values():
    best_fence.claim()
  best_checkpoint.remove_orphans(config.model_dir, [config.model.init_checkpoint])
  return results_fence, best_fences


def state_fence_of(config, lease):
  """The fence on a gs:// model_dir's state file (trainer.storage.state_fence) for a training
  run that holds the lease (one process, or a TF_CONFIG cluster's chief; and then one on its
  results.json too); None elsewhere (local disk: the lease is a lock)."""
  if not lease or config.mode == 'eval' or not config.model_dir.startswith('gs://'):
    return None
  return state_fence.StateFence(config.model_dir, lease)
