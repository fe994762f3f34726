"""The host the trainer runs on: what its CPU offers (`cpu`), the thread and library settings
chosen for it (`threads`), and the measured choice of TensorFlow runtime for `make train`
(`runtime_probe`). `cpu` and `threads` import no TensorFlow: the settings must be in the
environment before TensorFlow and OpenMP load."""
