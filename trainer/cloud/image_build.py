"""Builds and pushes the trainer's image for a Vertex AI job (`trainer.submit --build_image`):
`DOCKER_BUILDKIT=1 docker build --platform=linux/amd64 --target {cpu,gpu,tpu} -t URI .` in the
repository root (the repository's Dockerfile; its ENTRYPOINT runs `python -m trainer.main`), then
`docker push URI`.

linux/amd64: Vertex AI's machines that the images can use are x86 (its Arm A4X machines take only
Arm images, and machine_rules refuses them), so an image built on an Arm laptop would not start
there. DOCKER_BUILDKIT=1: the Dockerfile's `RUN --mount` needs BuildKit, Docker's default builder
only since 23.0.
"""

import os
import shlex
import shutil
import subprocess

from trainer.errors import PipelineError

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


PLATFORM = 'linux/amd64'
BUILD_ENV = {'DOCKER_BUILDKIT': '1'}


def commands(uri, target, docker='docker'):
  """The build and the push command of `uri` (argv lists), run in the repository root with
  BUILD_ENV."""
  return [[docker, 'build', '--platform=' + PLATFORM, '--target', target, '-t', uri, '.'],
          [docker, 'push', uri]]


def shell_lines(uri, target, docker='docker'):
  """commands() as shell lines, starting with the `cd` to the repository root."""
  build, push = commands(uri, target, docker)
  env = ' '.join('%s=%s' % item for item in sorted(BUILD_ENV.items()))
  return ['cd ' + shlex.quote(REPO), env + ' ' + ' '.join(shlex.quote(c) for c in build),
          ' '.join(shlex.quote(c) for c in push)]


def build_and_push(uri, target, docker='docker', call=subprocess.call):
  """Runs commands() in the repository root.

  Raises:
    PipelineError: docker is missing or a command failed (the push: check `gcloud auth
      configure-docker REGION-docker.pkg.dev` and the repository).
  """
  if not shutil.which(docker):
    raise PipelineError('%s is not on PATH: install Docker to build the image, or build and push '
                        'it elsewhere and drop --build_image.' % docker)
  for command in commands(uri, target, docker):
    status = call(command, cwd=REPO, env=dict(os.environ, **BUILD_ENV))
    if status:
      hint = ('run `gcloud auth configure-docker %s` and check that the Artifact Registry '
              'repository exists' % uri.split('/', 1)[0]) if command[1] == 'push' else (
                  'its output is above')
      raise PipelineError('`%s` failed with status %d: %s.'
                          % (' '.join(shlex.quote(c) for c in command), status, hint))
