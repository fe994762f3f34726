"""The features contract: what every input_fn hands to every model_fn, defined once.

`trainer.data.input_fn` produces it, `trainer.data.serving` produces its serving subset, and
`models.model_fn` consumes it. Shapes are static (TPUs need them); `batch` is
params['batch_size'], the per-core batch on a TPU.

  image models: features[IMAGE]      uint8 [batch, image_size, image_size, 3], pixels on the
                                     0-255 scale, not normalized (the model_fn normalizes them);
                                     on a Cloud TPU float32 (uint8 is not among the infeed's
                                     documented types), or bfloat16 with bfloat16 precision
                                     (0-255 integers are exact in bfloat16: half the bytes)
  text models:  features[TOKEN_IDS]  int32 [batch, max_seq_length], 0 (padding) after `length`
                features[LENGTH]     int32 [batch], real tokens per example
  both:         features[MASK]       float32 [batch], 1.0 for a real example, 0.0 for eval padding
                                     (not part of the serving features)
                labels               int32 [batch], class index in [0, num_classes)
"""

import tensorflow.compat.v1 as tf

from trainer.models.specs.features import IMAGE  # pylint: disable=unused-import
from trainer.models.specs.features import IMAGE_DTYPES
from trainer.models.specs.features import LENGTH
from trainer.models.specs.features import MASK
from trainer.models.specs.features import TOKEN_IDS

LABEL_DTYPE = tf.int32


def feature_spec(modality, batch_size, image_size=0, max_seq_length=0, image_dtype='uint8'):
  """The features' shapes and dtypes for one batch, as the contract above gives them.

  Args:
    modality: 'image' or 'text'.
    batch_size: examples per batch (params['batch_size']); None for the serving batch.
    image_size: image models: height and width in pixels.
    max_seq_length: text models: tokens per example.
    image_dtype: one of IMAGE_DTYPES.

  Returns:
    dict feature name -> (shape list, tf.DType), without MASK when batch_size is None.

  Raises:
    ValueError: unknown modality or image_dtype.
  """
  if image_dtype not in IMAGE_DTYPES:
    raise ValueError('image_dtype must be one of %s, got %r' % (IMAGE_DTYPES, image_dtype))
  if modality == 'image':
    spec = {IMAGE: ([batch_size, image_size, image_size, 3], tf.as_dtype(image_dtype))}
  elif modality == 'text':
    spec = {TOKEN_IDS: ([batch_size, max_seq_length], tf.int32), LENGTH: ([batch_size], tf.int32)}
  else:
    raise ValueError("modality must be 'image' or 'text', got %r" % (modality,))
  if batch_size is not None:
    spec[MASK] = ([batch_size], tf.float32)
  return spec
