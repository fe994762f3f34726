"""The training recipe each network was published with, in the names of `ModelConfig`.

Flags the user leaves unset take their value from here (`flags/to_config.py`), so
`--model=inception_v3` alone trains with RMSProp, label smoothing and a weight EMA; `--recipe=NAME`
starts any network, a user's `--network` among them, from one of these.
"""

MODEL_DEFAULTS = {
    # He et al. 2016, Sec. 3.4 with the large-batch rules of Goyal et al. 2017.
    'resnet': dict(optimizer='momentum', lr_schedule='step', base_learning_rate=0.1,
                   weight_decay=1e-4, label_smoothing=0.0, warmup_epochs=5.0,
                   lr_decay_epochs=(30.0, 60.0, 80.0), lr_decay_factor=0.1,
                   moving_average_decay=0.0, gradient_clip_norm=0.0),
    # Szegedy et al. 2016, Sec. 8: RMSProp (decay 0.9, epsilon 1.0), rate x0.94 every two epochs,
    # label smoothing 0.1 (Sec. 7), weight decay 4e-5 and an EMA of the weights for evaluation.
    # 0.165 per 256 examples is the Cloud TPU reference's batch-scaled base rate.
    'inception_v3': dict(optimizer='rmsprop', lr_schedule='exponential', base_learning_rate=0.165,
                         weight_decay=4e-5, label_smoothing=0.1, warmup_epochs=0.0,
                         lr_decay_every_epochs=2.0, lr_decay_factor=0.94,
                         moving_average_decay=0.9999, gradient_clip_norm=0.0),
    # The Colab TPU Fashion-MNIST demo: Adam at 1e-3, no weight decay, no schedule.
    'cnn': dict(optimizer='adam', lr_schedule='constant', base_learning_rate=1e-3,
                weight_decay=0.0, label_smoothing=0.0, warmup_epochs=0.0,
                moving_average_decay=0.0, gradient_clip_norm=0.0),
    # Recurrent nets: Adam with the gradient clipped by its global norm (Pascanu et al. 2013,
    # Sec. 3.2), which keeps exploding LSTM gradients from wrecking a step.
    'bilstm': dict(optimizer='adam', lr_schedule='constant', base_learning_rate=1e-3,
                   weight_decay=0.0, label_smoothing=0.0, warmup_epochs=0.0,
                   moving_average_decay=0.0, gradient_clip_norm=5.0),
}

# The recipe of a --network=MODULE:CALLABLE without --recipe: Adam at 1e-3 with a constant rate
# (the Colab CNN's), which trains most small networks without tuning.
USER_NETWORK_RECIPE = 'cnn'


def recipe_name(model, recipe=None):
  """The recipe a run starts from: `recipe` if given, else the built-in `model`'s own, else
  USER_NETWORK_RECIPE for a user's network."""
  if recipe:
    return recipe
  return model if model in MODEL_DEFAULTS else USER_NETWORK_RECIPE
