"""Flags of `python -m trainer.main`, defined by explicit calls grouped by concern, as the Cloud
TPU reference's common_tpu_flags.py does; `define_run_flags()` defines them all.

Flags whose default is None take their value from <data_dir>/dataset.json or from the --model
recipe (`models.recipes`); `flags.to_config.config_from_flags` combines and checks them.
"""

from absl import flags

from trainer.cli import help_text
from trainer.data.preprocessing import TRAIN_CROPS
from trainer.flags import tpu_flags
from trainer.models import bilstm
from trainer.models import inception_v3
from trainer.models import resnet
from trainer.models.model_config import LR_SCHEDULES
from trainer.models.model_config import MODELS
from trainer.models.model_config import PRECISIONS
from trainer.models.recipes import MODEL_DEFAULTS
from trainer.models.recipes import USER_NETWORK_RECIPE
from trainer.run.run_config import MODES


def define_run_flags():
  """Defines every flag of `trainer.main` (once per process).

  Returns:
    The groups `trainer.main --help` shows: a list of (title, [flag names in definition order]),
    one per define_* function below, in this order.
  """
  return help_text.define_groups([
      ('Model', define_model_flags),
      ('Optimizer (unset: the --model recipe)', define_optimizer_flags),
      ('Data', define_data_flags),
      ('Mode, schedule and checkpoints', define_schedule_flags),
      ('Cloud TPU', tpu_flags.define_tpu_flags),
      ('GPUs', define_gpu_flags),
      ('Output', define_output_flags)])


def define_model_flags():
  """The network and its sizes."""
  flags.DEFINE_enum('model', 'resnet', MODELS, 'Built-in network to train.')
  flags.DEFINE_string('network', None,
                      'Your own network instead of --model, as MODULE:CALLABLE: a function '
                      'network(features, *, is_training, num_classes, params) -> logits '
                      '(docs/your-model.md); MODULE is imported from PYTHONPATH or the current '
                      'directory.')
  flags.DEFINE_string('model_fn', None,
                      'A legacy job\'s own TPUEstimator model_fn as MODULE:CALLABLE, '
                      'model_fn(features, labels, mode, params) -> TPUEstimatorSpec; with '
                      '--input_fn, instead of --model or --network (docs/your-model.md).')
  flags.DEFINE_string('input_fn', None,
                      'With --model_fn: its input_fn as MODULE:CALLABLE, input_fn(params[, mode]) '
                      '-> tf.data.Dataset of (features, labels) batches of params[\'batch_size\'] '
                      '(params[\'data_dir\'] is --data_dir).')
  flags.DEFINE_string('network_params', None,
                      '--network: a JSON object passed to it as params (with the run\'s own keys: '
                      'precision, image_size, mean_rgb, stddev_rgb or vocab_size, '
                      'max_seq_length).')
  flags.DEFINE_integer('resnet_depth', 50, 'ResNet depth, one of %s.' % (resnet.DEPTHS,))
  flags.DEFINE_integer('num_classes', None, 'Number of classes (default: dataset.json).')
  flags.DEFINE_integer('image_size', None,
                       'Model input height and width in pixels (default: dataset.json image size, '
                       'or 224 with --fake_data); images are resized to it. inception_v3 needs '
                       '>= %d.' % inception_v3.MIN_IMAGE_SIZE)
  flags.DEFINE_integer('max_seq_length', None,
                       'bilstm: tokens per text; longer texts are truncated, shorter ones padded '
                       'and masked (default: dataset.json).')
  flags.DEFINE_integer('embedding_dim', 256, 'bilstm: embedding width.')
  flags.DEFINE_integer('lstm_hidden_units', 1024,
                       'bilstm: LSTM units per direction (1024 as in the 2018 Cloud TPU BiLSTM '
                       'benchmark; a CPU run wants far fewer, see docs/training.md).')
  flags.DEFINE_integer('lstm_layers', 1, 'bilstm: stacked bidirectional LSTM layers.')
  flags.DEFINE_enum('lstm_pooling', 'max', bilstm.POOLINGS,
                    'bilstm: max or mean over the real positions of the top layer, or the final '
                    'forward and backward states.')
  flags.DEFINE_float('dropout_rate', 0.5, 'bilstm: dropout on the embeddings and pooled features.')
  flags.DEFINE_enum('precision', 'float32', PRECISIONS,
                    'Activation precision (variables, the loss and the export stay float32). '
                    'bfloat16: on a TPU, or on a CPU with AVX512_BF16 or AMX-BF16 under '
                    'TF 2.15 (oneDNN\'s bfloat16 rewrite; docs/training.md).')


def define_optimizer_flags():
  """The optimisation recipe; unset, each takes the --model recipe (models.recipes)."""
  flags.DEFINE_enum('recipe', None, sorted(MODEL_DEFAULTS),
                    'The published recipe to start from (default: the --model\'s own; with '
                    '--network, %s); each flag below overrides one of its values.'
                    % USER_NETWORK_RECIPE)
  flags.DEFINE_float('label_smoothing', None,
                     'Label smoothing epsilon of the training loss (%s).'
                     % _recipe('label_smoothing'))
  flags.DEFINE_float('base_learning_rate', None,
                     'Learning rate for a global batch of 256, scaled linearly with the batch; '
                     'with the constant schedule the rate itself (%s).'
                     % _recipe('base_learning_rate'))
  flags.DEFINE_float('momentum', 0.9, 'Momentum of the SGD and RMSProp optimizers.')
  flags.DEFINE_bool('nesterov', False, 'Nesterov momentum for the momentum (SGD) optimizer, as '
                    'the Cloud TPU reference ResNet trains.')
  flags.DEFINE_float('weight_decay', None,
                     'L2 coefficient, batch-norm variables excluded (%s).'
                     % _recipe('weight_decay'))
  flags.DEFINE_float('warmup_epochs', None,
                     'Epochs of linear learning-rate warmup (%s).' % _recipe('warmup_epochs'))
  flags.DEFINE_enum('lr_schedule', None, LR_SCHEDULES,
                    'Learning-rate schedule (%s): step decays at --lr_decay_epochs, exponential '
                    'every --lr_decay_every_epochs, cosine falls to 0 over the run\'s steps, '
                    'constant keeps --base_learning_rate unscaled.'
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


def _recipe(name):
  """The recipe value of `name` for each model, for a help text."""
  return ', '.join('%s %s' % (model, MODEL_DEFAULTS[model].get(name, '-')) for model in MODELS)


def define_data_flags():
  """Where the data is and how it is preprocessed."""
  flags.DEFINE_string('data_dir', None,
                      'Directory (local or gs://) of TFRecord shards (train-*, validation-*) with '
                      'dataset.json: images in the ImageNet schema, or token ids and vocab.txt for '
                      'bilstm; made by `python -m trainer.prepare`.')
  flags.DEFINE_bool('fake_data', False,
                    'Use synthetic images instead of --data_dir (smoke tests and benchmarks).')
  flags.DEFINE_integer('label_offset', None,
                       'Subtracted from image/class/label (1 for ImageNet converters that write '
                       '1..1000; default: dataset.json).')
  flags.DEFINE_integer('num_train_examples', None,
                       'Training examples per epoch (default: dataset.json).')
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


def define_schedule_flags():
  """Batch sizes, run length, evaluation and checkpoints."""
  flags.DEFINE_enum('mode', 'train_and_eval', MODES,
                    'train, eval (the latest checkpoint, or each new one with --eval_timeout), '
                    'train_and_eval (alternate every --steps_per_eval, then a final eval), '
                    'predict (--predict_input with the latest checkpoint into --predict_output), '
                    'or '
                    'dry_run (build the TPU train, eval and predict graphs for the simulated slice '
                    'of --tpu_topology, or for the TPU of --use_tpu --tpu=NAME, and check each '
                    'host\'s input; writes model_dir/dry_run.json).')
  flags.DEFINE_integer('train_batch_size', 1024, 'Global training batch size.')
  flags.DEFINE_integer('eval_batch_size', 1024, 'Global evaluation batch size.')
  flags.DEFINE_integer('train_steps', None, 'Total training steps (or give --train_epochs).')
  flags.DEFINE_float('train_epochs', None, 'Total training epochs (or give --train_steps).')
  flags.DEFINE_integer('steps_per_eval', 1000,
                       'Training steps between evaluations in train_and_eval.')
  flags.DEFINE_integer('save_checkpoints_steps', None,
                       'Steps between checkpoints (default: --steps_per_eval).')
  flags.DEFINE_integer('keep_checkpoint_max', 5, 'Checkpoints kept in model_dir.')
  flags.DEFINE_string('predict_input', None,
                      'mode=predict: a glob (local or gs://) of image files '
                      '(.jpg/.jpeg/.png/.bmp), of TFRecords in the training schema, or for bilstm '
                      'of .txt (one text per line) or .csv files (a header row with a `text` '
                      'column). Preprocessed as evaluation preprocesses; the weights come from '
                      "--model_dir's newest checkpoint, the settings from the flags and "
                      'dataset.json of --data_dir, as in training.')
  flags.DEFINE_string('predict_output', None,
                      'mode=predict: the JSON-lines file to write (local or gs://): one line per '
                      'input in input order with its name, the predicted class and its name, the '
                      '--predict_top_k probabilities and, for labelled records, the label.')
  flags.DEFINE_integer('predict_top_k', 5, 'mode=predict: classes listed per input, most '
                       'probable first.')
  flags.DEFINE_bool('predict_logits', False,
                    'mode=predict: each line also gets `logits`, the input\'s float32 logits, '
                    'one per class, unrounded (what `trainer.export_keras --check_predictions` '
                    'compares a converted model with).')
  flags.DEFINE_bool('keep_best', True,
                    'train_and_eval: copy the checkpoint with the best top_1_accuracy into '
                    'model_dir/best/ (out of --keep_checkpoint_max\'s reach), export it to '
                    'export_dir/best/ too, and record it in results.json next to the last '
                    'evaluation. model_dir/best/best.json records every evaluation either way, '
                    'so a restarted run keeps counting (--early_stopping_evals).')
  flags.DEFINE_integer('early_stopping_evals', 0,
                       'train_and_eval: stop training after this many evaluations in a row '
                       'without a better top_1_accuracy (0: never); the log says why.')
  flags.DEFINE_integer('eval_timeout', 0,
                       'mode=eval: seconds to wait for a new checkpoint (0: evaluate the latest '
                       'checkpoint once).')
  flags.DEFINE_float('log_every_n_secs', 30.0, 'Seconds between progress log lines.')
  flags.DEFINE_integer('seed', None,
                       'Seeds everything the run randomises: initializers and dropout (not '
                       'repeatable on a TPU, whose compiler ignores op seeds), the file and '
                       'example shuffles, the random crops, flips and colour jitter. Default: a '
                       'seed is drawn, logged and written to results.json, so the run can be '
                       'repeated with --seed.')
  flags.DEFINE_string('init_checkpoint', None,
                      'Warm start: a checkpoint prefix or directory (local or gs://) whose '
                      'variables initialise a new run where name and shape match (the rest, e.g. '
                      'the classifier for another --num_classes, keep their initializers). '
                      'Checkpoints of this project and of the Cloud TPU reference ResNet-50 and '
                      'deeper. A checkpoint in --model_dir wins: a restarted fine-tune resumes.')
  flags.DEFINE_boolean('init_from_moving_average', False,
                       'With --init_checkpoint: take the weights\' moving averages from it.')
  flags.DEFINE_boolean('freeze_backbone', False,
                       'Train only the classifier (the final layer), e.g. a linear probe of an '
                       '--init_checkpoint; every other weight stays as initialised. Batch-norm '
                       'statistics still follow the new data.')
  flags.DEFINE_integer('preemption_grace_secs', 25,
                       'On SIGTERM (preemption, job cancel) training stops after the step in '
                       'flight, saves a checkpoint and exits with status 75; if that takes longer '
                       'than this many seconds, the process exits with status 75 without it. '
                       'Keep it under the platform\'s kill delay (about 30 s on GCE and GKE).')
  flags.DEFINE_integer('lease_expiry_secs', 180,
                       'Training holds a lease on --model_dir (MODEL_DIR/writer.lease) so that '
                       'a second run on it is refused. On gs:// (and /gcs/) it is renewed every '
                       'sixth of this; a run on another machine takes it over after watching it '
                       'unrenewed for this many seconds (at once when its holder ran on this '
                       'machine and is gone). On local disk it is a file lock that ends with its '
                       'process. At least 12.')


def define_gpu_flags():
  """MirroredStrategy over local GPUs (or CPU devices, for tests)."""
  flags.DEFINE_integer('num_gpus', 0,
                       'Train with MirroredStrategy on this many local GPUs (synchronous data '
                       'parallelism, --train_batch_size split evenly). 0: TensorFlow picks one '
                       'device.')
  flags.DEFINE_list('mirrored_devices', None,
                    'MirroredStrategy devices instead of --num_gpus, e.g. /gpu:0,/gpu:2. '
                    '/cpu:0,/cpu:1 runs the same path on CPU devices (for testing it without '
                    'GPUs).')


def define_output_flags():
  """model_dir, export and TensorBoard output, profiling."""
  flags.DEFINE_string('model_dir', None, 'Checkpoints, TensorBoard events and results.json '
                      '(default: --job_dir, else in a Vertex AI job $AIP_CHECKPOINT_DIR; events '
                      'are also copied to $AIP_TENSORBOARD_LOG_DIR). In a Vertex AI tuning trial '
                      'a given directory gets /<trial_id> appended.')
  flags.DEFINE_string('job_dir', None, 'The job directory AI Platform passes (as --job-dir); the '
                      'model_dir when --model_dir is not given (before $AIP_CHECKPOINT_DIR).')
  flags.DEFINE_string('export_dir', None, 'If set, a SavedModel for serving is exported here '
                      '(default in a Vertex AI training job: $AIP_MODEL_DIR; per trial as '
                      '--model_dir). Refused, before any work, when it already holds '
                      'something, unless --overwrite.')
  flags.DEFINE_bool('overwrite', False,
                    'Replace what --export_dir holds (its contents are deleted just before the '
                    'export) or the file --predict_output names (trainer.benchmark: --output) '
                    'instead of refusing to start.')
  flags.DEFINE_bool('skip_host_call', False, 'Do not write per-step TensorBoard summaries.')
  flags.DEFINE_bool('predict_step_time', True,
                    'Before training, predict the step time on the device the run trains on '
                    '(trainer.advise\'s model, a second or two) and write it into results.json '
                    'as step_time, beside the measured step time and the error. A dry run '
                    'writes the prediction for its simulated slice into dry_run.json.')
  flags.DEFINE_list('profile_steps', None,
                    'START,END: write a full TensorFlow trace of each global step in [START, END) '
                    'to model_dir/profile/timeline-<step>.json (Chrome trace format: '
                    'chrome://tracing or ui.perfetto.dev). CPU/GPU only; on a Cloud TPU use the '
                    'Cloud TPU profiler (capture_tpu_profile).')
