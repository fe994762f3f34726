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
# file of every installed distribution): a package that needs another TensorFlow, NumPy or
# protobuf fails the build with pip's own message instead of replacing what the trainer was built
# and tested with. The cpu image's TensorFlow is the tensorflow-cpu distribution, which a
# requirement of `tensorflow` does not see: a package that brings `tensorflow` there (its files
# over tensorflow-cpu's) fails the build after pip, with what to do.
ARG TRAINER_IMAGE
FROM ${TRAINER_IMAGE}
ARG USER_PACKAGE=.
RUN --mount=type=bind,target=/tmp/src --mount=type=secret,id=ca \
    if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi \
    && python -c "import importlib.metadata as m; print('\n'.join(sorted('%s==%s' % (d.metadata['Name'].lower(), d.version) for d in m.distributions())))" > /tmp/image-versions.txt \
    && cp -r /tmp/src /tmp/src-rw \
    && pip install -c /tmp/image-versions.txt "/tmp/src-rw/${USER_PACKAGE}" \
    && python -c "import importlib.metadata as m, sys; names = {d.metadata['Name'].lower() for d in m.distributions()}; sys.exit('error: your package requires tensorflow, which pip installed over the image\'s tensorflow-cpu: drop tensorflow from its dependencies (the image brings TensorFlow).' if {'tensorflow', 'tensorflow-cpu'} <= names else 0)" \
    && rm -rf /tmp/src-rw /tmp/image-versions.txt
