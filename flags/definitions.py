"""absl flag definitions for `python -m trainer.main`, grouped by concern.

Flags whose default is None take their value from <data_dir>/dataset.json when it exists; see
`flags.config.config_from_flags` for how they are combined and checked.
"""

from absl import flags

from models.config import (LR_SCHEDULES, LSTM_POOLINGS, MODEL_DEFAULTS, MODELS, PRECISIONS,
                           RESNET_DEPTHS)
from trainer.config import MODES
from trainer.preprocessing import TRAIN_CROPS

# --- Model ---------------------------------------------------------------------------------------
flags.DEFINE_enum('model', 'resnet', MODELS, 'Network to train.')
flags.DEFINE_integer('resnet_depth', 50, 'ResNet depth, one of %s.' % (RESNET_DEPTHS,))
flags.DEFINE_integer('num_classes', None, 'Number of classes (default: dataset.json).')
flags.DEFINE_integer('image_size', None,
                     'Model input height and width in pixels (default: dataset.json image size, '
                     'or 224 with --fake_data); images are resized to it. inception_v3 needs '
                     '>= 75.')
flags.DEFINE_integer('max_seq_length', None,
                     'bilstm: tokens per text; longer texts are truncated, shorter ones padded '
                     'and masked (default: dataset.json).')
flags.DEFINE_integer('embedding_dim', 256, 'bilstm: embedding width.')
flags.DEFINE_integer('lstm_hidden_units', 1024,
                     'bilstm: LSTM units per direction (1024 as in the 2018 Cloud TPU BiLSTM '
                     'benchmark; a CPU run wants far fewer, see README).')
flags.DEFINE_integer('lstm_layers', 1, 'bilstm: stacked bidirectional LSTM layers.')
flags.DEFINE_enum('lstm_pooling', 'max', LSTM_POOLINGS,
                  'bilstm: max or mean over the real positions of the top layer, or the final '
                  'forward and backward states.')
flags.DEFINE_float('dropout_rate', 0.5, 'bilstm: dropout on the embeddings and pooled features.')
flags.DEFINE_enum('precision', 'float32', PRECISIONS,
                  'Activation precision; bfloat16 needs --use_tpu (variables stay float32).')

# --- Optimisation --------------------------------------------------------------------------------
# Unset, these take the recipe of --model (models.config.MODEL_DEFAULTS), shown in each help text.
def _recipe(name):
  return ', '.join('%s %s' % (model, MODEL_DEFAULTS[model].get(name, '-')) for model in MODELS)


flags.DEFINE_float('label_smoothing', None,
                   'Label smoothing epsilon of the training loss (%s).' % _recipe('label_smoothing'))
flags.DEFINE_float('base_learning_rate', None,
                   'Learning rate for a global batch of 256, scaled linearly with the batch; '
                   'with the constant schedule the rate itself (%s).' % _recipe('base_learning_rate'))
flags.DEFINE_float('momentum', 0.9, 'Momentum of the SGD and RMSProp optimizers.')
flags.DEFINE_float('weight_decay', None,
                   'L2 coefficient, batch-norm variables excluded (%s).' % _recipe('weight_decay'))
flags.DEFINE_float('warmup_epochs', None,
                   'Epochs of linear learning-rate warmup (%s).' % _recipe('warmup_epochs'))
flags.DEFINE_enum('lr_schedule', None, LR_SCHEDULES,
                  'Learning-rate schedule (%s): step decays at --lr_decay_epochs, exponential '
                  'every --lr_decay_every_epochs, constant keeps --base_learning_rate unscaled.'
                  % _recipe('lr_schedule'))
flags.DEFINE_list('lr_decay_epochs', None,
                  'Step schedule (resnet): epochs at which the learning rate is multiplied by '
                  '--lr_decay_factor (resnet 30,60,80).')
flags.DEFINE_float('lr_decay_every_epochs', None,
                   'Exponential schedule (inception_v3): multiply the learning rate by '
                   '--lr_decay_factor every this many epochs (inception_v3 2).')
flags.DEFINE_float('lr_decay_factor', None,
                   'Decay multiplier (%s).' % _recipe('lr_decay_factor'))
flags.DEFINE_float('gradient_clip_norm', None,
                   'Clip the gradient to this global norm; 0 disables it (%s).'
                   % _recipe('gradient_clip_norm'))
flags.DEFINE_float('moving_average_decay', None,
                   'Decay of the moving average of the weights that evaluation and export use; '
                   '0 disables it (%s).' % _recipe('moving_average_decay'))

# --- Data ----------------------------------------------------------------------------------------
flags.DEFINE_string('data_dir', None,
                    'Directory (local or gs://) of TFRecord shards (train-*, validation-*) with '
                    'dataset.json: images in the ImageNet schema, or token ids and vocab.txt for '
                    'bilstm; made by `python -m trainer.prepare`.')
flags.DEFINE_bool('fake_data', False,
                  'Use synthetic images instead of --data_dir (smoke tests and benchmarks).')
flags.DEFINE_integer('label_offset', None,
                     'Subtracted from image/class/label (1 for ImageNet converters that write '
                     '1..1000; default: dataset.json).')
flags.DEFINE_integer('num_train_examples', None, 'Training examples per epoch (default: dataset.json).')
flags.DEFINE_integer('num_eval_examples', None,
                     'Examples in the eval split; evaluation covers each exactly once '
                     '(default: dataset.json).')
flags.DEFINE_enum('train_crop', None, TRAIN_CROPS,
                  'Training crop: distorted_bbox (photos) or pad_and_crop (small framed images). '
                  'Default: dataset.json, else distorted_bbox.')
flags.DEFINE_integer('crop_padding', None, 'Zero padding in pixels for --train_crop=pad_and_crop '
                     '(default: dataset.json, else 4).')
flags.DEFINE_float('eval_crop_fraction', None,
                   'Central-crop fraction at eval (default: dataset.json, else 0.875).')
flags.DEFINE_bool('random_flip', None,
                  'Flip training images left-right at random (default: dataset.json, else True).')
flags.DEFINE_bool('color_distortion', None,
                  'Random brightness, saturation, hue and contrast in training (Inception '
                  'preprocessing). Default: dataset.json, else on for inception_v3 without '
                  '--use_tpu (TPU hosts are short of CPU) and off otherwise.')
flags.DEFINE_bool('cache_decoded', False,
                  'Cache decoded training images in host RAM (only for datasets that fit).')

# --- Schedule and evaluation ---------------------------------------------------------------------
flags.DEFINE_enum('mode', 'train_and_eval', MODES,
                  'train, eval (the latest checkpoint, or each new one with --eval_timeout), or '
                  'train_and_eval (alternate every --steps_per_eval, then a final eval).')
flags.DEFINE_integer('train_batch_size', 1024, 'Global training batch size.')
flags.DEFINE_integer('eval_batch_size', 1024, 'Global evaluation batch size.')
flags.DEFINE_integer('train_steps', None, 'Total training steps (or give --train_epochs).')
flags.DEFINE_float('train_epochs', None, 'Total training epochs (or give --train_steps).')
flags.DEFINE_integer('steps_per_eval', 1000, 'Training steps between evaluations in train_and_eval.')
flags.DEFINE_integer('save_checkpoints_steps', None,
                     'Steps between checkpoints (default: --steps_per_eval).')
flags.DEFINE_integer('keep_checkpoint_max', 5, 'Checkpoints kept in model_dir.')
flags.DEFINE_integer('eval_timeout', 0,
                     'mode=eval: seconds to wait for a new checkpoint (0: evaluate the latest '
                     'checkpoint once).')
flags.DEFINE_float('log_every_n_secs', 30.0, 'Seconds between progress log lines.')

# --- TPU -----------------------------------------------------------------------------------------
flags.DEFINE_bool('use_tpu', False, 'Train on a Cloud TPU; otherwise on the local CPU/GPU.')
flags.DEFINE_string('tpu', None,
                    'Cloud TPU name or grpc://host:8470 (default: $TPU_NAME or $COLAB_TPU_ADDR).')
flags.DEFINE_string('tpu_zone', None, 'GCE zone of the TPU (default: from the metadata server).')
flags.DEFINE_string('gcp_project', None, 'GCP project of the TPU (default: from the metadata server).')
flags.DEFINE_integer('iterations_per_loop', 100, 'Steps run on the TPU per host round trip.')
flags.DEFINE_integer('num_cores', 8, 'TPU cores (replicas) to shard the batch over.')
flags.DEFINE_float('tpu_connect_timeout', 10.0, 'Seconds allowed to resolve and reach the TPU.')

# --- GPUs ----------------------------------------------------------------------------------------
flags.DEFINE_integer('num_gpus', 0,
                     'Train with MirroredStrategy on this many local GPUs (synchronous data '
                     'parallelism, --train_batch_size split evenly). 0: TensorFlow picks one device.')
flags.DEFINE_list('mirrored_devices', None,
                  'MirroredStrategy devices instead of --num_gpus, e.g. /gpu:0,/gpu:2. '
                  '/cpu:0,/cpu:1 runs the same path on CPU devices (for testing it without GPUs).')

# --- Output --------------------------------------------------------------------------------------
flags.DEFINE_string('model_dir', None, 'Checkpoints, TensorBoard events and results.json '
                    '(default: --job_dir).')
flags.DEFINE_string('job_dir', None, 'The job directory AI Platform passes (as --job-dir); the '
                    'model_dir when --model_dir is not given.')
flags.DEFINE_string('export_dir', None, 'If set, a SavedModel for serving is exported here.')
flags.DEFINE_bool('skip_host_call', False, 'Do not write per-step TensorBoard summaries.')
flags.DEFINE_list('profile_steps', None,
                  'START,END: write a full TensorFlow trace of each global step in [START, END) '
                  'to model_dir/profile/timeline-<step>.json (Chrome trace format: '
                  'chrome://tracing or ui.perfetto.dev). CPU/GPU only; on a Cloud TPU use the '
                  'Cloud TPU profiler (capture_tpu_profile).')

