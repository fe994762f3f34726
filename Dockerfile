# The trainer in a container, for Vertex AI custom training (CustomJob containerSpec) or any Docker
# host: the ENTRYPOINT is `python -m trainer.main`, so the container's args are the trainer's flags.
#
#   docker build --target cpu|gpu|tpu [--build-arg BASE_IMAGE=...] -t IMAGE .
#
# Targets (docs/container.md says what was built and run, and what was not):
#   cpu  tensorflow-cpu 2.15.1 + tensorflow-estimator 2.15.0 (setup.py's [tf2] extra) on
#        Python 3.11. Built and run by `make test` (tests/test_container.py).
#   gpu  tensorflow[and-cuda] 2.15.1 (setup.py's [tf2-gpu] extra, pinned by constraints/
#        py310-gpu.txt): pip brings CUDA 12.2 and cuDNN 8.9, the versions TensorFlow
#        2.15 was built and tested with ("Tested build configurations",
#        https://www.tensorflow.org/install/source#gpu); the host needs only the NVIDIA driver. The
#        base is NVIDIA's CUDA 12.2 "base" flavour (no toolkit libraries: the wheels bring them),
#        whose environment tells the NVIDIA container runtime to expose the GPUs.
#   tpu  Cloud TPU's own TensorFlow 2.15.0 build and libtpu 1.9.0 in /lib, as Vertex AI's "Training
#        with TPU accelerators" page gives them for a custom container on a TPU VM
#        (https://cloud.google.com/vertex-ai/docs/training/training-with-tpu-vm; libtpu 1.9.0 is
#        TF 2.15's: https://cloud.google.com/tpu/docs/runtimes). That wheel is for Python 3.10;
#        the rest is pinned by constraints/py310-tpu.txt.
#        Stream-executor runtime (TPU v2/v3): TPUEstimator does not run on PJRT-only TPUs (v5e,
#        v5p; tensorflow/tensorflow#90807), which trainer.tpu.compatibility refuses at start-up.
#
# BASE_IMAGE replaces the target's public base (a mirror, or an image built offline: make test
# builds from a debootstrap Debian bookworm with python3 and python3-venv). It must provide
# python3 with the venv module; the cpu and gpu targets also need apt-get (for tini).
#
# No TF 1.15 target: Vertex AI has no runtime for it (its prebuilt TF images start at 2.x and
# TPU VMs have no TF 1.x build), and TF 1.15 reaches a TPU only as a TPU Node (v3), from a VM
# that runs `python -m trainer.main` itself: install '.[tf1]' there (BUILD.md, Installing by hand).
#
# pip trusts the host's CA bundle during the build when given as a secret (nothing of it stays in
# the image; without it pip uses its own CAs):
#   DOCKER_BUILDKIT=1 docker build --platform=linux/amd64 \
#       --secret id=ca,src=/etc/ssl/certs/ca-certificates.crt ...
# (linux/amd64: Vertex AI's machines that these images run on are x86; `trainer.submit
# --build_image` builds that way on any laptop.)
# Needs BuildKit (RUN --mount): Docker's default builder since 23.0; on older Docker (Debian's
# docker.io 20.10) set DOCKER_BUILDKIT=1. No `# syntax=` line: BuildKit's built-in Dockerfile
# frontend reads this file, so a build needs no image but the base.

ARG BASE_IMAGE=

# ---- what every target shares -------------------------------------------------------------------
# A virtualenv: Debian's python3 refuses pip installs into the system (PEP 668), and a venv keeps
# the trainer's packages apart from whatever the base brings.
FROM ${BASE_IMAGE:-python:3.11-slim} AS cpu-base
ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 PATH=/opt/venv/bin:$PATH
# tini as PID 1: the kernel drops a signal that PID 1 has no handler for, so python as PID 1 would
# ignore a SIGTERM that arrives before the trainer installs its handler (trainer/run/preemption.py);
# tini forwards SIGTERM to python and exits with python's status (75: preempted, resumable).
RUN apt-get update && apt-get install -y --no-install-recommends tini \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin \
    && python3 -m venv /opt/venv

# ---- cpu -----------------------------------------------------------------------------------------
FROM cpu-base AS cpu
# Dependencies first, from setup.py and the pinned versions alone, so that a change to the code
# reinstalls only the pipeline (the second RUN), not TensorFlow. The bind mounts keep the sources
# out of the image's layers.
RUN --mount=type=bind,source=setup.py,target=/tmp/deps/setup.py \
    --mount=type=bind,source=constraints/py311.txt,target=/tmp/py311.txt \
    --mount=type=secret,id=ca \
    if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi \
    && cp -r /tmp/deps /tmp/deps-rw \
    && pip install -c /tmp/py311.txt '/tmp/deps-rw[tf2]' \
    && pip uninstall -y tpu-estimator-pipeline && rm -rf /tmp/deps-rw
RUN --mount=type=bind,target=/tmp/src --mount=type=secret,id=ca \
    if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi \
    && cp -r /tmp/src /tmp/src-rw && pip install --no-deps /tmp/src-rw && rm -rf /tmp/src-rw
# A user of its own: the trainer needs no privileges (it writes to gs:// or mounted directories).
# The container starts as root only to hand a tuning trial's root-owned metric file to that user;
# the entrypoint then drops root for good (scripts/container-entrypoint says why).
RUN useradd --create-home --uid 1000 trainer
COPY scripts/container-entrypoint /usr/local/bin/trainer-entrypoint
WORKDIR /home/trainer
# Exec form: tini is PID 1 and python, exec'd by the entrypoint, its only child; SIGTERM (docker
# stop, Vertex AI) reaches it.
ENTRYPOINT ["tini", "--", "trainer-entrypoint"]

# ---- gpu (not built here: needs NVIDIA's base image from a registry) -----------------------------
FROM ${BASE_IMAGE:-nvidia/cuda:12.2.2-base-ubuntu22.04} AS gpu
ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 PATH=/opt/venv/bin:$PATH
# Ubuntu 22.04's Python is 3.10, within TF 2.15's 3.9-3.11.
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv tini \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin \
    && python3 -m venv /opt/venv
RUN --mount=type=bind,source=setup.py,target=/tmp/deps/setup.py \
    --mount=type=bind,source=constraints/py310-gpu.txt,target=/tmp/py310-gpu.txt \
    --mount=type=secret,id=ca \
    if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi \
    && cp -r /tmp/deps /tmp/deps-rw \
    && pip install -c /tmp/py310-gpu.txt '/tmp/deps-rw[tf2-gpu]' \
    && pip uninstall -y tpu-estimator-pipeline && rm -rf /tmp/deps-rw
RUN --mount=type=bind,target=/tmp/src --mount=type=secret,id=ca \
    if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi \
    && cp -r /tmp/src /tmp/src-rw && pip install --no-deps /tmp/src-rw && rm -rf /tmp/src-rw
RUN useradd --create-home --uid 1000 trainer
COPY scripts/container-entrypoint /usr/local/bin/trainer-entrypoint
WORKDIR /home/trainer
ENTRYPOINT ["tini", "--", "trainer-entrypoint"]

# ---- tpu (not built here: its TensorFlow and libtpu come from Cloud TPU's storage bucket) --------
FROM ${BASE_IMAGE:-python:3.10-slim} AS tpu
ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 PATH=/opt/venv/bin:$PATH
ARG TF_TPU_WHEEL=https://storage.googleapis.com/cloud-tpu-tpuvm-artifacts/tensorflow/tf-2.15.0/tensorflow-2.15.0-cp310-cp310-manylinux_2_17_x86_64.manylinux2014_x86_64.whl
ARG LIBTPU_URL=https://storage.googleapis.com/cloud-tpu-tpuvm-artifacts/libtpu/1.9.0/libtpu.so
RUN apt-get update && apt-get install -y --no-install-recommends tini \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin \
    && python3 -m venv /opt/venv
RUN --mount=type=bind,source=setup.py,target=/tmp/deps/setup.py \
    --mount=type=bind,source=constraints/py310-tpu.txt,target=/tmp/py310-tpu.txt \
    --mount=type=secret,id=ca \
    if [ -s /run/secrets/ca ]; then \
      export PIP_CERT=/run/secrets/ca SSL_CERT_FILE=/run/secrets/ca; fi \
    && cp -r /tmp/deps /tmp/deps-rw \
    && pip install -c /tmp/py310-tpu.txt /tmp/deps-rw "$TF_TPU_WHEEL" \
       'tensorflow-estimator==2.15.0' \
    && pip uninstall -y tpu-estimator-pipeline && rm -rf /tmp/deps-rw \
    && python -c "import sys, urllib.request as u; u.urlretrieve(sys.argv[1], '/lib/libtpu.so')" \
       "$LIBTPU_URL"
RUN --mount=type=bind,target=/tmp/src --mount=type=secret,id=ca \
    if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi \
    && cp -r /tmp/src /tmp/src-rw && pip install --no-deps /tmp/src-rw && rm -rf /tmp/src-rw
# Root: libtpu opens the TPU VM's accelerator devices, and Cloud TPU's container guides run TPU
# containers privileged.
ENTRYPOINT ["tini", "--", "python", "-m", "trainer.main"]
