"""The run Config of a legacy job (`--model_fn` and `--input_fn`, `trainer.run.user_model_fn`):
the user's model_fn owns its network, loss, optimizer and metrics, and its input_fn its data, so
the network, recipe and data flags do not apply and no dataset.json is read.

What the pipeline cannot do for such a job is refused here in one line: --mode=predict and
--export_dir (they need the pipeline's serving features), --init_checkpoint, --keep_best and
--early_stopping_evals (they need its metrics), and the step-time prediction (its network).
"""

from trainer.data.data_config import DataConfig
from trainer.errors import PipelineError
from trainer.flags import run_fields
from trainer.models import recipes
from trainer.models.model_config import ModelConfig
from trainer.run.run_config import Config

# Flags read only by the pipeline's own model_fn or input pipeline: refused with a legacy job.
_NOT_READ = ('model', 'network', 'network_params', 'recipe', 'fake_data', 'init_checkpoint',
             'export_dir', 'predict_input', 'predict_output', 'early_stopping_evals',
             'label_smoothing', 'base_learning_rate', 'weight_decay', 'warmup_epochs',
             'lr_schedule', 'lr_decay_epochs', 'lr_decay_every_epochs', 'lr_decay_factor',
             'gradient_clip_norm', 'moving_average_decay', 'resnet_depth', 'image_size',
             'num_classes', 'label_offset', 'max_seq_length', 'freeze_backbone', 'precision',
             'momentum', 'nesterov', 'embedding_dim', 'lstm_hidden_units', 'lstm_layers',
             'lstm_pooling', 'dropout_rate', 'init_from_moving_average', 'train_crop',
             'crop_padding', 'eval_crop_fraction', 'random_flip', 'color_distortion',
             'cache_decoded', 'keep_best')


def is_model_fn_job(f):
  """Whether flag values `f` name a legacy job (--model_fn or --input_fn)."""
  return bool(getattr(f, 'model_fn', None) or getattr(f, 'input_fn', None))


def check(f, given):
  """Refuses flag combinations a legacy job cannot run.

  Args:
    f: the flag values (a namespace).
    given: names of the flags given on the command line (None: not known, not checked).

  Raises:
    PipelineError: one of --model_fn and --input_fn without the other, --mode=predict, a flag of
      _NOT_READ given, no run length, or an evaluation without --num_eval_examples.
  """
  if not (f.model_fn and f.input_fn):
    raise PipelineError('--model_fn and --input_fn come together (a legacy job\'s own model_fn '
                        'and the input_fn that feeds it): pass both.')
  if f.mode == 'predict':
    raise PipelineError('--mode=predict reads the pipeline\'s own input formats and serving '
                        'features, which a --model_fn job does not use: predict with '
                        'TPUEstimator.predict in your own code.')
  refused = sorted(name for name in _NOT_READ if given and name in given)
  if refused:
    raise PipelineError('--%s: read by the pipeline\'s own networks and input pipeline, not by '
                        'a --model_fn job (its model_fn and input_fn own them): drop %s.'
                        % (refused[0], ', '.join('--' + n for n in refused)))
  if given and 'predict_step_time' in given and f.predict_step_time:
    raise PipelineError('--predict_step_time predicts the step of the pipeline\'s own network; '
                        'for a --model_fn job ask `python -m trainer.advise --model_fn=... '
                        '--input_fn=...`: drop it.')
  if f.mode in ('train', 'train_and_eval', 'dry_run') and f.train_steps is None:
    if f.train_epochs is None or not f.num_train_examples:
      raise PipelineError('a --model_fn job needs --train_steps (or --train_epochs with '
                          '--num_train_examples): its input_fn does not say how long an epoch is.')
  if f.mode in ('eval', 'train_and_eval', 'dry_run') and not f.num_eval_examples:
    raise PipelineError('a --model_fn job that evaluates needs --num_eval_examples: evaluation '
                        'runs ceil(num_eval_examples / eval_batch_size) batches of its input_fn.')


def config_of(f, model_dir, seed, mirrored_devices, profile_steps):
  """The run Config of a legacy job; `check` has passed.

  Args:
    f: the flag values (a namespace).
    model_dir: the run's model_dir.
    seed: the run's seed.
    mirrored_devices: tuple of MirroredStrategy devices (empty: none).
    profile_steps: (start, end) of --profile_steps, or ().
  """
  if f.train_steps is not None:
    train_steps = f.train_steps
  elif f.train_epochs is not None and f.mode != 'eval':
    train_steps = recipes.steps_of_epochs(f.train_epochs, f.num_train_examples,
                                          f.train_batch_size)
  else:
    train_steps = 0
  model = ModelConfig(model=f.model_fn, input_fn=f.input_fn, num_classes=0, image_size=0,
                      train_batch_size=f.train_batch_size,
                      num_train_examples=f.num_train_examples or 0, use_tpu=f.use_tpu,
                      model_dir=model_dir, iterations_per_loop=f.iterations_per_loop)
  data = DataConfig(data_dir=f.data_dir or None, num_classes=0,
                    num_train_examples=f.num_train_examples or 0,
                    num_eval_examples=f.num_eval_examples or 0, image_size=0, seed=seed)
  # No export (a Vertex AI job's AIP_MODEL_DIR is --export_dir's default: the serving signature
  # needs the pipeline's own features), no best checkpoint and no step-time prediction (the
  # pipeline's own network); the other flags `check` refuses are at their defaults.
  return run_fields.by_name(
      Config, f, model=model, data=data, train_steps=train_steps, export_dir=None,
      keep_best=False, predict_step_time=False,
      **run_fields.run_fields(f, model_dir, seed, mirrored_devices, profile_steps))
