"""Bodies over the service's --body-limit by more than it drains (src/service/http.ts `refuse`:
64 MiB or 10 s, then the connection is cut), against a real `rollout-budget serve` (pyrev4 F1).

http.client sends a whole body before it reads: such a body was cut, the 413 lost, and the client
said it could not reach the service (after sending it again 14 times), never splitting it. Large
bodies now go with `Expect: 100-continue` (rollout_budget/http_continue.py)."""

import contextlib
import json
import socket
import threading
import time
import unittest

from . import support
import rollout_budget as rb

LIMIT = 1 << 20
#: Over LIMIT + the service's 64 MiB drain, and the kernel buffers on the way.
OVER_DRAIN = 72 << 20
PAD = "x" * 30000


def _fat_rows(total_bytes):
    """Results with rollout ids and steps, two per prompt, about 60 kB each (long rollout ids, so
    that a body of tens of MiB is a few thousand rows), `total_bytes` of JSON in all."""
    rows = []
    size = 0
    i = 0
    while size < total_bytes:
        pid = "p%05d" % (i // 2)
        row = {"prompt_id": pid, "step": 1, "reward": i % 2, "tokens": 100, "rollout_id": "1/%s#%d/%s%s" % (pid, i % 2, PAD, PAD)}
        rows.append(row)
        size += len(json.dumps(row)) + 2
        i += 1
    return rows


class OverTheDrainTest(support.ServiceCase):
    serve_args = ("--body-limit", str(LIMIT))

    def test_results_over_the_limit_and_the_drain_are_sent_in_parts_not_taken_for_an_unreachable_service(self):
        rows = _fat_rows(OVER_DRAIN)
        started = time.monotonic()
        # No connect retries: a cut connection raises at once (it was sent again 14 times before).
        with rb.HttpClient(self.url, connect_retries=0) as client, self.assertLogs("rollout_budget", level="INFO") as logs:
            summary = client.observe(rows)
            self.assertEqual((summary["applied"], summary["duplicates"]), (len(rows), 0))
            self.assertEqual(client.prompt(rows[-1]["prompt_id"])["rollouts"], 2 if len(rows) % 2 == 0 else 1)
        self.assertTrue(any("%d results are over the service's body limit: sending them in parts" % len(rows) in line
                            for line in logs.output), logs.output)
        self.assertLess(time.monotonic() - started, 60)

    def test_a_plan_over_the_limit_and_the_drain_is_the_services_413_naming_the_limit(self):
        candidates = [{"id": "c%05d-%s" % (i, "y" * 65000)} for i in range(OVER_DRAIN // 65000 + 1)]
        started = time.monotonic()
        with rb.HttpClient(self.url, connect_retries=0) as client:
            with self.assertRaises(rb.RolloutBudgetError) as caught:
                client.plan(candidates, budget_rollouts=8)
            self.assertEqual(caught.exception.status, 413)
            self.assertIn("larger than the limit of %d bytes (--body-limit)" % LIMIT, str(caught.exception))
            # The connection it left (the service waits for a body never sent) is not used again.
            self.assertEqual(client.health()["status"], "ok")
        self.assertLess(time.monotonic() - started, 10)


@contextlib.contextmanager
def _raw_server(handle):
    """A TCP server on 127.0.0.1 that runs `handle(connection)` for each connection, in a thread."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    stop = threading.Event()

    def loop():
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                handle(conn)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield "http://127.0.0.1:%d" % listener.getsockname()[1]
    finally:
        stop.set()
        listener.close()
        thread.join(timeout=10)


def _head(conn):
    """The request's head (bytes up to the blank line) and what came after it."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head.decode("latin-1"), rest


class ExpectContinueTest(unittest.TestCase):
    def test_a_server_that_never_answers_the_expectation_gets_the_body_after_a_second(self):
        seen = []

        def handle(conn):
            head, rest = _head(conn)
            length = int(next(l.split(":", 1)[1] for l in head.split("\r\n") if l.lower().startswith("content-length:")))
            while len(rest) < length:
                rest += conn.recv(1 << 20)
            seen.append((head, len(rest)))
            body = json.dumps({"applied": 1, "duplicates": 0}).encode()
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                         % (len(body), body))

        rows = [{"prompt_id": "p", "step": 1, "reward": 1, "rollout_id": "1/p#%d" % i, "note": PAD} for i in range(40)]
        with _raw_server(handle) as url, rb.HttpClient(url, connect_retries=0) as client:
            started = time.monotonic()
            self.assertEqual(client.observe(rows)["applied"], 1)
            waited = time.monotonic() - started
        self.assertEqual(len(seen), 1)
        head, got = seen[0]
        self.assertIn("expect: 100-continue", head.lower())
        self.assertEqual(got, len(json.dumps({"results": rows})))
        self.assertGreaterEqual(waited, 0.9)

    def test_a_body_cut_while_it_was_sent_may_be_too_large_and_the_error_says_so(self):
        def handle(conn):
            _head(conn)
            conn.recv(65536)  # a little of the body, then the connection is closed with the rest unread (a reset)

        candidates = [{"id": "c%04d-%s" % (i, "z" * 65000)} for i in range(400)]  # 26 MB
        with _raw_server(handle) as url, rb.HttpClient(url, connect_retries=0) as client:
            with self.assertRaises(ConnectionError) as caught:
                client.plan(candidates, budget_rollouts=8)
        self.assertRegex(str(caught.exception), r"the rollout-budget service at http://127\.0\.0\.1:\d+ cut the connection \(.*\) "
                                                 r"while the request's \d{8}-byte body was being sent: .*so the body may be too "
                                                 r"large: raise serve --body-limit, or send less in one request")


if __name__ == "__main__":
    unittest.main()


class ExpectIgnoredOverTlsTest(unittest.TestCase):
    """A server (or TLS proxy) that ignores ``Expect: 100-continue`` and waits for the body gets it
    after CONTINUE_WAIT_S, over TLS 1.3 too: its session tickets, sent after the handshake, made
    the socket readable with no HTTP byte in it, and the client waited for an answer until its
    whole timeout, the body never sent (a review of the change). The server here is a TEST DOUBLE
    of such a proxy: it reads a request's head and body as any HTTP/1.1 server that does not know
    the header, and answers 200."""

    def test_tls13_and_tls12_send_the_body_after_the_wait(self):
        import os
        import shutil
        import ssl
        import subprocess
        import tempfile
        if shutil.which("openssl") is None:
            self.skipTest("no openssl to make the test server's certificate")
        folder = tempfile.mkdtemp(prefix="rb-expect-tls-")
        self.addCleanup(shutil.rmtree, folder, True)
        key, crt = os.path.join(folder, "k.pem"), os.path.join(folder, "c.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", crt, "-days", "1",
                        "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
        for version in (ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_2):
            with self.subTest(version=version.name):
                server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                server.load_cert_chain(crt, key)
                server.maximum_version = version
                listener = socket.socket()
                listener.bind(("127.0.0.1", 0))
                listener.listen(4)
                got = []

                def serve():
                    raw, _ = listener.accept()
                    conn = server.wrap_socket(raw, server_side=True)
                    head, rest = _head(conn)
                    length = int(next(l.split(":", 1)[1] for l in head.split("\r\n") if l.lower().startswith("content-length:")))
                    while len(rest) < length:
                        chunk = conn.recv(1 << 20)
                        if not chunk:
                            break
                        rest += chunk
                    got.append(len(rest))
                    body = json.dumps({"applied": 40, "duplicates": 0, "aborted": 0, "prompts": 1, "last_step": 1}).encode()
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
                    conn.close()

                thread = threading.Thread(target=serve, daemon=True)
                thread.start()
                rows = [{"prompt_id": "p", "step": 1, "reward": 1, "rollout_id": "1/p#%d" % i, "note": "x" * 40000} for i in range(40)]
                client = rb.HttpClient("https://127.0.0.1:%d" % listener.getsockname()[1], timeout=20, connect_retries=0,
                                       ssl_context=ssl.create_default_context(cafile=crt))
                started = time.monotonic()
                try:
                    answer = client.observe(rows)
                finally:
                    client.close()
                    listener.close()
                took = time.monotonic() - started
                thread.join(5)
                self.assertEqual(answer["applied"], 40)
                self.assertEqual(len(got), 1)
                self.assertGreater(got[0], 1 << 20)  # the whole body, sent after the wait
                self.assertLess(took, 10, "the body waited for the client's timeout")


class EarlyAnswerSplitTest(unittest.TestCase):
    """An early answer whose head comes just before the wait ends and whose body a little later is
    read whole: the wait was the timeout of the whole read, so the head's bytes were dropped, the
    body sent, and the client waited its whole timeout for an answer it had already consumed (a
    review of the change). The server is a TEST DOUBLE of a slow refusal: a 413 head at 0.95 s,
    its body 0.3 s later."""

    def test_a_413_that_straddles_the_wait_is_the_413(self):
        answer = json.dumps({"error": {"code": "BODY_TOO_LARGE", "message": "body: larger than the limit"}}).encode()

        def handle(conn):
            _head(conn)
            time.sleep(0.95)
            conn.sendall(b"HTTP/1.1 413 Payload Too Large\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(answer))
            time.sleep(0.3)
            conn.sendall(answer)
            conn.settimeout(3)
            with contextlib.suppress(OSError):
                while conn.recv(1 << 20):
                    pass

        with _raw_server(handle) as url, rb.HttpClient(url, timeout=10, connect_retries=0) as client:
            started = time.monotonic()
            with self.assertRaises(rb.RolloutBudgetError) as caught:
                client.plan([{"id": "p", "note": "y" * (2 << 20)}], budget_rollouts=8)
            took = time.monotonic() - started
        self.assertEqual(caught.exception.status, 413)
        self.assertLess(took, 5, "the client waited its timeout for an answer it had read")
