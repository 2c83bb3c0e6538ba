"""HttpClient: the service over HTTP JSON, or through a TLS reverse proxy (see client.py)."""

from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
import threading
import time
import urllib.parse

from .client_common import CONNECT_RETRIES, STATE_RETRIES, RolloutBudgetError, _Client, _close_inherited, _LIVE, to_json
from .http_continue import CONTINUE_WAIT_S, EXPECT_CONTINUE_BYTES, send_head_expecting


class HttpClient(_Client):
    """HTTP JSON transport on one kept-alive connection (reconnects once if it was dropped).

    ``url`` is ``http://host:port`` of ``rollout-budget serve``, or ``https://`` with a path: the
    service behind a reverse proxy that adds TLS and serves it under that path (requests go to
    ``<path>/v1/plan``...). The server's certificate is checked against this machine's CAs
    (``SSL_CERT_FILE`` or ``SSL_CERT_DIR`` name others, as for any Python client), or against
    ``ssl_context`` when given.

    Retrying is safe: plans only read, and an observe re-sent with the same results is
    recognised (by rollout_id, or by the batch's content) and applied once. So a 503 the
    service marks `retryable` (STATE_ERROR: its database cannot be reached) is retried
    `state_retries` times with backoff (STATE_RETRIES: about 24 s in all), and a service that
    refuses or cuts the connection (restarting) `connect_retries` times the same way, each
    logged as a warning.
    """

    def __init__(self, url="http://127.0.0.1:8080", timeout=60.0, token=None, state_retries=STATE_RETRIES,
                 connect_retries=CONNECT_RETRIES, ssl_context=None):
        self.state_retries = state_retries
        self.connect_retries = connect_retries
        self._scheme, self._host, self._port, self._prefix = _service_address(url)
        if ssl_context is not None and self._scheme != "https":
            raise ValueError("ssl_context is for an https:// url, got %r" % url)
        self._ssl_context = ssl_context
        self._given_context = ssl_context is not None
        #: The service's address as messages name it: scheme, host, port and path.
        self.base_url = "%s://%s:%d%s" % (self._scheme, "[%s]" % self._host if ":" in self._host else self._host,
                                          self._port, self._prefix)
        self._timeout = timeout
        token = _bearer(token, "token=") if token is not None else _bearer(os.environ.get("ROLLOUT_BUDGET_TOKEN"), "$ROLLOUT_BUDGET_TOKEN")
        self._token = token
        self._auth = {"Authorization": "Bearer " + token} if token else {}
        self._conn = None
        self._lock = threading.Lock()
        _LIVE.add(self)

    def _forked(self):
        """In the child of a fork the kept-alive connection is the parent's socket: a request on it
        from both processes would read each other's answers (a plan for other prompts, returned
        as if it were this one's). The child closes its copy (the parent's stays open) and opens
        its own at its next request; its lock is new, as another thread may have held it at the
        fork. The copy is closed under the connection's buffers (_close_inherited: a thread of the
        parent reading an answer at the fork held their lock)."""
        self._lock = threading.Lock()
        conn, self._conn = self._conn, None
        if conn is None:
            return
        response = getattr(conn, "_HTTPConnection__response", None)  # an answer not read to its end
        if response is not None and response.fp is not None:
            _close_inherited(response.fp)
        sock, conn.sock = conn.sock, None
        if sock is not None:
            os.close(sock.detach())

    def __getstate__(self):
        """What another process needs to make the same client (a Ray task's argument, a
        multiprocessing ``spawn`` worker's): the url and settings, never the connection."""
        if self._given_context:
            raise TypeError("an HttpClient made with ssl_context= cannot be sent to another process (an SSLContext "
                            "cannot be pickled): set SSL_CERT_FILE to your CA's file there instead, or make the "
                            "client in that process")
        return {"url": self.base_url, "timeout": self._timeout, "token": self._token or "",
                "state_retries": self.state_retries, "connect_retries": self.connect_retries}

    def __setstate__(self, settings):
        self.__init__(**settings)

    def _connection(self):
        if self._scheme == "http":
            return http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)
        # Made on first use, not in __init__: the default context reads SSL_CERT_FILE when it is made.
        if self._ssl_context is None:
            self._ssl_context = ssl.create_default_context()
        return http.client.HTTPSConnection(self._host, self._port, timeout=self._timeout, context=self._ssl_context)

    def _request(self, method, path, body=None):
        data = None if body is None else to_json(body, "body").encode("utf-8")
        headers = dict(self._auth)
        if data is not None:
            headers["Content-Type"] = "application/json"
        status, location, text = self._exchange(method, path, data, headers)
        return _answer(status, location, text, self.base_url, method, path, len(data or b""))

    def _exchange(self, method, path, data, headers):
        """Sends one request on the kept-alive connection (made again once if it was closed) and
        reads its whole answer within ``timeout`` seconds of the start: (status, Location, text)."""
        deadline = None if self._timeout is None else time.monotonic() + self._timeout
        with self._lock:
            for attempt in (1, 2):
                if self._conn is None:
                    self._conn = self._connection()
                connecting = self._conn.sock is None
                sending = None  # the size of a large body while it is being sent
                try:
                    if connecting:
                        self._conn.connect()
                        connecting = False
                    if data is not None and len(data) > EXPECT_CONTINUE_BYTES:
                        _time_left(self._conn.sock, deadline)
                        wait = CONTINUE_WAIT_S if deadline is None else max(0.0, min(CONTINUE_WAIT_S, deadline - time.monotonic()))
                        early = send_head_expecting(self._conn, method, self._prefix + path, headers, len(data), wait)
                        if early is not None:  # refused from its head: the connection waits for a body never sent
                            self._drop()
                            return early[0], early[1], early[2].decode("utf-8", errors="replace")
                        sending = len(data)
                        self._conn.send(data)
                        sending = None
                    else:
                        self._conn.request(method, self._prefix + path, body=data, headers=headers)
                    _time_left(self._conn.sock, deadline)
                    res = self._conn.getresponse()
                    status, location = res.status, res.getheader("location")
                    text = _read_by(res, self._conn.sock, deadline).decode("utf-8", errors="replace")
                    if res.getheader("connection", "").lower() == "close":
                        self._drop()
                    return status, location, text
                except (socket.timeout, TimeoutError) as error:  # one class from Python 3.10 on, two before
                    # Sent, the service had the request (or the connection is stalled): never sent again.
                    self._drop()
                    if connecting:
                        raise _no_connection(error, self.base_url, self._timeout) from error
                    raise _no_answer(error, self.base_url, self._timeout, method, path) from error
                except (ConnectionError, http.client.HTTPException, OSError) as error:
                    self._drop()
                    if attempt == 2:
                        raise _unreachable(error, self.base_url, sending) from error

    def metrics(self):
        """The Prometheus text of /metrics; errors as any request's (RolloutBudgetError, the
        service's or an answer that is not its; the address named when it cannot be reached)."""
        status, location, text = self._exchange("GET", "/metrics", None, dict(self._auth))
        return text if 200 <= status < 300 else _answer(status, location, text, self.base_url, "GET", "/metrics")

    def _drop(self):
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def close(self):
        with self._lock:
            self._drop()


def _service_address(url):
    """(scheme, host, port, path prefix) of a service URL: http or https, a host, an optional
    port (80, 443) and path (kept without its trailing slash); ValueError naming the URL and
    what is wrong with it otherwise."""
    parsed = urllib.parse.urlsplit(str(url))
    expected = "expected http://host:port or https://host[:port][/path] (a reverse proxy's)"
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError("rollout-budget service url %r: %s" % (url, expected))
    if parsed.username is not None:
        shown = urllib.parse.urlunsplit(parsed._replace(netloc="***@" + parsed.netloc.rpartition("@")[2]))
        raise ValueError("rollout-budget service url %r: a user name or password has no place in it (the service's "
                         "token goes in token= or $ROLLOUT_BUDGET_TOKEN); %s" % (shown, expected))
    if parsed.query or parsed.fragment:
        raise ValueError("rollout-budget service url %r: %s has no place in it; %s" % (
            url, "a query (?...)" if parsed.query else "a fragment (#...)", expected))
    try:
        port = parsed.port
    except ValueError:
        raise ValueError("rollout-budget service url %r: the port is not a number from 0 to 65535; %s" % (url, expected)) from None
    return parsed.scheme, parsed.hostname, port or (443 if parsed.scheme == "https" else 80), parsed.path.rstrip("/")


def is_service_url(target):
    """Whether ``target`` names a service over HTTP (``http://``, ``https://``), not a state."""
    return str(target).lower().startswith(("http://", "https://"))


def _answer(status, location, text, base_url, method, path, sent=0):
    """The service's answer in `text` (a JSON object with a 2xx status), or the RolloutBudgetError
    it stands for: the service's own error (``{"error": {"code": "<CODE>", "message": ...}}``),
    else an answer that is not the service's (a redirect, another server's JSON or page)."""
    try:
        payload = json.loads(text)
    except ValueError:
        payload = None
    key = _shape_key(path)
    if 200 <= status < 300 and isinstance(payload, dict) and (key is None or key in payload):
        return payload
    error = payload.get("error") if isinstance(payload, dict) else None
    if status >= 400 and isinstance(error, dict) and isinstance(error.get("code"), str) and isinstance(error.get("message"), str):
        raise RolloutBudgetError(status, error)
    raise RolloutBudgetError(status, _unexpected(status, text, base_url, method, path, sent, location))


#: A key every answer of the service's holds, by path: another server's JSON object with a 200
#: (a gateway's status page) is not returned as a plan.
_SHAPE = {"/v1/plan": "allocations", "/v1/observe": "applied", "/healthz": "status"}


def _shape_key(path):
    """The key the service's answer to `path` holds (None: not checked)."""
    path = path.split("?", 1)[0]
    return "rollouts" if path.startswith("/v1/prompts/") else _SHAPE.get(path)


def _time_left(sock, deadline):
    """Sets `sock`'s timeout to what is left until `deadline` (socket.timeout when none is)."""
    if deadline is None or sock is None:
        return
    left = deadline - time.monotonic()
    if left <= 0:
        raise socket.timeout("timed out")
    sock.settimeout(left)


def _read_by(res, sock, deadline):
    """The response's body, read within `deadline`: a socket timeout alone bounds each read, so a
    server sending a byte a second kept a request with timeout=2 going for as long as it sent."""
    if deadline is None:
        return res.read()
    parts = []
    while not res.isclosed() and res.length != 0:
        _time_left(sock, deadline)
        part = res.read1(65536)  # what has come (read(n) waits for all n bytes, each read within the timeout)
        if not part:
            break
        parts.append(part)
    # read1 leaves a response read to its Content-Length open: read() closes it, so the
    # connection takes the next request (else that request failed and was sent again).
    parts.append(res.read())
    return b"".join(parts)


def _unexpected(status, text, base_url, method, path, sent=0, location=None):
    """The error of an answer that is not the service's (a body that is not a JSON object, or an
    error without the service's ``{"error": {...}}``): another server at that address (vLLM's own
    port, a proxy's HTML page) would otherwise come back as a plan, or as an error saying nothing.
    A reverse proxy's 413, 502 and 504 say what to change (`sent`: the request body's bytes)."""
    shown = " ".join(text.split())
    shown = "an empty body" if not shown else repr(shown if len(shown) <= 200 else shown[:200] + "...")
    if status == 413:
        hint = "a proxy in front of the service refused the request's %d-byte body: raise its limit (nginx: " \
               "client_max_body_size) to the service's --body-limit (8 MiB by default)" % sent
    elif status in (502, 504):
        hint = "a proxy answered for the service: is `rollout-budget serve` running behind it%s?" % (
            ", and its timeout (nginx: proxy_read_timeout) above the service's --plan-timeout-s" if status == 504 else "")
    elif 300 <= status < 400:
        # The service never redirects: a proxy does (http:// to https://, a path without its slash).
        hint = "the server redirects to %s, which is not followed: give the service's address as the url (the " \
               "service itself never redirects)" % (repr(location) if location else "no Location")
    else:
        hint = "is `rollout-budget serve` the server at %s?" % base_url
    return {
        "code": "UNEXPECTED_RESPONSE",
        "message": "%s %s%s answered %s with %s, not the rollout-budget service's JSON; %s" % (
            method, base_url, path, status, shown, hint),
        "value": text[:200],
    }


def _no_answer(error, base_url, timeout, method, path):
    """A request that got no answer within ``timeout`` seconds, as a TimeoutError naming it. It is
    not sent again: the service may be working on it (a plan over many candidates), and its own
    --plan-timeout-s answers a plan that runs too long with 503 PLAN_TIMEOUT."""
    message = ("no answer from the rollout-budget service at %s to %s %s within %s s (%s); it may still be "
               "working on it: raise the client's timeout= (a trainer's timeout_s, ROLLOUT_BUDGET_TIMEOUT_S) above the "
               "service's --plan-timeout-s (10 s by default), or "
               "check that the service at that address is not stalled" % (base_url, method, path, timeout, error))
    return TimeoutError(error.errno, message) if getattr(error, "errno", None) is not None else TimeoutError(message)


def _no_connection(error, base_url, timeout):
    """A connection that could not be made within ``timeout`` seconds, as a TimeoutError naming
    the address; the request was not sent (a firewall dropping it, a wrong address, a host down)."""
    message = ("cannot reach the rollout-budget service at %s: no connection within %s s (%s), so the request was not sent; "
               "check the address, and that nothing between (a firewall) drops the connection" % (base_url, timeout, error))
    return TimeoutError(error.errno, message) if getattr(error, "errno", None) is not None else TimeoutError(message)


def _unreachable(error, base_url, sending=None):
    """``error`` (a failed request, after the retry) as the same exception class where it can
    be made, its message naming the service and what to check: a trainer's traceback then says
    which address it could not reach, not only ``[Errno 111] Connection refused``. `sending`: the
    size of the body it cut while it was being sent (None: it did not), which may be too large."""
    detail = getattr(error, "strerror", None) or getattr(error, "reason", None) or str(error) or type(error).__name__
    if isinstance(error, ssl.SSLCertVerificationError):
        hint = "the server's certificate is not one this machine trusts: set SSL_CERT_FILE to the file of the CA " \
               "that signed it, or pass ssl_context="
        detail = error.verify_message or detail
    elif isinstance(error, ssl.SSLError):
        hint = "an https:// url needs a server that speaks TLS (a reverse proxy): `rollout-budget serve` itself " \
               "speaks plain HTTP (http://)"
        detail = "TLS: %s" % detail
    else:
        hint = "is `rollout-budget serve` running there?"
    message = "cannot reach the rollout-budget service at %s (%s); %s" % (base_url, detail, hint)
    if sending is not None and not isinstance(error, ssl.SSLError):
        # Sent after no "100 Continue" came within CONTINUE_WAIT_S (a busy server, a proxy that
        # does not pass the header on): a body the service then refused is cut as it comes.
        message = ("the rollout-budget service at %s cut the connection (%s) while the request's %d-byte body was being "
                   "sent: the service cuts a body over its --body-limit (8 MiB by default) after reading 64 MiB more of it "
                   "(or for 10 s), so the body may be too large: raise serve --body-limit, or send less in one request "
                   "(observe sends results in parts when each has a rollout_id and a step); else it stopped or restarted "
                   "meanwhile" % (base_url, detail, sending))
    if isinstance(error, OSError):
        try:
            return type(error)(error.errno, message) if error.errno is not None else type(error)(message)
        except TypeError:
            pass
    return ConnectionError(message)


def _bearer(secret, source):
    """`secret` as `Authorization: Bearer` carries it (None or empty: no token): printable ASCII
    without spaces, as the service's own check (`serve --token`); else a ValueError naming
    `source` and the position, never the secret (http.client's own error printed the header,
    token and all)."""
    if not secret:
        return None
    bad = next((i for i, c in enumerate(secret) if not "!" <= c <= "~"), None)
    if bad is not None:
        raise ValueError("%s holds a character an HTTP header cannot carry (a space, a control character or non-ASCII) at "
                         "position %d of %d: it must be printable ASCII without spaces%s"
                         % (source, bad + 1, len(secret), " (a secret file's last newline? strip it)" if secret[-1] in "\r\n" else ""))
    return secret
