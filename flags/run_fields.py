"""Config fields from flags by name: `by_name` fills a config dataclass's fields from the flags
of the same names, and `run_fields` gives the run Config fields that every job of `trainer.main`
computes the same way (model_dir, seed, devices, profiling, the checkpoint interval), for
flags/to_config.py (the pipeline's own networks and a --network) and flags/to_model_fn_config.py
(a legacy --model_fn job). tests/test_config_by_name.py checks that every flag has a field of its name or is named in
NOT_A_FIELD, and every field a flag or an entry in NOT_A_FLAG."""

import dataclasses

# Flags that have no config field of their name, and where each goes instead.
NOT_A_FIELD = {
    'network': 'ModelConfig.model (a user network by its import path)',
    'model_fn': 'ModelConfig.model (a legacy model_fn job)',
    'num_classes': 'DataConfig/ModelConfig.num_classes with dataset.json',
    'num_train_examples': 'DataConfig/ModelConfig.num_train_examples with dataset.json',
    'num_eval_examples': 'DataConfig.num_eval_examples with dataset.json',
    'image_size': 'DataConfig/ModelConfig.image_size with dataset.json',
    'max_seq_length': 'DataConfig/ModelConfig.max_seq_length with dataset.json',
    'train_epochs': 'Config/ModelConfig.train_steps',
    'recipe': 'the recipe values of ModelConfig',
    'lr_decay_epochs': 'ModelConfig.lr_decay_epochs, parsed (value_rules.decay_epochs)',
    'job_dir': 'Config.model_dir when --model_dir is not given',
    'train_crop': 'DataConfig.train_crop with dataset.json',
    'crop_padding': 'DataConfig.crop_padding with dataset.json',
    'eval_crop_fraction': 'DataConfig.eval_crop_fraction with dataset.json',
    'random_flip': 'DataConfig.random_flip with dataset.json',
    'color_distortion': 'DataConfig.color_distortion with dataset.json',
    'mirrored_devices': 'Config.mirrored_devices, parsed',
    'num_gpus': 'Config.mirrored_devices',
    'profile_steps': 'Config.profile_steps, parsed',
    'seed': 'Config.seed and DataConfig.seed (drawn when not given)',
}

# Config, ModelConfig and DataConfig fields that no flag of their name sets, and where each
# comes from.
NOT_A_FLAG = {
    'data': 'Config.data: the DataConfig',
    'aux_loss_weight': 'the recipe (models/recipes.py)',
    'optimizer': 'the recipe (models/recipes.py)',
    'rmsprop_decay': 'the recipe (models/recipes.py)',
    'rmsprop_epsilon': 'the recipe (models/recipes.py)',
    'train_pattern': "dataset.json's shard names",
    'eval_pattern': "dataset.json's shard names",
    'modality': 'dataset.json (image or text)',
    'vocab_file': 'dataset.json (text)',
    'vocab_size': 'dataset.json (text)',
    'mean_rgb': "dataset.json's normalization",
    'stddev_rgb': "dataset.json's normalization",
    'image_dtype': 'the device: uint8 in the infeed of a TPU, float32 elsewhere',
}


def by_name(cls, f, **computed):
  """An instance of the dataclass `cls`: each field is the value in `computed` if there, else
  the flag of the same name in `f` (a namespace of flag values) if there is one, else the
  field's default.

  Raises:
    TypeError: a key of `computed` is not a field of `cls`.
  """
  names = {field.name for field in dataclasses.fields(cls)}
  unknown = sorted(set(computed) - names)
  if unknown:
    raise TypeError('%s has no field %s' % (cls.__name__, ', '.join(unknown)))
  values = {name: getattr(f, name) for name in names - set(computed) if hasattr(f, name)}
  return cls(**values, **computed)


def run_fields(f, model_dir, seed, mirrored_devices, profile_steps):
  """The run Config fields every job computes rather than copies from a flag of the same name.

  Args:
    f: the flag values (a namespace).
    model_dir: the run's model_dir (str).
    seed: the run's seed (int).
    mirrored_devices: tuple of MirroredStrategy devices (empty: none).
    profile_steps: (start, end) of --profile_steps, or ().

  Returns:
    dict of Config fields for `by_name`; the caller adds model, data, train_steps and its own.
  """
  return dict(model_dir=model_dir, seed=seed, mirrored_devices=mirrored_devices,
              profile_steps=profile_steps,
              save_checkpoints_steps=f.save_checkpoints_steps or f.steps_per_eval)
