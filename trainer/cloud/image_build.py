"""Builds and pushes the trainer's image for a Vertex AI job (`trainer.submit --build_image`):
`docker build --target {cpu,gpu,tpu} -t URI .` in the repository root (the repository's
Dockerfile; its ENTRYPOINT is `python -m trainer.main`), then `docker push URI`.
"""

import os
import shlex
import shutil
import subprocess

from trainer.errors import PipelineError

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def commands(uri, target, docker='docker'):
  """The build and the push command of `uri` (argv lists), run in the repository root."""
  return [[docker, 'build', '--target', target, '-t', uri, '.'], [docker, 'push', uri]]


def shell_lines(uri, target, docker='docker'):
  """commands() as shell lines, starting with the `cd` to the repository root."""
  return ['cd ' + shlex.quote(REPO)] + [' '.join(shlex.quote(c) for c in command)
                                        for command in commands(uri, target, docker)]


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
    status = call(command, cwd=REPO)
    if status:
      hint = ('run `gcloud auth configure-docker %s` and check that the Artifact Registry '
              'repository exists' % uri.split('/', 1)[0]) if command[1] == 'push' else (
                  'its output is above')
      raise PipelineError('`%s` failed with status %d: %s.'
                          % (' '.join(shlex.quote(c) for c in command), status, hint))
