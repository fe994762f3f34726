"""Turns parsed flag values (+ dataset.json) into one checked `trainer.run.run_config.Config`.

What the Config reads besides the flags (dataset.json, the run's recorded network, the gs://
preflight, the output directories) is read by the run layer: `trainer.run.config_sources` and
`trainer.run.recorded_network`.

Every bad combination is refused here, before any graph is built or any TPU is contacted. The
functions take the flag values as a plain mapping (`FLAGS.flag_values_dict()`, with any
overrides a caller such as the benchmark applies), read as attributes `f.name`.
"""

import json
import random
import types

from absl import logging

from trainer.cloud import cluster_env
from trainer.cloud import vertex_env
from trainer.data import dataset_json
from trainer.data.data_config import DataConfig
from trainer.errors import PipelineError
from trainer.flags import cpu_gpu_values
from trainer.flags import mode_flags
from trainer.flags import run_fields
from trainer.flags import to_model_fn_config
from trainer.flags import value_checks
from trainer.flags import value_rules
from trainer.models import recipes
from trainer.models import user_code
from trainer.models.model_config import ModelConfig
from trainer.models.model_config import TEXT_MODELS
from trainer.models.recipes import MODEL_DEFAULTS
from trainer.models.recipes import recipe_name
from trainer.models.recipes import SCHEDULE_DEFAULTS
from trainer.models.specs import network_params
from trainer.run import config_sources
from trainer.run import cpu_bfloat16
from trainer.run import recorded_network
from trainer.run.run_config import Config
from trainer.storage import patterns
from trainer.tpu import topologies

MAX_SEED = 2**31
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
    derived['image_size'] = dataset_json.image_size(  # --image_size given: no limit
        info, limit=None if flag_values.image_size else dataset_json.MAX_DERIVED_IMAGE_SIZE)
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


def _recipe_of(f):
  """The name of the recipe the run starts from (--recipe, else the network's own)."""
  return recipe_name(f.model, getattr(f, 'recipe', None))


def recipe_values(f):
  """The optimisation settings: each flag if given, else the recipe in MODEL_DEFAULTS (--recipe,
  else the --model's own, else the user network's default)."""
  # A recorded run's own settings (a resumed training, its evaluation, prediction or export),
  # else the recipe's; schedule settings a recipe leaves out as the reference has them.
  values = dict(SCHEDULE_DEFAULTS, **MODEL_DEFAULTS[_recipe_of(f)])
  if not getattr(f, 'recipe', None):
    values.update(getattr(f, 'recorded_recipe', None) or {})
  for name in ('lr_schedule', 'base_learning_rate', 'weight_decay', 'label_smoothing',
               'warmup_epochs', 'lr_decay_every_epochs', 'lr_decay_factor',
               'moving_average_decay', 'gradient_clip_norm'):
    if getattr(f, name) is not None:
      values[name] = getattr(f, name)
  if f.lr_decay_epochs is not None:
    values['lr_decay_epochs'] = value_rules.decay_epochs(f.lr_decay_epochs)
  # A decay flag the chosen schedule does not read would be silently ignored.
  for name, schedule in (('lr_decay_epochs', 'step'), ('lr_decay_every_epochs', 'exponential')):
    if getattr(f, name) is not None and values['lr_schedule'] != schedule:
      raise PipelineError('--%s is read by the %s schedule only, but this run trains with the %s '
                          'schedule (the %s recipe, after the flags): add --lr_schedule=%s or '
                          'drop --%s.' % (name, schedule, values['lr_schedule'], _recipe_of(f),
                                          schedule, name))
  return values


def model_dir_of(f):
  """--model_dir, else the --job_dir AI Platform passes (in a Vertex AI job, $AIP_CHECKPOINT_DIR
  after `with_vertex_dirs`).

  Raises:
    PipelineError: neither is given.
  """
  model_dir = f.model_dir or f.job_dir
  if not model_dir:
    raise PipelineError('--model_dir is required (checkpoints, TensorBoard events and '
                        'results.json go there); on AI Platform --job-dir serves as its default, '
                        'in a Vertex AI job the baseOutputDirectory (its AIP_CHECKPOINT_DIR).')
  return model_dir


def _model_dir_source(flag_values):
  """The flag or variable model_dir came from, for messages."""
  if flag_values.get('model_dir'):
    return '--model_dir'
  return '--job_dir' if flag_values.get('job_dir') else vertex_env.CHECKPOINT_DIR_ENV


def with_vertex_dirs(f):
  """`f` with model_dir and export_dir as `trainer.cloud.vertex_env.output_dirs` decides them (the
  flags, per trial in a Vertex AI tuning job, else the job's AIP_* directories)."""
  dirs = vertex_env.output_dirs(f.model_dir, f.export_dir, f.job_dir, f.mode)
  return types.SimpleNamespace(**dict(vars(f), model_dir=dirs.model_dir,
                                      export_dir=dirs.export_dir))


def _image_dtype(f):
  """What the image infeed carries: uint8 off TPU, float32 on TPU, bfloat16 with bfloat16
  precision (exact for 0-255 pixels, half the bytes of float32)."""
  if not f.use_tpu:
    return 'uint8'
  return 'bfloat16' if f.precision == 'bfloat16' else 'float32'


def _dry_run_values(f):
  """--mode=dry_run is a TPU run that trains nothing, on the simulated --tpu_topology (num_cores
  from the slice) or, with --use_tpu, on the TPU that --tpu names (num_cores from the TPU), so
  local paths and a missing run length are fine.

  Raises:
    PipelineError: a dry run with neither or both of --tpu_topology and --use_tpu, or a
      --num_cores that is not the simulated slice's.
  """
  if f.mode != 'dry_run':
    return f
  if f.tpu_topology and f.use_tpu:
    raise PipelineError('--mode=dry_run builds the graphs either for the simulated slice of '
                        '--tpu_topology or for the real TPU of --use_tpu --tpu=NAME, not both: '
                        'drop one.')
  if not f.tpu_topology and not f.use_tpu:
    raise PipelineError('--mode=dry_run needs --tpu_topology, the slice to simulate (an '
                        'accelerator type such as v3-8, v3-32 or v4-32), or --use_tpu --tpu=NAME '
                        'to take the slice of a reachable TPU.')
  num_cores = f.num_cores
  if f.tpu_topology:
    for name in ('tpu', 'tpu_zone', 'gcp_project'):
      if getattr(f, name):
        raise PipelineError('--mode=dry_run --tpu_topology simulates a slice and contacts no '
                            'TPU: drop --%s (or drop --tpu_topology and pass --use_tpu to dry-run '
                            'on that TPU).' % name)
    _, num_cores = topologies.slice_shape(f.tpu_topology)
    if f.num_cores and f.num_cores != num_cores:
      raise PipelineError('--num_cores=%d is not the number of cores of a %s (%d): the real job '
                          'would be refused. Pass --num_cores=%d or leave it out.'
                          % (f.num_cores, f.tpu_topology, num_cores, num_cores))
  steps = f.train_steps if f.train_steps is not None or f.train_epochs is not None else 1
  return types.SimpleNamespace(**dict(vars(f), use_tpu=True, num_cores=num_cores,
                                      train_steps=steps))


def _check_combinations(f, model_fn_job=False):
  """model_fn_job: a legacy job, whose input_fn reads its own data (--data_dir optional) and whose
  model_fn has its own optimizer."""
  if f.fake_data and f.data_dir:
    raise PipelineError('--fake_data and --data_dir are exclusive: pass one.')
  if not f.fake_data and not f.data_dir and not model_fn_job:
    raise PipelineError('--data_dir is required (a directory of TFRecord shards, e.g. made by '
                        '`python -m trainer.prepare fashion_mnist --output_dir DIR`); use '
                        '--fake_data for a synthetic smoke test.')
  if f.precision == 'bfloat16' and not f.use_tpu:
    cpu_bfloat16.check(f.model, single_process=not (
        f.num_gpus or f.mirrored_devices or cluster_env.tf_config().get('cluster')))
  if not f.use_tpu:
    for name in ('tpu', 'tpu_zone', 'gcp_project', 'num_cores'):
      if getattr(f, name):
        raise PipelineError('--%s is only used with --use_tpu; add --use_tpu or drop --%s.'
                            % (name, name))
  if f.use_tpu and f.num_cores == 1:
    raise PipelineError('--num_cores=1: TPUEstimator then runs on one core of the slice without '
                        'checking it; leave --num_cores out to use every core.')
  if (not model_fn_job and f.nesterov and
      MODEL_DEFAULTS[_recipe_of(f)]['optimizer'] != 'momentum'):
    raise PipelineError('--nesterov is read by the momentum optimizer only, but the %s recipe '
                        'trains with %s: drop --nesterov.'
                        % (_recipe_of(f), MODEL_DEFAULTS[_recipe_of(f)]['optimizer']))
  if f.use_tpu and f.num_cores:
    for name in ('train_batch_size', 'eval_batch_size'):
      if getattr(f, name) % f.num_cores:
        raise PipelineError('--%s=%d is not divisible by --num_cores=%d: each TPU core needs the '
                            'same per-core batch. Use a multiple of %d.'
                            % (name, getattr(f, name), f.num_cores, f.num_cores))
  if f.use_tpu:
    for name in ('data_dir', 'model_dir', 'export_dir', 'init_checkpoint'):
      value = model_dir_of(f) if name == 'model_dir' else getattr(f, name)
      if value and not value.startswith('gs://') and f.mode != 'dry_run':
        raise PipelineError('--%s=%s is a local path, which a Cloud TPU cannot read or write: '
                            'use a gs:// path.' % (name, value))
  _check_predict(f)
  if f.mode not in ('eval', 'predict') and (f.train_steps is None) == (f.train_epochs is None):
    raise PipelineError('give exactly one of --train_steps and --train_epochs.')
  if f.init_from_moving_average and not f.init_checkpoint:
    raise PipelineError('--init_from_moving_average reads the checkpoint of --init_checkpoint; '
                        'pass one, or drop --init_from_moving_average.')


def _check_predict(f):
  if f.mode != 'predict':
    return
  if not f.predict_input or not f.predict_output:
    raise PipelineError('--mode=predict needs --predict_input (a glob of image files, TFRecords, '
                        'or .txt/.csv texts) and --predict_output (the JSON-lines file to write).')
  if f.use_tpu and not f.predict_input.startswith('gs://'):
    raise PipelineError('--predict_input=%s is a local path, which a Cloud TPU host cannot read: '
                        'use a gs:// path.' % f.predict_input)


def with_network(f, given):
  """`f` and `given` with --network=MODULE:CALLABLE taking the place of --model (f.model is then
  the spec, as ModelConfig.model records it) and --network_params in canonical JSON.

  Raises:
    PipelineError: --network with --model, --network not MODULE:CALLABLE, --network_params
      not a JSON object or setting a key the run sets.
  """
  network = getattr(f, 'network', None)
  params = getattr(f, 'network_params', None)
  values = {}
  if params is not None:  # without --network too: a recorded user network takes it
    parsed = network_params.user_params(params)
    values['network_params'] = json.dumps(parsed, sort_keys=True) if parsed else ''
  if network:
    if given and 'model' in given:
      raise PipelineError('--model=%s and --network=%s both name the network: pass one.'
                          % (f.model, network))
    if not user_code.is_spec(network):
      raise PipelineError('--network=%s is not MODULE:CALLABLE (for example '
                          '--network=examples.mobilenet:mobilenet).' % network)
    values['model'] = network
    given = None if given is None else set(given) | {'model'}
  return types.SimpleNamespace(**dict(vars(f), **values)), given


def seed_of(f):
  """--seed, or a seed drawn from the OS's entropy and logged (results.json records it too).

  Raises:
    PipelineError: a seed outside [0, 2**31).
  """
  if f.seed is None:
    seed = random.SystemRandom().randrange(MAX_SEED)
    logging.info('No --seed given: this run uses --seed=%d (pass it to repeat the run).', seed)
    return seed
  if not 0 <= f.seed < MAX_SEED:
    raise PipelineError('--seed must be in [0, %d), got %d.' % (MAX_SEED, f.seed))
  return f.seed


def config_from_flags(flag_values, given=None):
  """Builds the run Config.

  Args:
    flag_values: mapping of every flag of `flags.run_flags` to its value, e.g.
      `absl.flags.FLAGS.flag_values_dict()`.
    given: names of the flags given on the command line; the network flags not among them come
      from the run's record (`trainer.run.recorded_network`). None: flags and defaults only.

  Returns:
    `trainer.run.run_config.Config`.

  Raises:
    PipelineError: an invalid flag combination or missing dataset metadata, with what to do.
  """
  f = types.SimpleNamespace(**flag_values)
  f, given = with_network(f, given)
  mode_flags.check(f)
  value_checks.check(f)  # each flag's range, TF_CONFIG, CLUSTER_SPEC, output directories
  f = with_vertex_dirs(_dry_run_values(f))
  if to_model_fn_config.is_model_fn_job(f):
    to_model_fn_config.check(f, given)
    _check_combinations(f, model_fn_job=True)
    model_dir = model_dir_of(f)
    patterns.check_checkpoint_path(model_dir, _model_dir_source(flag_values))
    if f.data_dir:
      config_sources.check_data_dir(f.data_dir, f.use_tpu)
    return to_model_fn_config.config_of(f, model_dir, seed_of(f),
                                        cpu_gpu_values.mirrored_devices_of(f),
                                        cpu_gpu_values.profile_steps_of(f))
  f = recorded_network.with_recorded_network(f, given, f.model_dir or f.job_dir)
  _check_combinations(f)
  seed = seed_of(f)
  model_dir = model_dir_of(f)
  patterns.check_checkpoint_path(model_dir, _model_dir_source(flag_values))
  patterns.check_checkpoint_path(f.init_checkpoint, '--init_checkpoint')
  mirrored_devices = cpu_gpu_values.mirrored_devices_of(f)
  profile_steps = cpu_gpu_values.profile_steps_of(f)
  if f.fake_data:
    info = dict(_FAKE_TEXT_DEFAULTS if f.model in TEXT_MODELS else _FAKE_DEFAULTS)
  else:
    info = config_sources.dataset_info(f.data_dir, f.use_tpu)
  modality = info.get('modality', 'image')
  built_in = f.model in MODEL_DEFAULTS
  if built_in and (modality == 'text') != (f.model in TEXT_MODELS):
    raise PipelineError(
        '--model=%s is %s model but %s holds %s data (dataset.json modality %r). Use %s, or '
        'point --data_dir at %s data.' % (
            f.model, 'a text' if f.model in TEXT_MODELS else 'an image', f.data_dir, modality,
            modality, '--model=bilstm' if modality == 'text' else 'an image --model',
            'text' if f.model in TEXT_MODELS else 'image'))
  values = _from_metadata(f, info)
  preprocessing = info.get('preprocessing', {})
  data = run_fields.by_name(
      DataConfig, f, num_classes=values['num_classes'], label_offset=values['label_offset'],
      num_train_examples=values['num_train_examples'],
      num_eval_examples=values['num_eval_examples'], image_size=values.get('image_size') or 0,
      train_pattern=info.get('train_pattern', DataConfig.train_pattern),
      eval_pattern=info.get('eval_pattern', DataConfig.eval_pattern),
      image_dtype=_image_dtype(f),
      train_crop=_preprocessing_value(f, preprocessing, 'train_crop'),
      crop_padding=_preprocessing_value(f, preprocessing, 'crop_padding'),
      eval_crop_fraction=_preprocessing_value(f, preprocessing, 'eval_crop_fraction'),
      random_flip=_preprocessing_value(f, preprocessing, 'random_flip'),
      # Inception preprocessing distorts colours, except on TPU whose hosts are short of CPU.
      color_distortion=_preprocessing_value(
          f, preprocessing, 'color_distortion',
          default=f.model == 'inception_v3' and not f.use_tpu),
      modality=modality, seed=seed, max_seq_length=values.get('max_seq_length') or 0,
      vocab_size=values.get('vocab_size') or 0,
      vocab_file=info.get('vocab_file', DataConfig.vocab_file))
  if f.train_steps is not None:
    train_steps = f.train_steps
  elif f.train_epochs is not None:
    train_steps = recipes.steps_of_epochs(f.train_epochs, data.num_train_examples,
                                          f.train_batch_size)
  else:  # mode=eval: stop waiting for checkpoints at any step
    train_steps = 0
  try:
    model = run_fields.by_name(
        ModelConfig, f, network_params=getattr(f, 'network_params', None) or '',
        num_classes=data.num_classes, image_size=data.image_size,
        mean_rgb=tuple(info.get('mean_rgb', ModelConfig.mean_rgb)),
        stddev_rgb=tuple(info.get('stddev_rgb', ModelConfig.stddev_rgb)),
        num_train_examples=data.num_train_examples, vocab_size=data.vocab_size,
        max_seq_length=data.max_seq_length, model_dir=model_dir,
        init_checkpoint=f.init_checkpoint or '', train_steps=train_steps,
        input_fn='',  # a legacy --model_fn job's (flags/to_model_fn_config.py)
        **recipe_values(f))
  except ValueError as e:
    raise PipelineError(str(e))
  return run_fields.by_name(
      Config, f, model=model, data=data, train_steps=train_steps,
      **run_fields.run_fields(f, model_dir, seed, mirrored_devices, profile_steps))
