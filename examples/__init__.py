"""Networks, model_fns and input_fns written the way a user of this pipeline writes their own:
outside its packages, importing only TensorFlow, named on the command line as MODULE:CALLABLE
(docs/your-model.md). The tests and the docs run them."""
