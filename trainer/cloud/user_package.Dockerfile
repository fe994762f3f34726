# The trainer's image with the user's own package installed (`trainer.submit --build_image
# --user_package=PATH`; trainer/cloud/image_build.py runs the build):
#
#   docker build -f trainer/cloud/user_package.Dockerfile --build-arg TRAINER_IMAGE=LOCAL_TAG \
#       --build-arg USER_PACKAGE=. -t URI /path/to/your/package
#
# TRAINER_IMAGE: the trainer's image (the repository's Dockerfile, target cpu, gpu or tpu), built
# just before. The build context is the package's directory (USER_PACKAGE=.) or the directory of
# its wheel or source distribution (USER_PACKAGE=the file name). The entrypoint, the user and the
# environment stay the trainer's, so the job runs `python -m trainer.main` with the package
# importable.
#
# pip installs the package and its dependencies held to the versions the image has (a constraints
# file of every installed distribution, plus tensorflow at the version of tensorflow-cpu where the
# cpu image has that): a package that needs another TensorFlow, NumPy or protobuf fails the build
# with pip's own message instead of replacing what the trainer was built and tested with.
ARG TRAINER_IMAGE
FROM ${TRAINER_IMAGE}
ARG USER_PACKAGE=.
RUN --mount=type=bind,target=/tmp/src --mount=type=secret,id=ca \
    if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi \
    && python -c "import importlib.metadata as m; v = {d.metadata['Name'].lower(): d.version for d in m.distributions()}; v.setdefault('tensorflow', v.get('tensorflow-cpu')); print('\n'.join('%s==%s' % kv for kv in sorted(v.items()) if kv[1]))" > /tmp/image-versions.txt \
    && cp -r /tmp/src /tmp/src-rw \
    && pip install -c /tmp/image-versions.txt "/tmp/src-rw/${USER_PACKAGE}" \
    && rm -rf /tmp/src-rw /tmp/image-versions.txt
