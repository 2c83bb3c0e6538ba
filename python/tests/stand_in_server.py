"""A real HTTP server on 127.0.0.1, in a thread, for the client tests' stand-ins for the service
(test_client_retries, test_client_servers, test_client_token): a handler that answers quietly."""

import contextlib
import http.server
import json
import threading


class _Handler(http.server.BaseHTTPRequestHandler):
    """A real HTTP server's handler for the client tests' stand-ins: one answer, quietly."""

    def answer(self, status, body, kind="application/json"):
        body = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def _serving(handler):
    """A real HTTP server on 127.0.0.1 with `handler`, in a thread; yields its URL."""
    server = http.server.HTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield "http://127.0.0.1:%d" % server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
