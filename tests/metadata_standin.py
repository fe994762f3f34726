"""A stand-in for the GCE metadata server on 127.0.0.1: answers the instance attributes it is
given (a TPU VM's accelerator-type, agent-worker-number), 404 for the others, and refuses a
request without the Metadata-Flavor header as the real server does. Point a client at it with
GCE_METADATA_HOST=<server.host>."""

import http.server
import threading
import time

_PREFIX = '/computeMetadata/v1/instance/attributes/'


class MetadataServer(object):
  """Context manager: serves `attributes` ({name: value}) while active; `.host` is host:port."""

  def __init__(self, attributes, flavor=True, trickle_seconds=0.0):
    """flavor=False: answers without the Metadata-Flavor header (not the real server);
    trickle_seconds > 0: sends each answer one byte at a time, this far apart."""
    attributes = dict(attributes)

    class Handler(http.server.BaseHTTPRequestHandler):

      def do_GET(self):  # pylint: disable=invalid-name
        name = self.path[len(_PREFIX):] if self.path.startswith(_PREFIX) else None
        if self.headers.get('Metadata-Flavor') != 'Google':
          self.send_error(403, 'Missing Metadata-Flavor:Google header.')
        else:  # the real server marks its answers, its 404s too
          found = name in attributes
          body = str(attributes[name] if found else 'Not Found').encode('utf-8')
          self.send_response(200 if found else 404)
          if flavor:
            self.send_header('Metadata-Flavor', 'Google')
          self.send_header('Content-Length', str(len(body)))
          self.end_headers()
          for i in range(len(body)) if trickle_seconds else ():
            self.wfile.write(body[i:i + 1])
            self.wfile.flush()
            time.sleep(trickle_seconds)
          if not trickle_seconds:
            self.wfile.write(body)

      def log_message(self, *args):  # quiet
        del args

    self._server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    self.host = '127.0.0.1:%d' % self._server.server_address[1]

  def __enter__(self):
    threading.Thread(target=self._server.serve_forever, daemon=True).start()
    return self

  def __exit__(self, *exc_info):
    self._server.shutdown()
    self._server.server_close()
