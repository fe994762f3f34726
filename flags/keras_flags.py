"""Flags of the Keras 3 commands: `trainer.export_keras` (checkpoint -> Keras model) and
`trainer.finetune_keras` (model.fit of a converted model)."""

from absl import flags

from models import bilstm
from models import model_config
from models import resnet


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
  flags.DEFINE_string('output', None, 'Where to write the Keras model: a path ending in .keras.')
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


def define_finetune_keras_flags():
  """Defines the fine-tuning command's flags on absl's FLAGS."""
  flags.DEFINE_string('model', None, 'The Keras model to train on: a .keras file of '
                      '`trainer.export_keras` (or of an earlier fine-tuning).')
  flags.DEFINE_string('data_dir', None, 'TFRecords of this pipeline (`trainer.prepare`) with '
                      'dataset.json: the training split is trained on, the evaluation split '
                      'scored before and after.')
  flags.DEFINE_string('output', None, 'Where to write the fine-tuned model (.keras); its figures '
                      'go to <output without .keras>.results.json.')
  flags.DEFINE_boolean('overwrite', False, 'Replace an existing --output (and its .results.json) '
                       'instead of refusing before any work.')
  flags.DEFINE_integer('steps', 300, 'Training steps (batches).', lower_bound=1)
  flags.DEFINE_integer('batch_size', 64, 'Global batch size (summed over replicas).',
                       lower_bound=1)
  flags.DEFINE_enum('optimizer', 'momentum', ('momentum', 'adam'),
                    'SGD with momentum 0.9, or Adam.')
  flags.DEFINE_float('learning_rate', 0.01, 'Constant learning rate.')
  flags.DEFINE_float('aux_loss_weight', 0.4, 'InceptionV3: weight of the auxiliary head\'s loss.')
  flags.DEFINE_integer('cpu_replicas', 0, 'TensorFlow backend: split the CPU into this many '
                       'logical devices and train on them with MirroredStrategy (data '
                       'parallelism on one machine; 0: MirroredStrategy over the GPUs, or the '
                       'CPU).', lower_bound=0)
  flags.DEFINE_integer('log_every_steps', 50, 'Log loss and accuracy every this many steps.',
                       lower_bound=1)
  flags.DEFINE_integer('crop_padding', None, 'Training augmentation: pad by this many pixels '
                       'and crop back at a random offset (pad_and_crop data); not given: '
                       'dataset.json\'s. Give what the run trained with (0 in `make train`).',
                       lower_bound=0)
  flags.DEFINE_integer('seed', 0, 'Seeds the weights\' dropout, the shuffles and augmentation.')
  for name in ('model', 'data_dir', 'output'):
    flags.mark_flag_as_required(name)
