"""The service client's url and who answers there: http or https with a reverse proxy's path (other
urls are errors naming them), and servers that are not the service (an HTML page, a redirect,
another server's JSON or 404), named in the error, never returned as the answer."""

import json
import os
import socket
import tempfile
import unittest

from . import support
from .stand_in_server import _Handler, _serving
import rollout_budget as rb
from rollout_budget import config


class UrlTest(unittest.TestCase):
    """The service url: http or https, with a reverse proxy's path; other urls are errors naming
    them, never a state path (before, connect() took https:// for a SQLite file's name)."""

    def test_https_and_a_path_are_the_services_address(self):
        for url, base in (("https://rb.example:8443/rollout-budget/", "https://rb.example:8443/rollout-budget"),
                          ("HTTPS://RB.example/rb", "https://rb.example:443/rb"),
                          ("http://[::1]:9000", "http://[::1]:9000")):
            with rb.HttpClient(url) as c:  # connects on the first request only
                self.assertEqual(c.base_url, base)
            with rb.connect(url) as c:
                self.assertIsInstance(c, rb.HttpClient)

    def test_other_urls_are_value_errors_naming_them(self):
        for url, says in (("ftp://rb.example/x", "expected http://host:port or https://host[:port][/path]"),
                          ("https://user:pw@rb.example/", "'https://***@rb.example/': a user name or password"),
                          ("http://rb.example/?token=1", "a query (?...) has no place in it"),
                          ("http://rb.example:99999", "the port is not a number from 0 to 65535"),
                          ("http:///v1", "expected http://host:port")):
            with self.assertRaises(ValueError) as caught:
                rb.HttpClient(url)
            self.assertIn(says, str(caught.exception))
            self.assertNotIn("pw", str(caught.exception))
        with tempfile.TemporaryDirectory() as folder:
            here = os.getcwd()
            os.chdir(folder)
            try:
                with self.assertRaises(ValueError) as caught:
                    rb.connect("127.0.0.1:18080")  # before: a new SQLite state file of that name
                self.assertIn("a host and port without a scheme: write http://127.0.0.1:18080", str(caught.exception))
                self.assertEqual(os.listdir(folder), [])
            finally:
                os.chdir(here)
        with self.assertRaises(ValueError) as caught:
            rb.connect("ftp://rb.example/state.db")
        self.assertIn("neither the service's url (http:// or https://) nor a state", str(caught.exception))
        with self.assertRaises(ValueError):
            config.Settings(url="s3://bucket/state.db").client()
        with self.assertRaises(ValueError) as caught:
            rb.HttpClient("http://127.0.0.1:8080", ssl_context=object())
        self.assertIn("ssl_context is for an https:// url", str(caught.exception))


class _Stranger(_Handler):
    """A server that is not the service: an HTML page with 200 for POST /v1/plan (a
    proxy's or a web UI's answer), and for the rest FastAPI's 404 ``{"detail": "Not Found"}``,
    what vLLM's OpenAI server (vllm/entrypoints/openai/api_server.py) answers a route it lacks."""

    def do_POST(self):
        if self.path == "/v1/plan":
            self.answer(200, b"<html>\n<body>Welcome</body></html>", "text/html")
        elif self.path == "/v1/observe":
            self.answer(200, b"")
        else:
            self.answer(404, {"detail": "Not Found"})

    do_GET = do_POST


class StrangerTest(unittest.TestCase):
    def test_an_answer_that_is_not_the_services_raises_naming_the_address(self):
        with _serving(_Stranger) as url, rb.HttpClient(url) as c:
            # A 200 with an HTML page is not a plan (it came back as {"error": ...} before).
            with self.assertRaises(rb.RolloutBudgetError) as ctx:
                c.plan([{"id": "a"}], budget_rollouts=8)
            self.assertEqual((ctx.exception.status, ctx.exception.code), (200, "UNEXPECTED_RESPONSE"))
            self.assertIn("POST %s/v1/plan answered 200 with '<html> <body>Welcome</body></html>'" % url, str(ctx.exception))
            self.assertIn("is `rollout-budget serve` the server at %s?" % url, str(ctx.exception))
            # An empty 200 is not a summary (it came back as {}).
            with self.assertRaises(rb.RolloutBudgetError) as ctx:
                c.observe([{"prompt_id": "a", "reward": 1}])
            self.assertIn("answered 200 with an empty body", str(ctx.exception))
            # vLLM's 404 has no {"error": ...}: the message says so, not "404 None: ...".
            with self.assertRaises(rb.RolloutBudgetError) as ctx:
                c.health()
            self.assertEqual((ctx.exception.status, ctx.exception.code), (404, "UNEXPECTED_RESPONSE"))
            self.assertIn("""GET %s/healthz answered 404 with '{"detail": "Not Found"}'""" % url, str(ctx.exception))


class _Redirector(_Handler):
    """A proxy in front of the service: 307 to https:// with a JSON body for POST /v1/plan, a
    gateway's own status page (200 JSON) for GET /healthz, and an OpenAI-compatible server's
    404 error (vLLM's port given by mistake) for GET /v1/prompts/<id>."""

    def do_POST(self):
        self.send_response(307)
        self.send_header("Location", "https://rb.example/v1/plan")
        body = json.dumps({"message": "use https"}).encode()
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/healthz":
            self.answer(200, {"service": "gateway", "up": True})
        else:
            self.answer(404, {"error": {"message": "Not Found", "type": "NotFoundError", "code": 404}})


class ForeignAnswerTest(unittest.TestCase):
    def test_redirects_other_servers_json_and_their_errors_are_named_not_returned(self):
        # Each was returned as the answer (a plan without allocations: verl's KeyError), or taken
        # for the service's error ("404 404: Not Found", no address).
        with _serving(_Redirector) as url, rb.HttpClient(url, connect_retries=0) as c:
            with self.assertRaises(rb.RolloutBudgetError) as ctx:
                c.plan([{"id": "a"}], budget_rollouts=8)
            self.assertEqual((ctx.exception.status, ctx.exception.code), (307, "UNEXPECTED_RESPONSE"))
            self.assertIn("POST %s/v1/plan answered 307" % url, str(ctx.exception))
            self.assertIn("the server redirects to 'https://rb.example/v1/plan', which is not followed", str(ctx.exception))
            with self.assertRaises(rb.RolloutBudgetError) as ctx:
                c.health()
            self.assertEqual((ctx.exception.status, ctx.exception.code), (200, "UNEXPECTED_RESPONSE"))
            self.assertIn("is `rollout-budget serve` the server at %s?" % url, str(ctx.exception))
            with self.assertRaises(rb.RolloutBudgetError) as ctx:
                c.prompt("a")
            self.assertEqual((ctx.exception.status, ctx.exception.code), (404, "UNEXPECTED_RESPONSE"))
            self.assertIn("GET %s/v1/prompts/a answered 404" % url, str(ctx.exception))

    def test_metrics_is_checked_as_every_request(self):
        # It returned the 401's JSON as the metrics text, and raised bare socket errors.
        proc, port = support.start_http(os.path.join(support.temp_folder(self, "rb-py-metrics-"), "s.db"), "--token", "right")
        try:
            with rb.HttpClient("http://127.0.0.1:%d" % port, token="right") as c:
                self.assertIn("rollout_budget_plans_total", c.metrics())
            with rb.HttpClient("http://127.0.0.1:%d" % port, token="wrong") as c, self.assertRaises(rb.RolloutBudgetError) as ctx:
                c.metrics()
            self.assertEqual((ctx.exception.status, ctx.exception.code), (401, "UNAUTHORIZED"))
        finally:
            support.stop(proc)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            free = s.getsockname()[1]
        with rb.HttpClient("http://127.0.0.1:%d" % free, connect_retries=0) as c, self.assertRaises(ConnectionRefusedError) as ctx:
            c.metrics()
        self.assertIn("cannot reach the rollout-budget service at http://127.0.0.1:%d" % free, str(ctx.exception))


if __name__ == "__main__":
    unittest.main()
