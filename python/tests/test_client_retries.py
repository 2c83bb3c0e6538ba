"""The service client when the service is down, restarting or slow: a state error retried with
backoff (a stand-in for the service while its PostgreSQL is down), a refused connection retried
until the service is back, a timeout not retried, and a deadline on the whole answer."""

import os
import socket
import threading
import time
import unittest

from . import support
from .stand_in_server import _Handler, _serving
import rollout_budget as rb
from rollout_budget import config


class _Outage(_Handler):
    """A stand-in for the service while its PostgreSQL is down: the 503 STATE_ERROR answer
    `rollout-budget serve` gives then (src/service/router.ts statusOf, store/unavailable.ts;
    test/postgres-outage.test.ts makes the real one), `failures` times, then its /healthz answer.
    A PLAN_TIMEOUT 503 for POST /v1/plan, which is not retried."""

    failures = 0
    seen = 0

    def do_GET(self):
        _Outage.seen += 1
        if _Outage.seen <= _Outage.failures:
            self.answer(503, {"error": {"code": "STATE_ERROR", "retryable": True, "message": "the state database cannot be reached (connect ECONNREFUSED 127.0.0.1:5432); retry when it is back"}})
        else:
            self.answer(200, {"status": "ok", "store": "postgres", "prompts": 3})

    def do_POST(self):
        _Outage.seen += 1
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path == "/v1/observe":  # a full disk: a STATE_ERROR not marked retryable
            self.answer(503, {"error": {"code": "STATE_ERROR", "message": "state.db: the disk holding the state is full (SQLITE_FULL: database or disk is full); the state is as it was"}})
        else:
            self.answer(503, {"error": {"code": "PLAN_TIMEOUT", "message": "the plan was not done within 10 s"}})


class OutageTest(unittest.TestCase):
    def setUp(self):
        serving = _serving(_Outage)
        self.url = serving.__enter__()
        self.addCleanup(serving.__exit__, None, None, None)
        _Outage.seen = 0

    def test_a_state_error_is_retried_with_backoff_then_served(self):
        _Outage.failures = 2
        with rb.HttpClient(self.url) as c, self.assertLogs("rollout_budget", level="WARNING") as logs:
            started = time.monotonic()
            self.assertEqual(c.health()["status"], "ok")
            waited = time.monotonic() - started
        self.assertEqual(_Outage.seen, 3)
        self.assertGreaterEqual(waited, 1.5)  # 0.5 s, then 1 s
        self.assertEqual(len(logs.output), 2)
        self.assertIn("503 STATE_ERROR: the state database cannot be reached", logs.output[0])
        self.assertIn("trying again in 0.5 s (1 of 6)", logs.output[0])

    def test_retries_end_with_the_error_and_other_503s_are_not_retried(self):
        _Outage.failures = 100
        with rb.HttpClient(self.url, state_retries=1) as c, self.assertLogs("rollout_budget", level="WARNING"):
            with self.assertRaises(rb.RolloutBudgetError) as ctx:
                c.health()
        self.assertEqual((ctx.exception.status, ctx.exception.code, _Outage.seen), (503, "STATE_ERROR", 2))
        _Outage.seen = 0
        with rb.HttpClient(self.url) as c:
            with self.assertRaises(rb.RolloutBudgetError) as ctx:
                c.plan([{"id": "a"}], budget_rollouts=8)
        self.assertEqual((ctx.exception.code, _Outage.seen), ("PLAN_TIMEOUT", 1))
        _Outage.seen = 0
        with rb.HttpClient(self.url) as c:
            with self.assertRaises(rb.RolloutBudgetError) as ctx:
                c.observe([{"prompt_id": "a", "reward": 1}])
        self.assertEqual((ctx.exception.code, ctx.exception.retryable, _Outage.seen), ("STATE_ERROR", False, 1))


class RestartTest(unittest.TestCase):
    """A service that is restarting (nothing listens for a second): a trainer's step waits for it
    instead of failing; a service that took the request and did not answer in time is not asked again."""

    def test_a_refused_connection_is_retried_until_the_service_is_back(self):
        import shutil
        import subprocess
        import tempfile

        with socket.socket() as probe:  # the service's port, free while it restarts
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        folder = tempfile.mkdtemp(prefix="rb-py-restart-")
        self.addCleanup(shutil.rmtree, folder, True)
        started = []

        def start_late():
            time.sleep(1.0)
            started.append(subprocess.Popen(support.COMMAND + ["serve", "--state", os.path.join(folder, "state.db"), "--port", str(port)],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

        late = threading.Thread(target=start_late)
        late.start()
        try:
            with rb.HttpClient("http://127.0.0.1:%d" % port) as c, self.assertLogs("rollout_budget", level="WARNING") as logs:
                began = time.monotonic()
                self.assertEqual(c.observe([{"prompt_id": "a", "rollout_id": "0/a#0", "reward": 1}])["applied"], 1)
                waited = time.monotonic() - began
        finally:
            late.join()
            for proc in started:
                support.stop(proc)
        self.assertGreaterEqual(waited, 1.0)
        self.assertIn("cannot reach the rollout-budget service at http://127.0.0.1:%d" % port, logs.output[0])
        self.assertIn("trying again in 0.5 s (1 of 6)", logs.output[0])

    def test_a_timeout_is_not_retried(self):
        with socket.socket() as silent:  # accepts connections and never answers
            silent.bind(("127.0.0.1", 0))
            silent.listen(8)
            accepted = []

            def accept():
                try:
                    while True:
                        accepted.append(silent.accept()[0])
                except OSError:  # the socket closed at the test's end
                    pass

            threading.Thread(target=accept, daemon=True).start()
            port = silent.getsockname()[1]
            with rb.HttpClient("http://127.0.0.1:%d" % port, timeout=0.3) as c:
                with self.assertRaises(TimeoutError) as ctx:
                    c.plan([{"id": "a"}], budget_rollouts=8)
            for conn in accepted:
                conn.close()
        # Sent once: not again by the transport (before, its reconnect sent it twice), nor by the retries.
        self.assertEqual(len(accepted), 1)
        self.assertIn("no answer from the rollout-budget service at http://127.0.0.1:%d to POST /v1/plan within 0.3 s" % port,
                      str(ctx.exception))
        self.assertIn("raise the client's timeout= (a trainer's timeout_s, ROLLOUT_BUDGET_TIMEOUT_S) above the service's "
                      "--plan-timeout-s", str(ctx.exception))

    def test_a_trainers_timeout_comes_from_its_settings(self):
        with socket.socket() as silent:
            silent.bind(("127.0.0.1", 0))
            silent.listen(8)
            url = "http://127.0.0.1:%d" % silent.getsockname()[1]
            settings = config.settings_from({"url": url}, environ={"ROLLOUT_BUDGET_TIMEOUT_S": "0.25"})
            client = settings.client()
            self.assertEqual(client._timeout, 0.25)
            with self.assertRaisesRegex(TimeoutError, "within 0.25 s"):
                client.health()
            client.close()
        self.assertEqual(config.settings_from({"timeout_s": 90}, environ={}).timeout_s, 90.0)
        self.assertEqual(config.settings_from({}, environ={}).timeout_s, 60.0)
        for bad in ("soon", "0", "-5", "inf", "nan"):
            with self.assertRaisesRegex(ValueError, r"rollout_budget\.timeout_s must be a number of seconds.*%s" % bad):
                config.settings_from({}, environ={"ROLLOUT_BUDGET_TIMEOUT_S": bad})


class DeadlineTest(unittest.TestCase):
    def test_timeout_bounds_the_whole_answer_not_each_read(self):
        # A server sending its body a byte a second: each read came within timeout=2, and the
        # call returned after 12 s.
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(4)
        stop = threading.Event()

        def trickle():
            conn, _ = srv.accept()
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                body = b'{"status": "ok", "store": "sqlite", "prompts": 0}'
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body))
                for ch in body:
                    if stop.wait(0.25):
                        return
                    conn.sendall(bytes([ch]))

        threading.Thread(target=trickle, daemon=True).start()
        try:
            with rb.HttpClient("http://127.0.0.1:%d" % srv.getsockname()[1], timeout=2, connect_retries=0) as c:
                started = time.monotonic()
                with self.assertRaisesRegex(TimeoutError, r"no answer from the rollout-budget service at .* to GET /healthz within 2 s"):
                    c.health()
                self.assertLess(time.monotonic() - started, 4)
        finally:
            stop.set()
            srv.close()

    def test_a_connection_that_cannot_be_made_in_time_says_the_request_was_not_sent(self):
        # A host that drops the connection (a firewall; here a full accept queue) was reported as
        # "it may still be working on it: raise the client's timeout=".
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(0)
        port = srv.getsockname()[1]
        fill = []
        try:
            for _ in range(8):
                s = socket.socket()
                s.setblocking(False)
                try:
                    s.connect(("127.0.0.1", port))
                except BlockingIOError:
                    pass
                fill.append(s)
            time.sleep(0.3)
            with rb.HttpClient("http://127.0.0.1:%d" % port, timeout=1, connect_retries=0) as c:
                with self.assertRaises(TimeoutError) as ctx:
                    c.health()
            self.assertIn("cannot reach the rollout-budget service at http://127.0.0.1:%d: no connection within 1 s" % port, str(ctx.exception))
            self.assertIn("so the request was not sent", str(ctx.exception))
            self.assertNotIn("working on it", str(ctx.exception))
        finally:
            for s in fill:
                s.close()
            srv.close()


if __name__ == "__main__":
    unittest.main()
