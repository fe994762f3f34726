"""Which --mode reads which flag: a flag given to a mode that never reads it is refused when the
user would expect it to change the result (the weights evaluated, a wait, a prediction), and
logged as a warning when it is merely unused (the same command reused with --mode=eval).
"""

from absl import logging

from trainer.errors import PipelineError

TRAINING_MODES = ('train', 'train_and_eval')
# A dry run checks the real command before it runs on a TPU, so it accepts the flags of the
# training and evaluation jobs it stands for.
_CHECKED_BY_DRY_RUN = TRAINING_MODES + ('eval', 'dry_run')
# flag -> (the modes that read it, its value when not given, refuse (True) or warn (False)).
READ_BY = {
    'init_checkpoint': (TRAINING_MODES + ('dry_run',), None, True),
    'init_from_moving_average': (TRAINING_MODES + ('dry_run',), False, True),
    'freeze_backbone': (TRAINING_MODES + ('dry_run',), False, False),
    'eval_timeout': (('eval', 'dry_run'), 0, True),
    'early_stopping_evals': (('train_and_eval', 'dry_run'), 0, True),
    'keep_best': (('train_and_eval', 'dry_run'), True, False),
    'predict_input': (('predict',), None, True),
    'predict_output': (('predict',), None, True),
    'predict_logits': (('predict',), False, True),
    'tpu_topology': (('dry_run',), None, True),
    'export_dir': (_CHECKED_BY_DRY_RUN, None, False),
    # Replaces the export of train/eval runs and predict's output; a dry run writes neither.
    'overwrite': (TRAINING_MODES + ('eval', 'predict'), False, False),
    'profile_steps': (TRAINING_MODES, None, False),
    'predict_step_time': (TRAINING_MODES + ('dry_run',), True, False),
}

# What to do instead, where "add --mode=X or drop the flag" does not say enough.
_ADVICE = {
    'init_checkpoint': ('--mode=%(mode)s uses the newest checkpoint in --model_dir; '
                        '--init_checkpoint only starts a training run. To %(verb)s a checkpoint '
                        'this pipeline wrote, pass its directory as --model_dir; to start from '
                        'another checkpoint, train with --init_checkpoint first. Drop '
                        '--init_checkpoint.'),
    'early_stopping_evals': ('--early_stopping_evals stops a --mode=train_and_eval run; '
                             '--mode=%(mode)s does not evaluate while training. Drop the flag or '
                             'use train_and_eval.'),
}
_VERBS = {'eval': 'evaluate', 'predict': 'predict with'}


def check(f):
  """Refuses or warns about each flag `f.mode` does not read (see READ_BY).

  Args:
    f: the flag values, read as attributes (`f.mode`, `f.init_checkpoint`, ...).

  Returns:
    list of str: the flags logged as unused by this mode (names with --), for tests.

  Raises:
    PipelineError: a flag the mode does not read whose absence changes what the user gets, with
      what to do.
  """
  unused = []
  for name, (modes, unset, refuse) in READ_BY.items():
    if f.mode in modes or getattr(f, name) == unset:
      continue
    if refuse:
      advice = _ADVICE.get(name, '--%(name)s is read by --mode=%(modes)s only; '
                                 'add --mode=%(first)s '
                                 'or drop --%(name)s.')
      raise PipelineError(advice % {'name': name, 'mode': f.mode, 'modes': ' or '.join(modes),
                                    'first': modes[0], 'verb': _VERBS.get(f.mode, f.mode)})
    flag = ('--no' + name) if unset is True else '--' + name
    logging.warning('%s is not read by --mode=%s (only by --mode=%s): it has no effect on this '
                    'run.', flag, f.mode, ' or '.join(modes))
    unused.append(flag)
  return unused
