"""tpu-estimator-pipeline: TPUEstimator training for ResNet on Cloud TPU, CPU and GPU.

TensorFlow is an extra, not a requirement: Cloud TPU VMs, AI Platform (runtime 1.15) and the
project's own virtualenvs each bring their own TensorFlow build, and pip must not replace it.
  pip install .                 # code + numpy/absl/GCS client/hypertune; TensorFlow already present
  pip install '.[tf1]'          # + tensorflow==1.15.5        (Python 3.7)
  pip install '.[tf1-mkl]'      # + intel-tensorflow==1.15.2  (Python 3.7, x86-64)
  pip install '.[tf2]'          # + tensorflow-cpu 2.15.1 and tensorflow-estimator 2.15.0
  pip install '.[tf2-gpu]'      # + tensorflow[and-cuda] 2.15.1 (CUDA 12.2 from pip), estimator
  pip install '.[keras]'        # + tensorflow-cpu 2.21.0, keras 3.15.1, jax 0.10.2, tensorboard
                                #   (Python 3.11+)
  pip install '.[keras-torch]'  # + torch 2.13.0, Keras 3's PyTorch backend; PyPI's Linux wheel
                                #   pulls in CUDA (several GB): add --extra-index-url
                                #   https://download.pytorch.org/whl/cpu for the CPU build
  pip install '.[keras-no-tf]'  # + keras 3.15.1, tensorboard: trainer.train_keras from arrays,
                                #   on JAX or PyTorch without TensorFlow (bring the backend)
  pip install '.[prepare]'      # + Apache Beam, for
                                #   `python -m trainer.prepare imagenet|image_folder`
  pip install '.[cloud]'        # + the Vertex AI client, for `trainer.submit --platform=vertex`
"""

from setuptools import find_packages
from setuptools import setup

# The repository's models/, flags/ and keras_models/ install as trainer.models, trainer.flags and
# trainer.keras_models: `trainer` is the one top-level package installed, so no common name such
# as `models` is claimed beside a user's own code (in a checkout, trainer/__init__.py finds them).
BESIDE_TRAINER = ('models', 'flags', 'keras_models')
PACKAGES = find_packages(include=['trainer', 'trainer.*']) + [
    'trainer.' + name for folder in BESIDE_TRAINER
    for name in find_packages(include=[folder, folder + '.*'])]

setup(
    name='tpu-estimator-pipeline',
    version='0.1.0',
    description='TensorFlow Estimator/TPUEstimator training pipeline (ResNet, InceptionV3, CNN, '
                'BiLSTM) for Cloud TPU, CPU and GPU',
    packages=PACKAGES,
    package_dir={'trainer.' + folder: folder for folder in BESIDE_TRAINER},
    # The sourced tables: Vertex AI's machines (trainer/cloud/machine_rules.py) and the GPU and
    # TPU targets of trainer.advise; the Dockerfile of an image with the user's package.
    package_data={'trainer.cloud': ['vertex_machines.json', 'user_package.Dockerfile'],
                  'trainer.advise': ['targets.json']},
    python_requires='>=3.7',
    install_requires=['numpy', 'absl-py', 'google-cloud-storage', 'cloudml-hypertune'],
    extras_require={
        # TF 1.15's TPUClusterResolver needs the Google API client to look up a TPU by name.
        'tf1': ['tensorflow==1.15.5', 'protobuf<3.21', 'google-api-python-client', 'oauth2client'],
        'tf1-mkl': ['intel-tensorflow==1.15.2', 'protobuf<3.21', 'google-api-python-client',
                    'oauth2client'],
        'tf2': ['tensorflow-cpu==2.15.1', 'tensorflow-estimator==2.15.0'],
        # The Dockerfile's gpu target: pip brings CUDA 12.2 and cuDNN 8.9 (Linux x86-64).
        'tf2-gpu': ['tensorflow[and-cuda]==2.15.1', 'tensorflow-estimator==2.15.0'],
        # The Keras 3 side of the migration off Estimator: TF 2.21 has no tf.estimator, and
        # Keras >= 3.13 needs Python >= 3.11. JAX is Keras 3's other backend.
        # TF 2.21 no longer brings TensorBoard, whose summary writer trainer.train_keras uses.
        'keras': ['tensorflow-cpu==2.21.0', 'keras==3.15.1', 'jax[cpu]==0.10.2',
                  'tensorboard==2.21.0'],
        # Keras 3's third backend. '==2.13.0' also matches the CPU build '2.13.0+cpu' of PyTorch's
        # own index (optional; PyPI's Linux wheel of the same version needs the CUDA wheels).
        # torchvision: the classes the PyTorch export's state_dict loads into (ResNet, InceptionV3).
        'keras-torch': ['torch==2.13.0', 'torchvision==0.28.0'],
        # trainer.train_torch on PyTorch/XLA (--device=xla): torch_xla's releases follow torch's
        # minor versions, so the pair is pinned together (2.9.0 is torch_xla's newest; PyPI's Linux
        # torch 2.9.0 brings its CUDA wheels, about 7 GB in all). Its own virtualenv
        # (make .venv-torch-xla/.installed), not the Keras runtime's torch 2.13.
        'torch-xla': ['torch==2.9.0', 'torch_xla==2.9.0'],
        # trainer.train_keras from the arrays of `trainer.prepare arrays` with JAX or PyTorch
        # alone, no TensorFlow (a GPU machine): Keras and TensorBoard's own summary writer; add
        # the backend's accelerator build (`jax[cuda13]`, `jax[tpu]`).
        'keras-no-tf': ['keras==3.15.1', 'tensorboard==2.21.0'],
        # Data preparation on Apache Beam (trainer/prepare/beam_convert.py). Beam 2.48 is the last
        # release for Python 3.7 and the last whose protobuf range meets TF 1.15's protobuf<3.21.
        # Add the [gcp] extra of apache-beam to run it on Dataflow (docs/data.md).
        'prepare': ['apache-beam<=2.48.0; python_version < "3.8"',
                    'apache-beam>=2.60; python_version >= "3.8"'],
        # Vertex AI job submission (trainer/cloud/vertex_submit.py) and its --hptuning_config YAML.
        # 1.34.0 is the last release for Python 3.7 (gRPC only; REST transports came later).
        'cloud': ['google-cloud-aiplatform>=1.34', 'PyYAML'],
        'test': ['pytest', 'pytest-xdist', 'ruff'],
    },
    entry_points={'console_scripts': [
        'tpu-pipeline-train=trainer.main:run',
        'tpu-pipeline-prepare=trainer.prepare.__main__:run',
        'tpu-pipeline-benchmark=trainer.benchmark.__main__:run',
        'tpu-pipeline-advise=trainer.advise.__main__:run',
        'tpu-pipeline-submit=trainer.submit:run',
        'tpu-pipeline-export-keras=trainer.export_keras:run',
        'tpu-pipeline-train-keras=trainer.train_keras:run',
        'tpu-pipeline-train-torch=trainer.train_torch:run',
    ]},
)
