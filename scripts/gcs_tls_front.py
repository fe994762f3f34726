"""HTTPS front for a local fake-gcs-server, so TensorFlow's built-in gs:// client can talk to it.

usage: gcs_tls_front.py LISTEN_PORT CERT KEY BACKEND_PORT     (both on 127.0.0.1; stdlib only)

Buckets named in $GCS_DENIED_BUCKETS (space separated) answer every request with 403, as GCS does
for an identity without access, and those in $GCS_READONLY_BUCKETS answer 403 to writes and
deletes (an identity with a viewer role): the emulator itself has no permissions to test against.
Those in $GCS_OBJECT_ONLY_BUCKETS serve their objects but answer 403 to requests on the bucket
itself (its metadata, `storage.buckets.get`), as GCS does for an identity holding only
roles/storage.objectAdmin or objectViewer, whose permissions are `storage.objects.*`
(https://cloud.google.com/storage/docs/access-control/iam-roles).

Generation preconditions on deletes (`ifGenerationMatch`), which the emulator ignores there, are
checked here against the object's generation, with GCS's 412 answer.

Outages: while the file $GCS_SANDBOX_DIR/outage exists, every request fails as in a storage
outage: with `503` in the file each one is answered 503 Service Unavailable (GCS's "try again"),
with `drop` the connection is closed without an answer (a server that went away). Each request
refused so is listed ("METHOD PATH") in $GCS_SANDBOX_DIR/outage-requests.log. A file
$GCS_SANDBOX_DIR/outage.FRAGMENT does the same only to the requests whose URL-decoded path
contains FRAGMENT (a test's unique gs:// prefix: the emulator's resumable-upload URLs carry the
object's name too), and lists them in outage.FRAGMENT-requests.log, so that the tests running at
the same time keep their storage. A second word in the file (`drop model.ckpt`) narrows the
outage further to the requests whose path also contains it (a checkpoint's files, not the events
file written beside them). Names sent only in a request's body (google-cloud-storage's uploads)
are not matched.

Why it exists: TensorFlow's GCS client has https://www.googleapis.com and
https://storage.googleapis.com compiled in, so the sandbox maps those names to 127.0.0.1 and this
process terminates TLS for them. It also re-frames each request: TensorFlow sends
`Transfer-Encoding: identity` with empty POST/PUT bodies, which the emulator (Go net/http) answers
with 501, so hop-by-hop headers are dropped and every body is sent with a Content-Length.
"""

import http.client
import http.server
import json
import os
import re
import socket
import ssl
import sys
import threading
import urllib.parse

_HOP_BY_HOP = frozenset([
    'connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer',
    'upgrade', 'expect', 'content-length', 'proxy-authenticate', 'proxy-authorization'])


class _Front(http.server.BaseHTTPRequestHandler):
  protocol_version = 'HTTP/1.1'
  backend_port = None
  _connections = threading.local()

  def setup(self):
    # Headers and body leave in separate writes; without TCP_NODELAY each request can stall on
    # the peer's delayed ACK (~40 ms), which makes TF's many small requests crawl.
    self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    self.request.do_handshake()
    super().setup()

  def log_message(self, *args):
    pass

  def _body(self):
    if 'chunked' in self.headers.get('Transfer-Encoding', '').lower():
      parts = []
      while True:
        size = int(self.rfile.readline().split(b';')[0].strip() or b'0', 16)
        if not size:
          while self.rfile.readline() not in (b'\r\n', b'\n', b''):
            pass
          return b''.join(parts)
        parts.append(self.rfile.read(size))
        self.rfile.readline()
    length = int(self.headers.get('Content-Length') or 0)
    return self.rfile.read(length) if length else b''

  def _backend(self, reconnect):
    conn = getattr(self._connections, 'conn', None)
    if conn is None or reconnect:
      if conn is not None:
        conn.close()
      conn = http.client.HTTPConnection('127.0.0.1', self.backend_port, timeout=600)
      self._connections.conn = conn
    return conn

  def _denied(self):
    """The message of this request's 403, or None when it is allowed."""
    match = re.match(r'^(?:/upload)?(?:/storage/v1/b/|/)([^/?]+)', self.path)
    if not match:
      return None
    bucket = match.group(1)
    if bucket in os.environ.get('GCS_DENIED_BUCKETS', '').split():
      return 'sandbox: access to this bucket is denied'
    if (bucket in os.environ.get('GCS_OBJECT_ONLY_BUCKETS', '').split()
        and re.match(r'^/storage/v1/b/[^/?]+/?(\?|$)', self.path)):  # the bucket's metadata
      return ('sandbox: the caller does not have storage.buckets.get access to the Google Cloud '
              'Storage bucket. Permission \'storage.buckets.get\' denied on resource (or it may '
              'not exist).')
    if (self.command in ('POST', 'PUT', 'PATCH', 'DELETE')
        and bucket in os.environ.get('GCS_READONLY_BUCKETS', '').split()):
      return 'sandbox: access to this bucket is denied'
    return None

  def _outage(self):
    """The outage mode ('503' or 'drop') of the outage file that applies to this request, or
    None: $GCS_SANDBOX_DIR/outage, or an outage.FRAGMENT whose FRAGMENT the request names."""
    folder = os.environ.get('GCS_SANDBOX_DIR', '/nonexistent')
    try:
      names = [n for n in os.listdir(folder) if n == 'outage' or (
          n.startswith('outage.') and not n.endswith('.log'))]
    except OSError:
      return None
    subject = urllib.parse.unquote(self.path)
    for name in names:
      if name != 'outage' and name[len('outage.'):] not in subject:
        continue
      try:
        with open(os.path.join(folder, name)) as f:
          mode, _, also = f.read().strip().partition(' ')
        if also and also not in subject:
          continue
        mode = mode or '503'
        with open(os.path.join(folder, name + '-requests.log'), 'a') as f:
          f.write('%s %s\n' % (self.command, self.path))
        return mode
      except OSError:  # the outage ended meanwhile
        continue
    return None

  def _delete_precondition_fails(self):
    """Whether a DELETE carries ifGenerationMatch that the object's generation does not match.

    GCS makes an object delete conditional on `ifGenerationMatch` and answers 412 when it does not
    hold (https://cloud.google.com/storage/docs/json_api/v1/objects/delete,
    https://cloud.google.com/storage/docs/request-preconditions); fake-gcs-server ignores it on
    deletes (it honours it on uploads), so this front checks it. Not atomic with the delete:
    enough for one client's release racing another's takeover in a test."""
    url = urllib.parse.urlsplit(self.path)
    wanted = urllib.parse.parse_qs(url.query).get('ifGenerationMatch')
    if not wanted or not url.path.startswith('/storage/v1/b/'):
      return False
    conn = http.client.HTTPConnection('127.0.0.1', self.backend_port, timeout=60)
    try:
      conn.request('GET', url.path)
      response = conn.getresponse()
      body = response.read()
    finally:
      conn.close()
    if response.status != 200:
      return False  # the backend answers the DELETE itself (404 for a missing object)
    return str(json.loads(body).get('generation')) != wanted[0]

  def _send_error(self, status, reason, error):
    """Answers with GCS's JSON error body {"error": error}."""
    message = json.dumps({'error': error}).encode()
    self.send_response_only(status, reason)
    self.send_header('Content-Type', 'application/json')
    self.send_header('Content-Length', str(len(message)))
    self.end_headers()
    self.wfile.write(message)

  def _forward(self):
    body = self._body()
    outage = self._outage()
    if outage == 'drop':
      self.close_connection = True
      return
    if outage:
      self._send_error(503, 'Service Unavailable', {'code': 503, 'message': 'sandbox: outage'})
      return
    denied = self._denied()
    if denied:
      self._send_error(403, 'Forbidden', {
          'code': 403, 'message': denied, 'errors': [{'reason': 'forbidden'}]})
      return
    if self.command == 'DELETE' and self._delete_precondition_fails():
      self._send_error(412, 'Precondition Failed', {
          'code': 412, 'message': 'At least one of the pre-conditions you specified did not hold.',
          'errors': [{'reason': 'conditionNotMet', 'location': 'If-Match'}]})
      return
    headers = [(k, v) for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP]
    headers.append(('X-Forwarded-Proto', 'https'))
    if body or self.command in ('POST', 'PUT', 'PATCH'):
      headers.append(('Content-Length', str(len(body))))
    for attempt in range(2):  # a kept-alive backend connection may have been closed meanwhile
      conn = self._backend(reconnect=attempt > 0)
      try:
        conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
        for key, value in headers:
          conn.putheader(key, value)
        conn.endheaders(body or None)
        response = conn.getresponse()
        break
      except (ConnectionError, http.client.HTTPException):
        if attempt:
          raise
    data = response.read()
    self.send_response_only(response.status, response.reason)
    for key, value in response.getheaders():
      if key.lower() not in _HOP_BY_HOP:
        self.send_header(key, value)
    if self.command == 'HEAD' or response.status in (204, 304):
      length = response.getheader('Content-Length')
      if length is not None:
        self.send_header('Content-Length', length)
      data = b''
    else:
      self.send_header('Content-Length', str(len(data)))
    self.end_headers()
    self.wfile.write(data)
    self.wfile.flush()
    if response.will_close:
      self._backend(reconnect=True)

  do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = _forward


class _Server(http.server.ThreadingHTTPServer):
  daemon_threads = True

  def handle_error(self, request, client_address):
    if not isinstance(sys.exc_info()[1], (ConnectionError, ssl.SSLError, socket.timeout)):
      super().handle_error(request, client_address)


def main(argv):
  listen_port, cert, key, backend_port = argv[1:5]
  _Front.backend_port = int(backend_port)
  context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
  context.load_cert_chain(cert, key)
  server = _Server(('127.0.0.1', int(listen_port)), _Front)
  server.socket = context.wrap_socket(server.socket, server_side=True,
                                      do_handshake_on_connect=False)
  server.serve_forever()


if __name__ == '__main__':
  main(sys.argv)
