"""Client of the rollout-budget allocator service (standard library only, Python 3.8+).

Two transports with the same methods:

* ``HttpClient("http://127.0.0.1:8080")`` talks to ``rollout-budget serve`` over HTTP JSON, or
  through a reverse proxy that adds TLS and a path (``https://host/rollout-budget``);
* ``StdioClient(state="state.db")`` starts ``rollout-budget serve --stdio`` as a child process
  and talks NDJSON over its stdin/stdout (for a Ray actor that owns the allocator).

Per training step::

    plan = client.plan(prompts, budget_rollouts=len(prompts) * 8, multiple_of=8)
    rows = rollout_budget.expand_plan(plan, prompts)      # one row per rollout
    ...generate rows, grade them...
    client.observe(rollout_budget.results_rows(rows, rewards, tokens))

``prompts`` are dicts ``{"id", "max_tokens"?, "prompt_tokens"?, "group"?, "partial_rewards"?,
"prior_pass_rate"?, "prior_samples"?}`` (the last two an offline difficulty hint, passed through)
with a stable id (`stable_prompt_id`); results as the CLI's results JSONL. Errors raise
:class:`RolloutBudgetError` with the service's status, code, field and value. With a token
(`token=`, else $ROLLOUT_BUDGET_TOKEN) every HTTP request carries ``Authorization: Bearer``.
"""

from __future__ import annotations

import collections
import http.client
import io
import json
import logging
import os
import re
import socket
import ssl
import subprocess
import threading
import time
import urllib.parse
import weakref

from .command import cli_command

__all__ = ["RolloutBudgetError", "HttpClient", "StdioClient", "connect", "PLAN_OPTIONS"]

#: Plan options the service takes (body.options), as keyword arguments of ``plan``.
PLAN_OPTIONS = ("min_n", "max_n", "skip", "policy", "value", "seed", "step", "prefill_weight", "decay",
                "reobserve_discount", "rounds_left", "multiple_of", "fresh_share")


class RolloutBudgetError(Exception):
    """A request the service refused (4xx) or could not serve (5xx), or a CLI exit (status = exit code)."""

    def __init__(self, status, error):
        self.status = status
        self.code = error.get("code")
        self.field = error.get("field")
        self.value = error.get("value")
        #: The service says the same request may succeed sent again shortly (its database went away).
        self.retryable = error.get("retryable") is True
        super().__init__("%s %s: %s" % (status, self.code, error.get("message")))


def plan_body(prompts, budget_rollouts=None, budget_tokens=None, **options):
    """The body of POST /v1/plan; unknown options raise TypeError, None values are left out."""
    unknown = sorted(set(options) - set(PLAN_OPTIONS))
    if unknown:
        raise TypeError("unknown plan options %s; expected some of %s" % (unknown, ", ".join(PLAN_OPTIONS)))
    budget = {}
    if budget_rollouts is not None:
        budget["rollouts"] = budget_rollouts
    if budget_tokens is not None:
        budget["tokens"] = budget_tokens
    body = {"candidates": list(prompts), "budget": budget}
    given = {k: v for k, v in options.items() if v is not None}
    if given:
        body["options"] = given
    return body


def _observe_body(results, options):
    unknown = sorted(set(options) - {"decay", "reobserve_discount"})
    if unknown:
        raise TypeError("unknown observe options %s; expected decay, reobserve_discount" % unknown)
    body = {"results": list(results)}
    if options:
        body["options"] = options
    return body


def _prompt_path(prompt_id, query):
    path = "/v1/prompts/" + urllib.parse.quote(str(prompt_id), safe="")
    if query:
        path += "?" + urllib.parse.urlencode(query)
    return path


_log = logging.getLogger("rollout_budget")

#: How many times a request the service answered 503 with `"retryable": true` (STATE_ERROR: its
#: state database cannot be reached, as when PostgreSQL restarts or the network is cut) is sent
#: again, waiting 0.5, 1, 2, 4, 8, 8 s between tries (23.5 s in all), before the error is raised.
#: Safe: plans only read, and an observe sent again is applied once.
STATE_RETRIES = 6
#: The same for a service that cannot be reached (HttpClient): refused or cut, as while it restarts.
CONNECT_RETRIES = 6


#: Every client alive in this process, so that a child made by ``os.fork`` (multiprocessing's
#: default start method on Linux, a DataLoader's workers) drops what it inherited: see _forked.
_LIVE = weakref.WeakSet()


def _after_fork_in_child():
    for client in list(_LIVE):
        client._forked()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class _Client:
    state_retries = STATE_RETRIES
    connect_retries = 0

    def _forked(self):
        """Runs in the child of an ``os.fork``, before anything else there."""

    def _request(self, method, path, body=None):
        raise NotImplementedError

    def _call(self, method, path, body=None):
        """One request; a retryable 503 is sent again up to ``state_retries`` times, a connection
        refused or cut (ConnectionError: the service restarting; behind a reverse proxy, the
        proxy's own 502) up to ``connect_retries`` times, waiting 0.5, 1, 2, 4, 8, 8 s. A timeout
        is not retried (a proxy's 504 neither): the service got the request."""
        failures = {"state": 0, "connect": 0}
        while True:
            try:
                return self._request(method, path, body)
            except RolloutBudgetError as error:
                if error.status == 502 and error.code == "UNEXPECTED_RESPONSE":
                    kind, limit, reason = "connect", self.connect_retries, error
                elif error.status == 503 and error.retryable:
                    kind, limit, reason = "state", self.state_retries, error
                else:
                    raise
            except ConnectionError as error:
                kind, limit, reason = "connect", self.connect_retries, error
            if failures[kind] >= limit:
                raise reason
            wait = min(0.5 * 2 ** failures[kind], 8.0)
            failures[kind] += 1
            _log.warning("rollout-budget: %s; trying again in %.1f s (%d of %d)", reason, wait, failures[kind], limit)
            time.sleep(wait)

    def plan(self, prompts, budget_rollouts=None, budget_tokens=None, rounds_left=None, multiple_of=None, **options):
        """Plan one step (or one round of it): returns the plan dict.

        `rounds_left` (this round included) makes the budgets what is left of the step, of which
        the planner takes this round's share; `multiple_of` makes Σ n a multiple of it (the
        rollout workers or data-parallel ranks). Other options: min_n, max_n, skip, policy,
        value, seed, step, prefill_weight, decay, reobserve_discount.
        """
        body = plan_body(prompts, budget_rollouts, budget_tokens, rounds_left=rounds_left, multiple_of=multiple_of, **options)
        return self._call("POST", "/v1/plan", body)

    def observe(self, results, **options):
        """Apply results in one transaction; re-sending the same results is a no-op."""
        return self._call("POST", "/v1/observe", _observe_body(results, options))

    def prompt(self, prompt_id, **query):
        """One prompt's posterior, counts and expected tokens (query: group, max_tokens, step)."""
        return self._call("GET", _prompt_path(prompt_id, query))

    def health(self):
        return self._call("GET", "/healthz")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


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
        token = token if token is not None else os.environ.get("ROLLOUT_BUDGET_TOKEN") or None
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
        data = None if body is None else json.dumps(body).encode("utf-8")
        headers = dict(self._auth)
        if data is not None:
            headers["Content-Type"] = "application/json"
        with self._lock:
            for attempt in (1, 2):
                if self._conn is None:
                    self._conn = self._connection()
                try:
                    self._conn.request(method, self._prefix + path, body=data, headers=headers)
                    res = self._conn.getresponse()
                    status, text = res.status, res.read().decode("utf-8", errors="replace")
                    if res.getheader("connection", "").lower() == "close":
                        self._drop()
                    break
                except (socket.timeout, TimeoutError) as error:  # one class from Python 3.10 on, two before
                    # The service had the request (or the connection is stalled): never sent again.
                    self._drop()
                    raise _no_answer(error, self.base_url, self._timeout, method, path) from error
                except (ConnectionError, http.client.HTTPException, OSError) as error:
                    self._drop()
                    if attempt == 2:
                        raise _unreachable(error, self.base_url) from error
        try:
            payload = json.loads(text)
        except ValueError:
            payload = None
        if status >= 400 and isinstance(payload, dict) and isinstance(payload.get("error"), dict):
            raise RolloutBudgetError(status, payload["error"])
        if status >= 400 or not isinstance(payload, dict):
            raise RolloutBudgetError(status, _unexpected(status, text, self.base_url, method, path, len(data or b"")))
        return payload

    def metrics(self):
        """The Prometheus text of /metrics."""
        with self._lock:
            conn = self._connection()
            try:
                conn.request("GET", self._prefix + "/metrics", headers=dict(self._auth))
                return conn.getresponse().read().decode("utf-8")
            finally:
                conn.close()

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


def _unexpected(status, text, base_url, method, path, sent=0):
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


def _unreachable(error, base_url):
    """``error`` (a failed request, after the retry) as the same exception class where it can
    be made, its message naming the service and what to check: a trainer's traceback then says
    which address it could not reach, not only ``[Errno 111] Connection refused``."""
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
    if isinstance(error, OSError):
        try:
            return type(error)(error.errno, message) if error.errno is not None else type(error)(message)
        except TypeError:
            pass
    return ConnectionError(message)


class StdioClient(_Client):
    """Owns ``rollout-budget serve --stdio`` as a child process; one request at a time.

    ``command`` is how to start the CLI (see rollout_budget.command: a path to
    bin/rollout-budget.js, an argv list, else $ROLLOUT_BUDGET_CLI, else `rollout-budget` on PATH);
    ``args`` go after ``serve --stdio``.

    A process that exited between two requests (killed, or stopped on an error) is started again
    on the same state at the next one, with a warning on the ``rollout_budget`` logger.

    In the child of a fork (multiprocessing's default on Linux) the client starts a
    ``serve --stdio`` of its own on the same state at its first request: the parent's process and
    pipes stay the parent's. It cannot be sent to another process (pickled); pass the state there
    and connect to it, or run ``serve`` and use HttpClient.
    """

    def __init__(self, state="./rollout-budget.db", command=None, args=(), state_retries=STATE_RETRIES):
        self.state_retries = state_retries
        self._argv = cli_command(command) + ["serve", "--stdio", "--state", state] + list(args)
        self._proc = None
        self._closed = False
        self._lock = threading.Lock()
        self._start()
        _LIVE.add(self)

    def _start(self):
        self._proc = subprocess.Popen(self._argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, encoding="utf-8", errors="replace", bufsize=1)
        self._said = collections.deque(maxlen=STDERR_LINES_KEPT)
        self._drain = threading.Thread(target=_drain_stderr, args=(self._proc.stderr, self._said), daemon=True,
                                       name="rollout-budget serve --stdio stderr")
        self._drain.start()
        self._next_id = 0

    def _what_it_said(self):
        """The last lines the process wrote on stderr, once it has ended (its stderr read to the end)."""
        self._drain.join(timeout=10)
        return "\n".join(self._said).strip()

    def _forked(self):
        """In the child of a fork the pipes are the parent's: requests from both processes would
        interleave on them and read each other's replies (their ids count alike), and the child's
        copy of the input pipe would keep the parent's ``close()`` waiting for an end of input.
        The child closes its copies (the parent's stay open; what a thread had left in a buffer is
        dropped, not sent to the parent's process) and starts its own process at its first
        request."""
        self._lock = threading.Lock()
        inherited, self._proc = self._proc, None
        if inherited is None:
            return
        for stream in (inherited.stdin, inherited.stdout, inherited.stderr):
            _close_inherited(stream)
        # The parent waits for its process; marked done here, so that this copy of the Popen never
        # waits for it, nor warns at its collection that it is still running.
        inherited.returncode = 0

    def _restart(self):
        """Its process exited between two requests (killed: the OOM killer, a ``pkill node``; or it
        stopped on an error): started again on the same state, with a warning saying how it ended.
        Nothing is lost: each observe was one transaction, and a plan only reads. A process that
        cannot start fails the request that started it, with what it said."""
        ended = self._proc
        said = " ".join(self._what_it_said().split())[-300:]
        for stream in (ended.stdin, ended.stdout):
            try:
                stream.close()
            except (OSError, ValueError):
                pass
        _log.warning("rollout-budget: `serve --stdio` exited (%s)%s; starting it again on the same state",
                     "killed by signal %d" % -ended.returncode if ended.returncode < 0 else "exit code %d" % ended.returncode,
                     ": %s" % said if said else "")
        self._start()

    def __getstate__(self):
        raise TypeError("a StdioClient owns its `rollout-budget serve --stdio` process and cannot be sent to another "
                        "process: connect to the state there (rollout_budget.connect(state)), or run "
                        "`rollout-budget serve` and send an HttpClient")

    def _request(self, method, path, body=None):
        with self._lock:
            if self._closed:
                raise RuntimeError("this StdioClient is closed")
            if self._proc is None:
                self._start()
            elif self._proc.poll() is not None:
                self._restart()
            self._next_id += 1
            msg = {"id": self._next_id, "method": method, "path": path}
            if body is not None:
                msg["body"] = body
            try:
                self._proc.stdin.write(json.dumps(msg) + "\n")
                self._proc.stdin.flush()
                line = self._proc.stdout.readline()
            except (BrokenPipeError, OSError):
                line = ""
            if not line:
                # Its output ended: the child is exiting (it may not have yet), and what it said is on stderr.
                try:
                    self._proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
                err = self._what_it_said() if self._proc.poll() is not None else ""
                raise RuntimeError("rollout-budget serve --stdio stopped: %s" % err)
            reply = json.loads(line)
            if reply.get("id") != self._next_id:
                raise RuntimeError("reply out of order: expected id %s, got %r" % (self._next_id, reply))
        if reply["status"] >= 400:
            raise RolloutBudgetError(reply["status"], reply["body"].get("error", {}))
        return reply["body"]

    def close(self):
        """Ends the child's input; it finishes, closes the state and exits. Returns its exit code
        (None when this process never started one: a fork's child that made no request)."""
        self._closed = True
        proc = self._proc
        if proc is None:
            return None
        if proc.poll() is None:
            try:
                proc.stdin.close()
            except OSError:
                pass
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.terminate()
                proc.wait(timeout=10)
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:  # the input's last flush, to a process that is gone
                    pass
        self._drain.join(timeout=10)  # its stderr, read to the end and closed by the drain
        return proc.returncode


#: How many of the last lines a `serve --stdio` wrote on stderr a StdioClient keeps, for the
#: message of an error when it stops.
STDERR_LINES_KEPT = 200


def _drain_stderr(stream, said):
    """Reads a `serve --stdio`'s stderr to its end, on a thread of its own: left unread, its lines
    (an internal error's stack trace, about 800 bytes, for each such request) filled the pipe, and
    the process waited on it, at the latest when it exited: close() then waited its 30 s and sent
    SIGTERM. Each line goes to the ``rollout_budget`` logger (INFO); the last ones are kept."""
    try:
        for line in stream:
            line = line.rstrip("\n")
            said.append(line)
            _log.info("serve --stdio: %s", line)
    except (OSError, ValueError):
        pass
    finally:
        try:
            stream.close()
        except (OSError, ValueError):
            pass


def _close_inherited(stream):
    """Closes a fork's child's copy of a file its parent's threads use, under its buffers: a thread
    of the parent that was reading or writing it at the fork held its buffer's lock, which in the
    child is never released, so the buffer's own close() would wait forever. Closing the raw file
    marks the buffers closed too, so they are never flushed or closed again."""
    raw = stream
    while raw is not None and not isinstance(raw, io.RawIOBase):
        raw = getattr(raw, "buffer", None) or getattr(raw, "raw", None)
    if raw is not None:
        try:
            raw.close()
        except (OSError, ValueError):
            pass


def connect(target, **kwargs):
    """``http://...`` or ``https://...`` → HttpClient; a SQLite path or a ``postgres://`` URL → a
    StdioClient on that state. Another ``scheme://`` is a ValueError, not a state path."""
    if is_service_url(target):
        return HttpClient(target, **kwargs)
    scheme = re.match(r"([A-Za-z][A-Za-z0-9+.-]*)://", str(target))
    if scheme and scheme.group(1).lower() not in ("postgres", "postgresql"):
        raise ValueError("%r is neither the service's url (http:// or https://) nor a state (a SQLite path or a "
                         "postgres:// url)" % (target,))
    return StdioClient(state=target, **kwargs)
