"""Flags of `trainer.train_torch` (a PyTorch fine-tune of an exported run), and its config."""

from absl import flags

from trainer.torch_run import job


def define_train_torch_flags():
  """Defines the fine-tune's flags on absl's FLAGS."""
  flags.DEFINE_string('init_model', None, 'The run to fine-tune: a model.pt of '
                      '`trainer.export_keras --output=model.pt` (or of an earlier fine-tune).')
  flags.DEFINE_string('data_dir', None, 'The arrays of `trainer.prepare arrays` (train.npz, '
                      'validation.npz), of the run\'s image size or max_seq_length.')
  flags.DEFINE_string('model_dir', None, 'Checkpoints (checkpoint-STEP.pt), model.pt and '
                      'results.json. A checkpoint there is resumed from.')
  flags.DEFINE_integer('train_steps', None, 'Total training steps (the cosine schedule\'s '
                       'length too).', lower_bound=1)
  flags.DEFINE_integer('train_batch_size', 128, 'Examples per step.', lower_bound=1)
  flags.DEFINE_integer('seed', 0, 'Seeds the batches\' order and the initial random state.')
  flags.DEFINE_enum('device', 'cpu', job.DEVICES, 'cpu; cuda (a GPU); xla (PyTorch/XLA: '
                    'PJRT_DEVICE=CPU, or TPU with torch_xla[tpu] on a TPU VM).')
  flags.DEFINE_integer('save_checkpoints_steps', 100, 'Steps between checkpoints.',
                       lower_bound=1)
  flags.DEFINE_integer('log_every_steps', 10, 'Steps between progress lines.', lower_bound=1)
  flags.DEFINE_integer('lease_expiry_secs', 180, 'The run holds a lease on --model_dir, as '
                       'trainer.train_keras does: a second run on it is refused (gs://: renewed '
                       'every sixth of this, taken over after this long unrenewed).',
                       lower_bound=12)
  for name in ('init_model', 'data_dir', 'model_dir', 'train_steps'):
    flags.mark_flag_as_required(name)


def config(f):
  """The job.Config of the parsed flags `f`."""
  return job.Config(init_model=f.init_model, data_dir=f.data_dir, model_dir=f.model_dir,
                    train_steps=f.train_steps, batch_size=f.train_batch_size, seed=f.seed,
                    device=f.device, save_every_steps=f.save_checkpoints_steps,
                    log_every_steps=f.log_every_steps, lease_expiry_secs=f.lease_expiry_secs)
