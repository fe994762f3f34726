"""A local stand-in for the Vertex AI REST API (JobService, v1) on 127.0.0.1, plain HTTP, for the
real `google.cloud.aiplatform_v1.JobServiceClient` over its REST transport (tests/
test_vertex_submit.py points --api_endpoint at it).

It records every request (method, path without the query, JSON body) and answers:
  POST /v1/projects/P/locations/R/customJobs (or hyperparameterTuningJobs): 400
      INVALID_ARGUMENT when the service would refuse the body (tests/vertex_rules.py: REQUIRED
      fields, prebuilt executor images, machine / accelerator pairs and counts, TPU regions;
      `rules=False` turns that off), else the job with a name and state JOB_STATE_QUEUED;
  GET  /v1/<that name>: the job, JOB_STATE_QUEUED for its first `queued_polls` GETs (a project
      without quota for its machines), then its state moving one step per GET through
      JOB_STATE_PENDING, JOB_STATE_RUNNING (with webAccessUris when the spec enables web access;
      a study's in its trials), then `final_state` (JOB_STATE_SUCCEEDED unless told otherwise);
  POST /v1/<that name>:cancel: {} (job_service.proto CancelCustomJob / CancelHyperparameterTuning-
      Job: asynchronous; the job then reads JOB_STATE_CANCELLING, then JOB_STATE_CANCELLED with an
      error of code 1, CANCELLED);
  anything else: 404 in the google.rpc.Status JSON shape of Google's APIs.
With `deny` set to an HTTP status (e.g. 403) every request gets that status and `deny_message`
(by default a missing permission's) instead.
"""

import http.server
import json
import re
import threading

import vertex_rules

_STATUS = {400: 'INVALID_ARGUMENT', 403: 'PERMISSION_DENIED', 404: 'NOT_FOUND',
           429: 'RESOURCE_EXHAUSTED', 500: 'INTERNAL'}
_COLLECTION = re.compile(
    r'^/v1/(projects/[^/]+/locations/([^/]+))/(customJobs|hyperparameterTuningJobs)$')
_JOB = re.compile(r'^/v1/(projects/[^/]+/locations/[^/]+/'
                  r'(?:customJobs|hyperparameterTuningJobs)/\d+)(:cancel)?$')
PROGRESS = ('JOB_STATE_PENDING', 'JOB_STATE_RUNNING')
_SHELL = 'https://abc-dot-us-central1.aiplatform-training.googleusercontent.com'


class VertexStandIn(object):
  """The server: `start()` it, use `endpoint`, read `requests`, `stop()` it."""

  def __init__(self, final_state='JOB_STATE_SUCCEEDED', error_message='Replica chief exited 1',
               rules=True, today=None, queued_polls=0, reservations=None,
               persistent_resources=None):
    self.requests = []
    self.queued_polls = queued_polls
    # What Compute Engine and Vertex AI hold in the project (vertex_rules.refusal's arguments).
    self.reservations = reservations or {}
    self.persistent_resources = persistent_resources or {}
    self.rules = rules
    self.today = today  # the date the images' end of availability is compared with
    self.jobs = {}  # name -> [job dict, GETs answered]
    self.deny = None
    self.deny_message = 'Permission denied on resource project (or it may not exist).'
    self.final_state = final_state
    self.error_message = error_message
    self._lock = threading.Lock()
    self._server = None

  @property
  def endpoint(self):
    return 'http://127.0.0.1:%d' % self._server.server_address[1]

  def start(self):
    standin = self

    class Handler(http.server.BaseHTTPRequestHandler):
      protocol_version = 'HTTP/1.1'

      def log_message(self, *args):
        pass

      def do_POST(self):  # pylint: disable=invalid-name
        length = int(self.headers.get('Content-Length') or 0)
        body = json.loads(self.rfile.read(length).decode() or 'null') if length else None
        self._answer(*standin.post(self.path.split('?', 1)[0], body))

      def do_GET(self):  # pylint: disable=invalid-name
        self._answer(*standin.get(self.path.split('?', 1)[0]))

      def _answer(self, code, payload):
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header('Content-Type', 'application/json; charset=UTF-8')
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    self._server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    self._server.daemon_threads = True
    threading.Thread(target=self._server.serve_forever, daemon=True).start()
    return self

  def stop(self):
    self._server.shutdown()
    self._server.server_close()

  def _error(self, code, message):
    return code, {'error': {'code': code, 'message': message, 'status': _STATUS.get(code, '')}}

  def _record(self, method, path, body):
    with self._lock:
      self.requests.append({'method': method, 'path': path, 'body': body})

  def post(self, path, body):
    self._record('POST', path, body)
    if self.deny:
      return self._error(self.deny, self.deny_message)
    cancel = _JOB.match(path)
    if cancel and cancel.group(2):
      with self._lock:
        if cancel.group(1) not in self.jobs:
          return self._error(404, 'no such job: %s' % path)
        self.jobs[cancel.group(1)][2] = 0  # GETs answered since the cancel
      return 200, {}
    match = _COLLECTION.match(path)
    if not match:
      return self._error(404, 'no such collection: %s' % path)
    refusal = self.rules and vertex_rules.refusal(
        match.group(3), body, match.group(2), self.today, self.reservations,
        self.persistent_resources)
    if refusal:
      return self._error(400, refusal)
    with self._lock:
      name = '%s/%s/%d' % (match.group(1), match.group(3), 1000 + len(self.jobs))
      job = dict(body or {}, name=name, state='JOB_STATE_QUEUED',
                 createTime='2026-01-01T00:00:00Z')
      self.jobs[name] = [job, 0, None]  # the job, GETs answered, GETs since a cancel
    return 200, job

  def get(self, path):
    self._record('GET', path, None)
    if self.deny:
      return self._error(self.deny, self.deny_message)
    match = _JOB.match(path)
    with self._lock:
      if not match or match.group(2) or match.group(1) not in self.jobs:
        return self._error(404, 'no such job: %s' % path)
      entry = self.jobs[match.group(1)]
      step, since_cancel = entry[1], entry[2]
      entry[1] += 1
      if since_cancel is not None:
        entry[2] += 1
      job = dict(entry[0])
    if since_cancel is not None:
      job['state'] = 'JOB_STATE_CANCELLING' if since_cancel == 0 else 'JOB_STATE_CANCELLED'
      if job['state'] == 'JOB_STATE_CANCELLED':
        job['error'] = {'code': 1, 'message': 'CANCELED'}
      return 200, job
    step -= self.queued_polls
    job['state'] = ('JOB_STATE_QUEUED' if step < 0 else PROGRESS[step] if step < len(PROGRESS)
                    else self.final_state)
    if job['state'] == 'JOB_STATE_FAILED':
      job['error'] = {'code': 3, 'message': self.error_message}
    if job['state'] == 'JOB_STATE_RUNNING' and (job.get('jobSpec') or {}).get('enableWebAccess'):
      job['webAccessUris'] = {'workerpool0-0': _SHELL}
    if job['state'] == 'JOB_STATE_RUNNING' and (
        job.get('trialJobSpec') or {}).get('enableWebAccess'):  # a study: per trial
      job['trials'] = [{'id': '1', 'state': 'ACTIVE', 'webAccessUris': {'workerpool0-0': _SHELL}}]
    return 200, job
