"""The serving input of exported SavedModels: raw encoded images or raw texts, preprocessed in the
graph exactly as evaluation preprocesses them."""

import tensorflow.compat.v1 as tf

from trainer.data import preprocessing
from trainer.data import tokenizer
from trainer.models import features as features_lib


def serving_input_receiver_fn_builder(data):
  """Returns a serving_input_receiver_fn whose signature input is
    images: `image_bytes`, a string [batch] of encoded JPEG/PNG images, preprocessed exactly like
      evaluation images (uint8; the model normalizes them);
    text: `text`, a string [batch] of raw UTF-8 texts, tokenized in the graph by
      `trainer.data.tokenizer.texts_to_ids` with the data set's vocab.txt (embedded in the
      SavedModel).
  """
  if data.modality == 'text':
    vocabulary = tokenizer.read_vocabulary(data.vocab_path)

    def text_serving_input_receiver_fn():
      texts = tf.placeholder(tf.string, [None], name='text')
      token_ids, length = tokenizer.texts_to_ids(texts, vocabulary, data.max_seq_length)
      return tf.estimator.export.ServingInputReceiver(
          {features_lib.TOKEN_IDS: token_ids, features_lib.LENGTH: length}, {'text': texts})
    return text_serving_input_receiver_fn

  def serving_input_receiver_fn():
    image_bytes = tf.placeholder(tf.string, [None], name='image_bytes')
    images = tf.map_fn(
        lambda b: preprocessing.preprocess_image(
            preprocessing.decode_image(b), False, data.image_size,
            eval_crop_fraction=data.eval_crop_fraction),
        image_bytes, dtype=tf.uint8, back_prop=False)
    return tf.estimator.export.ServingInputReceiver({features_lib.IMAGE: images},
                                                    {'image_bytes': image_bytes})

  return serving_input_receiver_fn
