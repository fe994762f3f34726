"""The bidirectional-LSTM text classifier's constants."""

POOLINGS = ('max', 'mean', 'final')
CLASSIFIER_SCOPE = 'logits'
# Added to the forget gate's pre-activation at run time (TF1 LSTMCell's default, passed
# explicitly); checkpoints hold the bias without it (keras_models.checkpoint_map adds it).
LSTM_FORGET_BIAS = 1.0
# Padded positions must never win the max-pooling.
MASKED_VALUE = -1e9
