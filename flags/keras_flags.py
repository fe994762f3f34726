"""Flags of the Keras 3 commands: `trainer.export_keras` (checkpoint -> Keras model) and
`trainer.train_keras` (training with the pipeline's recipes on any backend, from scratch or, to
fine-tune, from a converted model). `flags/to_keras_config.py` turns the latter's into a config."""

from absl import flags

from trainer.models import model_config
from trainer.models import recipes
from trainer.models.specs import bilstm
from trainer.models.specs import resnet


def define_export_keras_flags():
  """Defines the converter's flags on absl's FLAGS."""
  flags.DEFINE_string('model_dir', None, 'The run to convert: its newest checkpoint and the '
                      'network settings it recorded (model_config.json).')
  flags.DEFINE_string('checkpoint', None, 'A checkpoint prefix (DIR/model.ckpt-N) or directory '
                      'to convert instead of --model_dir\'s newest; a Cloud TPU reference ResNet '
                      'checkpoint too (with --model=resnet and its settings).')
  flags.DEFINE_boolean('use_moving_average', None, 'Convert the weights\' moving averages '
                       '(*/ExponentialMovingAverage). Not given: as the run evaluated and '
                       'exported (model_config.json: --moving_average_decay > 0); required for '
                       'a checkpoint with averages and no model_config.json.')
  flags.DEFINE_string('output', None, 'Where to write the model: PATH.keras for Keras 3, PATH.pt '
                      'for a native PyTorch module (torchvision\'s layout for ResNet and '
                      'InceptionV3; needs torch: docs/migration.md, "To PyTorch").')
  flags.DEFINE_string('upgrade', None, 'Instead of converting: a .keras file an earlier version '
                      'of this command wrote (layer names with \'.\', which the torch backend '
                      'cannot load), rewritten to --output with the current names; the weights '
                      'are copied unchanged.')
  flags.DEFINE_string('serving_dir', None, 'Where to write the serving SavedModel (raw images or '
                      'texts in, as today\'s export). Not given: next to --output, named '
                      '<output without .keras>_serving; \'\' writes none. TensorFlow backend only.')
  flags.DEFINE_boolean('overwrite', False, 'Replace an existing --output file and what '
                       '--serving_dir holds (deleted first) instead of refusing before any work.')
  flags.DEFINE_string('check_predictions', None, 'The output of `trainer.main --mode=predict '
                      '--predict_logits` on --check_input: the converted model must give the '
                      'same logits for the same inputs (within --tolerance), or the command fails.')
  flags.DEFINE_string('check_input', None, 'The --predict_input of --check_predictions.')
  flags.DEFINE_float('tolerance', 1e-4, 'Largest absolute logit difference --check_predictions '
                     'accepts (float32).')
  # The settings of a run that recorded none (it predates model_config.json), or of a checkpoint
  # from elsewhere; given, they override the record.
  flags.DEFINE_enum('model', None, model_config.MODELS, 'Network of the checkpoint.')
  flags.DEFINE_string('keras_network', None, 'A run of your own --network: its Keras 3 twin as '
                      'MODULE:CALLABLE, keras_network(*, num_classes, params) -> keras.Model, '
                      'whose weights load from the checkpoint by name (docs/your-model.md).')
  flags.DEFINE_string('data_dir', None, 'A directory with the run\'s dataset.json (classes, '
                      'image statistics, text vocabulary and length).')
  flags.DEFINE_integer('num_classes', None, 'Width of the logits.')
  flags.DEFINE_integer('image_size', None, 'Input height and width of an image network.')
  flags.DEFINE_enum('resnet_depth', None, [str(d) for d in resnet.DEPTHS], 'ResNet depth.')
  flags.DEFINE_integer('embedding_dim', None, 'BiLSTM embedding width.')
  flags.DEFINE_integer('lstm_hidden_units', None, 'BiLSTM units per direction.')
  flags.DEFINE_integer('lstm_layers', None, 'BiLSTM stacked layers.')
  flags.DEFINE_enum('lstm_pooling', None, bilstm.POOLINGS, 'BiLSTM pooling.')
  flags.mark_flag_as_required('output')


# The settings flags, by ModelConfig field.
SETTINGS = ('model', 'num_classes', 'image_size', 'resnet_depth', 'embedding_dim',
            'lstm_hidden_units', 'lstm_layers', 'lstm_pooling')


def define_train_keras_flags():
  """Defines `trainer.train_keras`'s flags on absl's FLAGS (the pipeline's names and defaults
  where `trainer.main` has the same setting)."""
  flags.DEFINE_string('model_dir', None, 'The run\'s directory: checkpoints (resumed from when '
                      'the run was stopped), TensorBoard logs, results.json, model.keras and '
                      '(TensorFlow backend) model_serving/.')
  flags.DEFINE_string('data_dir', None, 'TFRecords of this pipeline (`trainer.prepare`) with '
                      'dataset.json.')
  flags.DEFINE_string('init_model', None, 'Fine-tune: start from this .keras model '
                      '(`trainer.export_keras` or an earlier run) instead of a new network of '
                      '--model; it is scored on the evaluation split first (results.json '
                      '"before"). Fine-tuning recipe: docs/migration.md.')
  flags.DEFINE_enum('model', 'resnet', model_config.MODELS, 'Network to train from scratch.')
  flags.DEFINE_string('network', None, 'Your own Keras network instead of --model, as '
                      'MODULE:CALLABLE: keras_network(*, num_classes, params) -> keras.Model '
                      '(docs/your-model.md).')
  flags.DEFINE_string('network_params', None, '--network: a JSON object passed to it as params '
                      '(with the run\'s own keys: image_size, mean_rgb, stddev_rgb or '
                      'vocab_size, max_seq_length; precision).')
  flags.DEFINE_integer('resnet_depth', 18, 'ResNet depth (from scratch).')
  flags.DEFINE_integer('image_size', None, 'Input size (from scratch; default: dataset.json\'s).')
  flags.DEFINE_integer('embedding_dim', 256, 'BiLSTM embedding width (from scratch).')
  flags.DEFINE_integer('lstm_hidden_units', 128, 'BiLSTM units per direction (from scratch).')
  flags.DEFINE_boolean('overwrite', False, 'Delete what --model_dir holds first (a finished run '
                       'is otherwise refused; an unfinished one is resumed).')
  flags.DEFINE_integer('train_steps', None, 'Training steps; overrides --train_epochs.',
                       lower_bound=1)
  flags.DEFINE_float('train_epochs', 1.0, 'Training epochs (of the training split).')
  flags.DEFINE_integer('train_batch_size', 256, 'Global batch size (summed over replicas).',
                       lower_bound=1)
  flags.DEFINE_integer('eval_batch_size', 1000, 'Evaluation batch size.', lower_bound=1)
  # The recipe flags: unset, each takes the value of --recipe (default: --model's own) in the
  # table trainer.main reads too (models/recipes.py).
  flags.DEFINE_enum('recipe', None, sorted(recipes.MODEL_DEFAULTS), 'The published recipe to '
                    'start from (default: --model\'s own; with --network, %s); each flag below '
                    'overrides one of its values.' % recipes.USER_NETWORK_RECIPE)
  flags.DEFINE_enum('optimizer', None, ('momentum', 'rmsprop', 'adam'),
                    'SGD with momentum, RMSProp or Adam.')
  flags.DEFINE_float('momentum', 0.9, 'Momentum of --optimizer=momentum and rmsprop.')
  flags.DEFINE_boolean('nesterov', False, 'Nesterov momentum.')
  flags.DEFINE_float('base_learning_rate', None, 'Peak learning rate per 256 examples (scaled by '
                     'the global batch / 256); --lr_schedule=constant: the rate itself.')
  flags.DEFINE_enum('lr_schedule', None, recipes.SCHEDULES, 'After the warmup: x '
                    '--lr_decay_factor at each of --lr_decay_epochs, or every '
                    '--lr_decay_every_epochs, a cosine to 0, or none.')
  flags.DEFINE_float('warmup_epochs', None, 'Linear warmup to the peak rate over these epochs.')
  flags.DEFINE_list('lr_decay_epochs', None, 'Epochs of the step decays.')
  flags.DEFINE_float('lr_decay_every_epochs', None, 'Epochs between the exponential decays.')
  flags.DEFINE_float('lr_decay_factor', None, 'Factor of each decay.')
  flags.DEFINE_float('weight_decay', None, 'Coupled L2: weight_decay x sum(w^2) / 2 of the '
                     'weights but batch norms\', added to the loss.')
  flags.DEFINE_float('label_smoothing', None, 'Label smoothing of the cross-entropy.')
  flags.DEFINE_float('gradient_clip_norm', None, 'Clip the gradient to this global norm (0: '
                     'none).')
  flags.DEFINE_float('aux_loss_weight', 0.4, 'InceptionV3: weight of the auxiliary head\'s loss.')
  flags.DEFINE_enum('dtype_policy', 'float32', ('float32', 'mixed_bfloat16'), 'Keras dtype '
                    'policy: mixed_bfloat16 computes in bfloat16 with float32 weights.')
  flags.DEFINE_integer('crop_padding', None, 'Training augmentation: pad and crop back by this '
                       'many pixels (pad_and_crop data); not given: dataset.json\'s.',
                       lower_bound=0)
  flags.DEFINE_boolean('cache_decoded', False, 'Cache the decoded training images in memory.')
  flags.DEFINE_integer('log_every_steps', 100, 'Log a line (and write TensorBoard scalars) every '
                       'this many steps.', lower_bound=1)
  flags.DEFINE_integer('save_checkpoints_steps', 500, 'Checkpoint every this many steps (a '
                       'multiple of --log_every_steps); also at the end and on SIGTERM.',
                       lower_bound=1)
  flags.DEFINE_integer('keep_checkpoints', 2, 'Newest checkpoints kept.', lower_bound=1)
  flags.DEFINE_integer('cpu_replicas', 0, 'TensorFlow backend: train on this many logical CPU '
                       'devices with MirroredStrategy (0: the GPUs, or the CPU).', lower_bound=0)
  flags.DEFINE_boolean('data_parallel', True, 'JAX backend: data-parallel over every device '
                       '(keras.distribution.DataParallel); off: the first device only.')
  flags.DEFINE_boolean('multi_host', False, 'JAX backend: call keras.distribution.initialize() '
                       'first, to train over every host of a TPU slice (one process per host).')
  flags.DEFINE_integer('multi_host_timeout', 240, '--multi_host: seconds to wait for every '
                       'process to join before exiting with status 2, naming the coordinator '
                       '(under JAX\'s own 300 s, after which it fails with a traceback).',
                       lower_bound=1, upper_bound=290)
  flags.DEFINE_integer('seed', 0, 'Seeds the weights, dropout, the shuffles and augmentation.')
  flags.DEFINE_integer('lease_expiry_secs', 180, 'The run holds a lease on --model_dir: a second '
                       'run on it is refused. On gs:// it is renewed every sixth of this and '
                       'taken over after this long unrenewed (its run died); on local disk it is '
                       'a file lock that ends with its process.', lower_bound=12)
  for name in ('model_dir', 'data_dir'):
    flags.mark_flag_as_required(name)
