"""The serving export of a Keras model: a SavedModel for TF Serving whose `serving_default`
signature takes what today's export of this pipeline takes (`trainer.data.serving`) and answers
with the same outputs.

  images: image_bytes string [batch] (encoded JPEG/PNG) -> decoded and preprocessed exactly as
          evaluation does (trainer.data.preprocessing), then the model (which normalizes)
  text:   text string [batch] (raw UTF-8) -> tokenized in the graph with the run's vocabulary
          (trainer.data.tokenizer, embedded in the SavedModel), then the model
  outputs: classes int32 [batch], probabilities and logits float32 [batch, num_classes]

TensorFlow backend only: the preprocessing is TensorFlow string and image ops, which a JAX
model's export (jax2tf) cannot hold.
"""

import keras
import tensorflow as tf

from trainer.data import preprocessing
from trainer.data import tokenizer
from trainer.keras_models import build


def export(model, export_dir, data):
  """Writes the serving SavedModel of `model` to `export_dir`.

  Args:
    model: a keras_models.build model.
    export_dir: directory (local or gs://).
    data: `trainer.data.data_config.DataConfig` of the run (modality, image_size,
      eval_crop_fraction; for text max_seq_length and the vocab.txt in data_dir).

  Raises:
    RuntimeError: the Keras backend is not TensorFlow.
  """
  if keras.backend.backend() != 'tensorflow':
    raise RuntimeError('the serving export needs KERAS_BACKEND=tensorflow (its preprocessing is '
                       'TensorFlow ops); the backend is %s' % keras.backend.backend())
  archive = keras.export.ExportArchive()
  archive.track(model)

  def outputs(logits):
    return {'classes': tf.argmax(logits, axis=1, output_type=tf.int32),
            'probabilities': tf.nn.softmax(logits), 'logits': logits}

  if data.modality == 'text':
    table = tokenizer.vocabulary_table(tokenizer.read_vocabulary(data.vocab_path))
    archive.track(table)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name='text')])
    def serve(text):
      token_ids, _ = tokenizer.texts_to_ids(text, table, data.max_seq_length)
      return outputs(build.logits_of(model(token_ids, training=False)))
  else:
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name='image_bytes')])
    def serve(image_bytes):
      images = tf.map_fn(
          lambda b: preprocessing.preprocess_image(
              preprocessing.decode_image(b), False, data.image_size,
              eval_crop_fraction=data.eval_crop_fraction),
          image_bytes, fn_output_signature=tf.uint8)
      return outputs(build.logits_of(model(images, training=False)))
  archive.add_endpoint('serving_default', serve)
  archive.write_out(export_dir, verbose=False)
