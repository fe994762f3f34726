"""Feeding data to the model_fns: the TFRecord schemas and shard layout, dataset.json, the tf.data
input_fns and preprocessing, the serving input, and the tokenizer."""
