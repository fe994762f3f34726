"""The bidirectional-LSTM text classifier (`models.bilstm`) as a plain torch.nn module: an
embedding, nn.LSTM (bidirectional, `num_layers` stacked), pooling over the real tokens, the logits.

Token id 0 is padding, after the real tokens (trainer/data/tokenizer.py); each direction reads
only the real tokens (a packed sequence), as TensorFlow's `sequence_length` did.
"""

import torch
from torch import nn
from torch.nn.utils import rnn

from trainer.models.specs import bilstm as bilstm_spec
from trainer.models.specs import features as feature_names


class BiLSTM(nn.Module):
  """Logits float32 [N, num_classes] of token ids int64 [N, max_seq_length].

  Raises:
    ValueError: a pooling not in models.specs.bilstm.POOLINGS.
  """

  def __init__(self, vocab_size, num_classes, embedding_dim, hidden_units, num_layers, pooling,
               dropout_rate):
    super().__init__()
    if pooling not in bilstm_spec.POOLINGS:
      raise ValueError('pooling must be one of %s, got %r' % (bilstm_spec.POOLINGS, pooling))
    self.pooling = pooling
    self.embedding = nn.Embedding(vocab_size, embedding_dim)
    self.lstm = nn.LSTM(embedding_dim, hidden_units, num_layers, batch_first=True,
                        bidirectional=True)
    # TF's LSTMCell has one bias; PyTorch adds bias_ih and bias_hh. The export puts TF's in
    # bias_ih and zeros in bias_hh, kept out of training (trained, both would move the sum twice).
    for name, param in self.lstm.named_parameters():
      if name.startswith('bias_hh'):
        nn.init.zeros_(param)
        param.requires_grad_(False)
    self.dropout = nn.Dropout(dropout_rate)
    self.fc = nn.Linear(2 * hidden_units, num_classes)

  def forward(self, token_ids):
    valid = token_ids != feature_names.PAD_ID
    length = valid.sum(1)
    x = self.dropout(self.embedding(token_ids))
    # A text without tokens reads one padding step here and is zeroed below, as TF leaves it.
    packed = rnn.pack_padded_sequence(x, length.clamp(min=1).cpu(), batch_first=True,
                                      enforce_sorted=False)
    outputs, (h, _) = self.lstm(packed)
    if self.pooling == 'final':
      pooled = torch.cat([h[-2], h[-1]], dim=1)  # the last layer's forward and backward states
    else:
      outputs, _ = rnn.pad_packed_sequence(outputs, batch_first=True,
                                           total_length=token_ids.shape[1])
      mask = valid[:, :outputs.shape[1], None].to(outputs.dtype)
      if self.pooling == 'mean':
        pooled = (outputs * mask).sum(1) / length.clamp(min=1)[:, None].to(outputs.dtype)
      else:
        pooled = (outputs * mask + (1. - mask) * bilstm_spec.MASKED_VALUE).max(1).values
    pooled = torch.where((length > 0)[:, None], pooled, torch.zeros_like(pooled))
    return self.fc(self.dropout(pooled))
