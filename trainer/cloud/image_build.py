"""Builds and pushes the trainer's image for a Vertex AI job (`trainer.submit --build_image`):
`DOCKER_BUILDKIT=1 docker build --platform=linux/amd64 --target {cpu,gpu,tpu} -t URI .` in the
repository root (the repository's Dockerfile; its ENTRYPOINT runs `python -m trainer.main`), then
`docker push URI`. With the user's own package (--user_package), the trainer's image is built
under a local tag (BASE_TAG, never pushed) and URI is an image derived from it with the package
installed (trainer/cloud/user_package.Dockerfile; trainer/cloud/user_package.py checks the
package).

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
USER_PACKAGE_DOCKERFILE = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                       'user_package.Dockerfile')

PLATFORM = 'linux/amd64'
BUILD_ENV = {'DOCKER_BUILDKIT': '1'}
# The trainer's image under the derived one, local only.
BASE_TAG = 'tpu-estimator-pipeline-trainer:%s'


def user_image_build(base, uri, context, package, docker='docker', options=()):
  """The build command (argv) of `uri`: image `base` with the package at `package` (relative to
  the build directory `context`; user_package.build_context gives both) installed. `options`:
  more options of `docker build` (a network, a secret)."""
  return [docker, 'build', '--platform=' + PLATFORM] + list(options) + [
      '-f', USER_PACKAGE_DOCKERFILE, '--build-arg', 'TRAINER_IMAGE=' + base,
      '--build-arg', 'USER_PACKAGE=' + package, '-t', uri, context]


def commands(uri, target, docker='docker', user_package=None):
  """The build commands and the push command of `uri` (argv lists), run in the repository root
  with BUILD_ENV. `user_package`: (context, package) of user_package.build_context, or None."""
  if user_package is None:
    builds = [[docker, 'build', '--platform=' + PLATFORM, '--target', target, '-t', uri, '.']]
  else:
    base = BASE_TAG % target
    builds = [[docker, 'build', '--platform=' + PLATFORM, '--target', target, '-t', base, '.'],
              user_image_build(base, uri, user_package[0], user_package[1], docker)]
  return builds + [[docker, 'push', uri]]


def shell_lines(uri, target, docker='docker', user_package=None):
  """commands() as shell lines, starting with the `cd` to the repository root."""
  env = ' '.join('%s=%s' % item for item in sorted(BUILD_ENV.items()))
  lines = ['cd ' + shlex.quote(REPO)]
  for command in commands(uri, target, docker, user_package):
    line = ' '.join(shlex.quote(c) for c in command)
    lines.append(env + ' ' + line if command[1] == 'build' else line)
  return lines


def build_and_push(uri, target, docker='docker', user_package=None, call=subprocess.call):
  """Runs commands() in the repository root.

  Raises:
    PipelineError: docker is missing or a command failed (the push: check `gcloud auth
      configure-docker REGION-docker.pkg.dev` and the repository).
  """
  if not shutil.which(docker):
    raise PipelineError('%s is not on PATH: install Docker to build the image, or build and push '
                        'it elsewhere and drop --build_image.' % docker)
  for command in commands(uri, target, docker, user_package):
    status = call(command, cwd=REPO, env=dict(os.environ, **BUILD_ENV))
    if status:
      if command[1] == 'push':
        hint = ('run `gcloud auth configure-docker %s` and check that the Artifact Registry '
                'repository exists' % uri.split('/', 1)[0])
      elif USER_PACKAGE_DOCKERFILE in command:
        hint = ('pip\'s output is above: your package and its dependencies are installed held to '
                'the versions the trainer\'s image has (TensorFlow, NumPy, protobuf ...), so a '
                'requirement of another version fails here; relax it')
      else:
        hint = 'its output is above'
      raise PipelineError('`%s` failed with status %d: %s.'
                          % (' '.join(shlex.quote(c) for c in command), status, hint))
