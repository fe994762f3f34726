"""Turns parsed flags (+ dataset.json) into one checked `trainer.config.Config`.

Every bad combination is refused here, before any graph is built or any TPU is contacted.
"""

import math

from models.config import MODEL_DEFAULTS, TEXT_MODELS, ModelConfig
from trainer import dataset_info
from trainer import storage
from trainer.config import Config, DataConfig, PipelineError

# ImageNet-shaped defaults for --fake_data without dataset.json.
_FAKE_DEFAULTS = {'num_classes': 1000, 'image_size': 224, 'num_train_examples': 1281167,
                  'num_eval_examples': 50000, 'label_offset': 0}
# The same for text models: binary sentiment-sized data.
_FAKE_TEXT_DEFAULTS = {'modality': 'text', 'num_classes': 2, 'num_train_examples': 10000,
                       'num_eval_examples': 2000, 'label_offset': 0, 'max_seq_length': 64,
                       'vocab_size': 20000}


def _from_metadata(flag_values, info):
  """Values for the dataset-dependent flags: the flag if set, else dataset.json, else an error."""
  derived = {
      'num_classes': info.get('num_classes'),
      'num_train_examples': info.get('num_train_examples'),
      'num_eval_examples': info.get('num_eval_examples'),
      'label_offset': info.get('label_offset'),
  }
  if info.get('modality', 'image') == 'text':
    derived['max_seq_length'] = info.get('max_seq_length')
    values = {'vocab_size': info.get('vocab_size')}  # the vocab.txt the records were made with
  else:
    derived['image_size'] = (max(info['image_height'], info['image_width'])
                             if 'image_height' in info else info.get('image_size'))
    values = {}
  missing = []
  for name, from_info in derived.items():
    value = getattr(flag_values, name)
    values[name] = from_info if value is None else value
    if values[name] is None:
      missing.append('--' + name)
  if missing:
    raise PipelineError(
        '%s not set and no dataset.json in --data_dir to take them from. Pass them (for ImageNet '
        'converted by the usual scripts: --num_classes=1000 --label_offset=1 --image_size=224 '
        '--num_train_examples=1281167 --num_eval_examples=50000) or prepare the data with '
        '`python -m trainer.prepare`.' % ', '.join(missing))
  return values


def _preprocessing_value(f, preprocessing, name, default=None):
  """--name if given, else dataset.json's preprocessing[name], else `default` or, when that is
  None, the DataConfig default."""
  value = getattr(f, name)
  if value is not None:
    return value
  return preprocessing.get(name, getattr(DataConfig, name) if default is None else default)


def _recipe_values(f):
  """The optimisation settings: each flag if given, else the --model recipe in MODEL_DEFAULTS."""
  values = dict(MODEL_DEFAULTS[f.model])
  for name in ('lr_schedule', 'base_learning_rate', 'weight_decay', 'label_smoothing',
               'warmup_epochs', 'lr_decay_every_epochs', 'lr_decay_factor',
               'moving_average_decay', 'gradient_clip_norm'):
    if getattr(f, name) is not None:
      values[name] = getattr(f, name)
  if f.lr_decay_epochs is not None:
    values['lr_decay_epochs'] = tuple(float(e) for e in f.lr_decay_epochs)
  # A decay flag the chosen schedule does not read would be silently ignored.
  for name, schedule in (('lr_decay_epochs', 'step'), ('lr_decay_every_epochs', 'exponential')):
    if getattr(f, name) is not None and values['lr_schedule'] != schedule:
      raise PipelineError('--%s is read by the %s schedule only, but --model=%s trains with the %s '
                          'schedule: add --lr_schedule=%s or drop --%s.'
                          % (name, schedule, f.model, values['lr_schedule'], schedule, name))
  return values


def model_dir_of(f):
  """--model_dir, else the --job_dir AI Platform passes.

  Raises:
    PipelineError: neither is given.
  """
  model_dir = f.model_dir or f.job_dir
  if not model_dir:
    raise PipelineError('--model_dir is required (checkpoints, TensorBoard events and '
                        'results.json go there); on AI Platform --job-dir serves as its default.')
  return model_dir


def _check_combinations(f):
  if f.fake_data and f.data_dir:
    raise PipelineError('--fake_data and --data_dir are exclusive: pass one.')
  if not f.fake_data and not f.data_dir:
    raise PipelineError('--data_dir is required (a directory of TFRecord shards, e.g. made by '
                        '`python -m trainer.prepare fashion_mnist --output_dir DIR`); use '
                        '--fake_data for a synthetic smoke test.')
  if f.precision == 'bfloat16' and not f.use_tpu:
    raise PipelineError('--precision=bfloat16 needs --use_tpu: CPUs and GPUs here train in '
                        'float32. Drop --precision or add --use_tpu.')
  if not f.use_tpu:
    for name in ('tpu', 'tpu_zone', 'gcp_project'):
      if getattr(f, name):
        raise PipelineError('--%s is only used with --use_tpu; add --use_tpu or drop --%s.'
                            % (name, name))
  if f.use_tpu:
    for name in ('train_batch_size', 'eval_batch_size'):
      if getattr(f, name) % f.num_cores:
        raise PipelineError('--%s=%d is not divisible by --num_cores=%d: each TPU core needs the '
                            'same per-core batch. Use a multiple of %d.'
                            % (name, getattr(f, name), f.num_cores, f.num_cores))
    for name in ('data_dir', 'model_dir', 'export_dir'):
      value = model_dir_of(f) if name == 'model_dir' else getattr(f, name)
      if value and not value.startswith('gs://'):
        raise PipelineError('--%s=%s is a local path, which a Cloud TPU cannot read or write: '
                            'use a gs:// path.' % (name, value))
  if f.mode != 'eval' and (f.train_steps is None) == (f.train_epochs is None):
    raise PipelineError('give exactly one of --train_steps and --train_epochs.')
  for name in ('train_batch_size', 'eval_batch_size', 'steps_per_eval', 'iterations_per_loop',
               'num_cores'):
    if getattr(f, name) <= 0:
      raise PipelineError('--%s must be positive, got %d.' % (name, getattr(f, name)))


def config_from_flags(f):
  """Builds the run Config from absl FlagValues `f`.

  Raises:
    PipelineError: an invalid flag combination or missing dataset metadata, with what to do.
  """
  _check_combinations(f)
  if not f.fake_data:
    # Before reading dataset.json: TF's own gs:// client retries a missing bucket for minutes.
    storage.check_path_usable(f.data_dir, 'data_dir', f.use_tpu)
  info = {} if f.fake_data else (dataset_info.read(f.data_dir) or {})
  if f.fake_data:
    info = dict(_FAKE_TEXT_DEFAULTS if f.model in TEXT_MODELS else _FAKE_DEFAULTS)
  modality = info.get('modality', 'image')
  if (modality == 'text') != (f.model in TEXT_MODELS):
    raise PipelineError(
        '--model=%s is %s model but %s holds %s data (dataset.json modality %r). Use %s, or '
        'point --data_dir at %s data.' % (
            f.model, 'a text' if f.model in TEXT_MODELS else 'an image', f.data_dir, modality,
            modality, '--model=bilstm' if modality == 'text' else 'an image --model',
            'text' if f.model in TEXT_MODELS else 'image'))
  values = _from_metadata(f, info)
  preprocessing = info.get('preprocessing', {})
  data = DataConfig(
      data_dir=f.data_dir, fake_data=f.fake_data, num_classes=values['num_classes'],
      label_offset=values['label_offset'], num_train_examples=values['num_train_examples'],
      num_eval_examples=values['num_eval_examples'],
      image_size=values.get('image_size') or 0,
      train_pattern=info.get('train_pattern', DataConfig.train_pattern),
      eval_pattern=info.get('eval_pattern', DataConfig.eval_pattern),
      mean_rgb=tuple(info.get('mean_rgb', DataConfig.mean_rgb)),
      stddev_rgb=tuple(info.get('stddev_rgb', DataConfig.stddev_rgb)),
      train_crop=_preprocessing_value(f, preprocessing, 'train_crop'),
      crop_padding=_preprocessing_value(f, preprocessing, 'crop_padding'),
      eval_crop_fraction=_preprocessing_value(f, preprocessing, 'eval_crop_fraction'),
      random_flip=_preprocessing_value(f, preprocessing, 'random_flip'),
      # Inception preprocessing distorts colours, except on TPU whose hosts are short of CPU.
      color_distortion=_preprocessing_value(
          f, preprocessing, 'color_distortion',
          default=f.model == 'inception_v3' and not f.use_tpu),
      cache_decoded=f.cache_decoded, modality=modality,
      max_seq_length=values.get('max_seq_length') or 0, vocab_size=values.get('vocab_size') or 0,
      vocab_file=info.get('vocab_file', DataConfig.vocab_file))
  if f.train_steps is not None:
    train_steps = f.train_steps
  elif f.train_epochs is not None:
    train_steps = int(math.ceil(f.train_epochs * data.num_train_examples / f.train_batch_size))
  else:  # mode=eval: stop waiting for checkpoints at any step
    train_steps = 0
  try:
    model = ModelConfig(
        model=f.model, num_classes=data.num_classes, image_size=data.image_size,
        train_batch_size=f.train_batch_size, num_train_examples=data.num_train_examples,
        resnet_depth=f.resnet_depth, momentum=f.momentum, precision=f.precision,
        vocab_size=data.vocab_size, max_seq_length=data.max_seq_length,
        embedding_dim=f.embedding_dim, lstm_hidden_units=f.lstm_hidden_units,
        lstm_layers=f.lstm_layers, lstm_pooling=f.lstm_pooling, dropout_rate=f.dropout_rate,
        use_tpu=f.use_tpu, skip_host_call=f.skip_host_call, model_dir=model_dir_of(f),
        **_recipe_values(f))
  except ValueError as e:
    raise PipelineError(str(e))
  return Config(
      model=model, data=data, mode=f.mode, model_dir=model_dir_of(f), train_steps=train_steps,
      eval_batch_size=f.eval_batch_size, steps_per_eval=f.steps_per_eval,
      iterations_per_loop=f.iterations_per_loop,
      save_checkpoints_steps=f.save_checkpoints_steps or f.steps_per_eval,
      keep_checkpoint_max=f.keep_checkpoint_max, export_dir=f.export_dir,
      eval_timeout=f.eval_timeout, log_every_n_secs=f.log_every_n_secs, use_tpu=f.use_tpu,
      tpu=f.tpu, tpu_zone=f.tpu_zone, gcp_project=f.gcp_project, num_cores=f.num_cores,
      tpu_connect_timeout=f.tpu_connect_timeout)
