"""StdioClient: ``rollout-budget serve --stdio`` as a child process (see client.py)."""

from __future__ import annotations

import collections
import json
import subprocess
import threading

from .client_common import STATE_RETRIES, RolloutBudgetError, _Client, _close_inherited, _LIVE, _log, to_json
from .command import child_env, cli_command, password_out_of_args


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

    def __init__(self, state="./rollout-budget.db", command=None, args=(), state_retries=STATE_RETRIES, timeout=None):
        self.state_retries = state_retries
        #: Seconds a request waits for its answer (None: no limit); past it the process is stopped and
        #: TimeoutError raised (not retried: the next request starts the process again).
        self.timeout = timeout
        # A postgres:// state's password goes to the child as PGPASSWORD, never on its command line (ps).
        args, self._password = password_out_of_args(["serve", "--stdio", "--state", state] + list(args))
        self._argv = cli_command(command) + args
        self._proc = None
        self._closed = False
        self._lock = threading.Lock()
        self._start()
        _LIVE.add(self)

    def _start(self):
        self._proc = subprocess.Popen(self._argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, encoding="utf-8", errors="replace", bufsize=1, env=child_env(self._password))
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
        _close_pipes(ended)
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
            for attempt in (1, 2):
                if self._proc is None:
                    self._start()
                elif self._proc.poll() is not None:
                    self._restart()
                self._next_id += 1
                msg = {"id": self._next_id, "method": method, "path": path}
                if body is not None:
                    msg["body"] = body
                reply, timed_out = self._exchange(to_json(msg), self._next_id)
                if reply is not None:
                    break
                # Its output ended: the child is exiting (it may not have yet), and what it said is on stderr.
                hung = False
                try:
                    self._proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    # Its output closed and still running: it will never answer (every later
                    # request waited 10 s on the same pipe). Stopped; the next request starts it again.
                    hung = True
                    self._proc.kill()
                    self._proc.wait()
                code = self._proc.poll()
                if self._closed:
                    # close() (another thread) ended it: not started again for a closed client.
                    raise RuntimeError("this StdioClient was closed during %s %s" % (method, path))
                if hung:
                    said = " ".join(self._what_it_said().split())[-300:]
                    raise RuntimeError("rollout-budget serve --stdio closed its output without exiting, during %s %s: stopped it; "
                                       "the next request starts it again (it said: %s)" % (method, path, said or "nothing"))
                if timed_out:
                    raise TimeoutError("rollout-budget serve --stdio gave no answer to %s %s within %s s (timeout): stopped it; "
                                       "the next request starts it again" % (method, path, self.timeout))
                how = "killed by signal %d" % -code if code is not None and code < 0 else "exit code %s" % code
                said = " ".join(self._what_it_said().split())[-300:] if code is not None else ""
                if attempt == 1 and code is not None and code < 0:
                    # Killed mid-request (the OOM killer): safe to send again, an observe applies once.
                    _log.warning("rollout-budget: `serve --stdio` was %s during %s %s; starting it again and sending the request again",
                                 how, method, path)
                    self._what_it_said()
                    _close_pipes(self._proc)
                    self._start()
                    continue
                raise RuntimeError("rollout-budget serve --stdio stopped: %s (%s, during %s %s)" % (said or "it said nothing", how, method, path))
            if reply.get("id") is None and reply.get("status", 0) >= 400:
                # A request the process could not read as one (a line over --body-limit: 413) is
                # answered with id null; one request at a time, so it is this one's answer.
                raise RolloutBudgetError(reply["status"], reply["body"].get("error", {}))
            if reply.get("id") != self._next_id:
                raise RuntimeError("reply out of order: expected id %s, got %r" % (self._next_id, reply))
        if reply["status"] >= 400:
            raise RolloutBudgetError(reply["status"], reply["body"].get("error", {}))
        return reply["body"]

    def _exchange(self, line, request_id):
        """Sends one request line and reads its answer (None when the output ended); with a
        timeout, a watchdog stops the process if no answer came in time. Returns (answer, timed_out).

        Answers to earlier requests are skipped: a request abandoned while it waited (a
        KeyboardInterrupt, Jupyter's interrupt, which reaches this process and not the child)
        leaves its answer in the pipe, and reading it as this request's would put every later
        request one answer behind."""
        fired = threading.Event()
        proc = self._proc
        watchdog = None
        if self.timeout is not None:
            def stop():
                fired.set()
                proc.kill()
            watchdog = threading.Timer(self.timeout, stop)
            watchdog.daemon = True
            watchdog.start()
        try:
            try:
                proc.stdin.write(line + "\n")
                proc.stdin.flush()
            except (OSError, ValueError):  # BrokenPipeError, or ValueError: a pipe closed by close()
                return None, fired.is_set()
            answer = _read_answer(proc)
            while answer is not None and isinstance(answer.get("id"), int) and answer["id"] < request_id:
                _log.info("rollout-budget: skipped the answer to request %d, abandoned before it came", answer["id"])
                answer = _read_answer(proc)
        finally:
            if watchdog is not None:
                watchdog.cancel()
        return answer, fired.is_set()

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
                proc.wait(timeout=CLOSE_WAIT_S)
            except subprocess.TimeoutExpired:
                # Still busy (a request waiting for another writer's lock): stopped, killed if it
                # does not stop (node cannot run its SIGTERM handler while SQLite waits for the lock).
                proc.terminate()
                try:
                    proc.wait(timeout=TERM_WAIT_S)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        _close_pipes(proc)
        self._drain.join(timeout=10)  # its stderr, read to the end and closed by the drain
        return proc.returncode


def _read_answer(proc):
    """The child's next answer, decoded; None when its output ended or was closed. A line that is
    not an answer (a wrapper script's banner on stdout) is logged and skipped: it raised a bare
    JSONDecodeError or AttributeError."""
    while True:
        try:
            text = proc.stdout.readline()
        except (OSError, ValueError):  # ValueError: I/O on a pipe closed by close()
            return None
        if not text:
            return None
        try:
            answer = json.loads(text)
        except ValueError:
            answer = None
        if isinstance(answer, dict) and "status" in answer:
            return answer
        _log.warning("rollout-budget: `serve --stdio` wrote a line that is not an answer, skipped: %r", text.rstrip("\n")[:200])


def _close_pipes(proc):
    """Closes this process's ends of an ended process's input and output (its stderr is the
    drain's to close)."""
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            try:
                stream.close()
            except (OSError, ValueError):  # the input's last flush, to a process that is gone
                pass


#: Seconds close() waits for the process to finish after its input ends, then after SIGTERM
#: (then SIGKILL): close() ends it in bounded time.
CLOSE_WAIT_S = 30
TERM_WAIT_S = 10

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
