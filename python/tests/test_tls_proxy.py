"""HttpClient through a real TLS reverse proxy: nginx, configured with docs/service.md's `nginx`
block as written (its ports and files replaced), in front of a real `rollout-budget serve`,
with a CA and a server certificate made by `openssl` for the test. Before, the client refused
every https:// url, and `connect` (a trainer's ROLLOUT_BUDGET_URL) took one for a state path.

nginx: Debian's nginx-light (.ci/setup-nginx.sh); without it (or openssl) these tests are
skipped, and fail under CI=true.
"""

import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import unittest
from unittest import mock

from . import support
import rollout_budget as rb
from rollout_budget import config

DOC = os.path.join(support.ROOT, "docs", "service.md")
TOKEN = "tls-s3cret"
PREFIX = "/rollout-budget"


def _doc_server_block():
    """The ```nginx block of docs/service.md, as written."""
    with open(DOC, encoding="utf-8") as f:
        blocks = re.findall(r"```nginx\n(.*?)```", f.read(), flags=re.S)
    assert len(blocks) == 1, "docs/service.md: expected one nginx block, found %d" % len(blocks)
    return blocks[0]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _openssl(folder, *args):
    subprocess.run(["openssl", *args], cwd=folder, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _make_certificates(folder):
    """A CA (ca.crt) and a server certificate it signs for localhost and 127.0.0.1."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl(folder, "req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=rollout-budget test CA",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    _openssl(folder, "req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost")
    with open(os.path.join(folder, "server.ext"), "w") as f:
        f.write("basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n"
                "subjectAltName=DNS:localhost,IP:127.0.0.1\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n")
    _openssl(folder, "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-set_serial", "1",
             "-days", "2", "-out", "server.crt", "-extfile", "server.ext")


def _nginx_config(folder, proxy_port, service_port):
    """nginx.conf: the doc's server block with this test's ports and files, and the global
    settings a run as this user in a temp folder needs (one process, files under `folder`)."""
    block = _doc_server_block()
    for old, new in (("listen 8443 ssl;", "listen 127.0.0.1:%d ssl;" % proxy_port),
                     ("/etc/rollout-budget/server.crt", os.path.join(folder, "server.crt")),
                     ("/etc/rollout-budget/server.key", os.path.join(folder, "server.key")),
                     ("http://127.0.0.1:8080/", "http://127.0.0.1:%d/" % service_port)):
        assert old in block, "docs/service.md's nginx block no longer holds %r" % old
        block = block.replace(old, new)
    temp = "\n".join("    %s_temp_path %s;" % (kind, os.path.join(folder, kind)) for kind in ("client_body", "proxy"))
    return ("daemon off;\nmaster_process off;\npid %s;\nerror_log %s warn;\nevents { worker_connections 64; }\n"
            "http {\n    access_log off;\n%s\n%s}\n") % (
        os.path.join(folder, "nginx.pid"), os.path.join(folder, "error.log"), temp, block)


def _nginx_binary():
    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
    if nginx is None or shutil.which("openssl") is None:
        support.missing("nginx and openssl for the TLS proxy tests (Debian's nginx-light: run .ci/setup-nginx.sh)")
    return nginx


def _start_nginx(nginx, folder, service_port):
    """nginx on a free port in front of the service, from the doc's block; returns (process, port)."""
    port = _free_port()
    conf = os.path.join(folder, "nginx.conf")
    with open(conf, "w") as f:
        f.write(_nginx_config(folder, port, service_port))
    proc = subprocess.Popen([nginx, "-p", folder, "-e", os.path.join(folder, "error.log"), "-c", conf],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("nginx exited %s: %s" % (proc.returncode, proc.stderr.read()))
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, port
        except OSError:
            time.sleep(0.05)
    _stop_nginx(proc)
    raise RuntimeError("nginx did not listen on %d within 15 s" % port)


def _stop_nginx(proc):
    proc.send_signal(signal.SIGQUIT)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    proc.stderr.close()


class _ProxyCase(unittest.TestCase):
    """A real `rollout-budget serve` (with a token) behind a real nginx, per test class."""

    @classmethod
    def setUpClass(cls):
        nginx = _nginx_binary()
        cls.dir = tempfile.mkdtemp(prefix="rb-tls-")
        try:
            _make_certificates(cls.dir)
            cls.ca = os.path.join(cls.dir, "ca.crt")
            cls.state = os.path.join(cls.dir, "state.db")
            cls.service, cls.service_port = support.start_http(cls.state, "--token", TOKEN)
            cls.nginx, cls.proxy_port = _start_nginx(nginx, cls.dir, cls.service_port)
        except BaseException:
            cls.tearDownClass()
            raise
        cls.url = "https://localhost:%d%s" % (cls.proxy_port, PREFIX)

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, "nginx", None) is not None:
            _stop_nginx(cls.nginx)
        if getattr(cls, "service", None) is not None:
            support.stop(cls.service)
        shutil.rmtree(cls.dir, ignore_errors=True)

    def client(self, url=None, **kwargs):
        kwargs.setdefault("token", TOKEN)
        kwargs.setdefault("connect_retries", 0)
        return rb.HttpClient(url or self.url, timeout=30, **kwargs)


class TlsProxyTest(_ProxyCase):

    def test_plans_observes_and_reads_through_the_proxy_with_the_ca_from_ssl_cert_file(self):
        with mock.patch.dict(os.environ, {"SSL_CERT_FILE": self.ca}), self.client() as c:
            self.assertEqual(c.health()["status"], "ok")
            summary = c.observe([{"prompt_id": "tls-a", "step": 0, "rewards": [1, 0, 1, 0], "tokens": [300] * 4,
                                  "rollout_ids": ["tls-a-%d" % k for k in range(4)]}])
            self.assertEqual(summary["applied"], 4)
            plan = c.plan([{"id": "tls-a"}, {"id": "tls-b"}], budget_rollouts=16)
            self.assertEqual(sum(a["n"] for a in plan["allocations"]), 16)
            self.assertEqual(c.prompt("tls-a")["rollouts"], 4)
            self.assertRegex(c.metrics(), r"(?m)^rollout_budget_plans_total [1-9]")

    def test_an_ssl_context_names_the_ca(self):
        context = ssl.create_default_context(cafile=self.ca)
        with mock.patch.dict(os.environ, {"SSL_CERT_FILE": os.devnull}), self.client(ssl_context=context) as c:
            self.assertEqual(c.health()["status"], "ok")

    def test_an_observe_above_nginx_default_body_limit_passes(self):
        # 1.3 MB of JSON: nginx's default client_max_body_size (1 MB) would answer its own 413.
        results = [{"prompt_id": "big-%d" % i, "step": 1, "rewards": [1, 0] * 8, "tokens": [4096] * 16,
                    "rollout_ids": ["big-%d-rollout-%d" % (i, k) for k in range(16)]} for i in range(2500)]
        with mock.patch.dict(os.environ, {"SSL_CERT_FILE": self.ca}), self.client() as c:
            self.assertEqual(c.observe(results)["applied"], 40000)

    def test_a_body_over_the_limit_is_the_proxys_413_named(self):
        # 9 MB: over client_max_body_size 8m, which nginx checks before the service sees a byte.
        # Without rollout ids (with them the client sends the results in parts: below).
        results = [{"prompt_id": "huge-%d" % i, "step": 1, "rewards": [1, 0] * 16, "tokens": [4096] * 32}
                   for i in range(36000)]
        self.assertGreater(len(json.dumps({"results": results})), 9 * 10 ** 6)
        with mock.patch.dict(os.environ, {"SSL_CERT_FILE": self.ca}), self.client() as c:
            with self.assertRaises(rb.RolloutBudgetError) as caught:
                c.observe(results)
            self.assertEqual(c.prompt("huge-0")["rollouts"], 0)  # nothing applied
        self.assertEqual((caught.exception.status, caught.exception.code), (413, "UNEXPECTED_RESPONSE"))
        self.assertRegex(str(caught.exception), r"a proxy in front of the service refused the request's \d{7,8}-byte body: "
                                                r"raise its limit \(nginx: client_max_body_size\)")

    def test_a_body_over_the_proxys_limit_with_rollout_ids_is_sent_in_parts(self):
        results = [{"prompt_id": "parts-%d" % i, "step": 1, "reward": k % 2, "tokens": 4096, "rollout_id": "1/parts-%d#%d" % (i, k)}
                   for i in range(3000) for k in range(32)]
        self.assertGreater(len(json.dumps({"results": results})), 9 * 10 ** 6)
        with mock.patch.dict(os.environ, {"SSL_CERT_FILE": self.ca}), self.client() as c:
            self.assertEqual(c.observe(results)["applied"], 96000)
            self.assertEqual(c.prompt("parts-2999")["rollouts"], 32)
            self.assertEqual(c.observe(results)["duplicates"], 96000)

    def test_a_certificate_this_machine_does_not_trust_is_named(self):
        env = {k: v for k, v in os.environ.items() if k not in ("SSL_CERT_FILE", "SSL_CERT_DIR")}
        with mock.patch.dict(os.environ, env, clear=True), self.client() as c:
            with self.assertRaises(ssl.SSLCertVerificationError) as caught:
                c.health()
        message = str(caught.exception)
        self.assertIn("cannot reach the rollout-budget service at %s" % self.url, message)
        self.assertIn("SSL_CERT_FILE", message)
        self.assertIn("(unable to get local issuer certificate)", message)

    def test_https_to_the_service_itself_says_it_speaks_plain_http(self):
        with self.client("https://127.0.0.1:%d" % self.service_port) as c, self.assertRaises(ssl.SSLError) as caught:
            c.health()
        self.assertIn("`rollout-budget serve` itself speaks plain HTTP (http://)", str(caught.exception))
        self.assertIn("https://127.0.0.1:%d" % self.service_port, str(caught.exception))

    def test_http_to_the_proxy_and_a_wrong_path_are_answers_that_are_not_the_services(self):
        plain = "http://localhost:%d%s" % (self.proxy_port, PREFIX)
        with self.client(plain) as c, self.assertRaises(rb.RolloutBudgetError) as caught:
            c.plan([{"id": "x"}], budget_rollouts=8)
        self.assertEqual((caught.exception.status, caught.exception.code), (400, "UNEXPECTED_RESPONSE"))
        self.assertIn("POST %s/v1/plan answered 400" % plain, str(caught.exception))
        self.assertIn("plain HTTP request was sent to HTTPS port", str(caught.exception))
        elsewhere = "https://localhost:%d/elsewhere" % self.proxy_port
        with mock.patch.dict(os.environ, {"SSL_CERT_FILE": self.ca}), self.client(elsewhere) as c:
            with self.assertRaises(rb.RolloutBudgetError) as caught:
                c.health()
        self.assertEqual((caught.exception.status, caught.exception.code), (404, "UNEXPECTED_RESPONSE"))
        self.assertIn("GET %s/healthz answered 404" % elsewhere, str(caught.exception))

    def test_a_trainer_url_of_https_makes_an_http_client(self):
        settings = config.Settings(url=self.url + "/", token=TOKEN)
        with mock.patch.dict(os.environ, {"SSL_CERT_FILE": self.ca}):
            client = settings.client()
            try:
                self.assertIsInstance(client, rb.HttpClient)
                self.assertEqual(client.base_url, "https://localhost:%d%s" % (self.proxy_port, PREFIX))
                self.assertEqual(client.health()["status"], "ok")
            finally:
                client.close()


if __name__ == "__main__":
    unittest.main()


class RestartBehindProxyTest(_ProxyCase):
    def test_the_proxys_502_while_the_service_restarts_is_retried(self):
        support.stop(self.service)
        type(self).service = None
        port = self.service_port

        def start_late():
            time.sleep(1.2)
            type(self).service, _ = support.start_http(self.state, "--token", TOKEN, "--port", str(port))

        late = threading.Thread(target=start_late)
        late.start()
        try:
            with mock.patch.dict(os.environ, {"SSL_CERT_FILE": self.ca}), \
                    rb.HttpClient(self.url, token=TOKEN, timeout=30, connect_retries=4) as c, \
                    self.assertLogs("rollout_budget", level="WARNING") as logs:
                self.assertEqual(c.health()["status"], "ok")
        finally:
            late.join()
        self.assertIn("answered 502", logs.output[0])
        self.assertIn("a proxy answered for the service: is `rollout-budget serve` running behind it?", logs.output[0])

    def test_without_retries_the_502_is_raised(self):
        if self.service is not None:
            support.stop(self.service)
            type(self).service = None
        with mock.patch.dict(os.environ, {"SSL_CERT_FILE": self.ca}), \
                rb.HttpClient(self.url, token=TOKEN, connect_retries=0) as c, self.assertRaises(rb.RolloutBudgetError) as caught:
            c.health()
        self.assertEqual((caught.exception.status, caught.exception.code), (502, "UNEXPECTED_RESPONSE"))
        self.assertIn("GET %s/healthz answered 502" % self.url, str(caught.exception))
