"""The service client against a real `rollout-budget serve` (HTTP and stdio)."""

import os
import re
import socket
import threading
import time
import unittest

from . import support
import rollout_budget as rb

RESULTS = [
    {"prompt_id": "easy", "step": 0, "rewards": [1, 1, 1, 1, 1, 1, 1, 0], "tokens": [200] * 8},
    {"prompt_id": "mid", "step": 0, "rewards": [1, 0, 1, 0, 1, 0, 1, 0], "tokens": [400] * 8},
    {"prompt_id": "hard", "step": 0, "rewards": [0, 0, 0, 0, 0, 0, 0, 1], "tokens": [900] * 8},
]
PROMPTS = [{"id": "easy"}, {"id": "mid"}, {"id": "hard"}, {"id": "fresh", "max_tokens": 1024}]


class ClientTest(support.ServiceCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.http = rb.HttpClient(cls.url)
        summary = cls.http.observe(RESULTS)
        assert summary["applied"] == 24, summary

    @classmethod
    def tearDownClass(cls):
        cls.http.close()
        super().tearDownClass()

    def test_http_plan_spends_the_budget_and_favours_uncertain_prompts(self):
        plan = self.http.plan(PROMPTS, budget_rollouts=32, min_n=2, max_n=16)
        self.assertEqual(plan["version"], 1)
        self.assertEqual(plan["step"], 1)
        n = {a["prompt_id"]: a["n"] for a in plan["allocations"]}
        self.assertEqual(sum(n.values()), 32)
        self.assertEqual(set(n), {"easy", "mid", "hard", "fresh"})
        self.assertTrue(all(2 <= v <= 16 for v in n.values()), n)
        # p̂ ≈ 0.5 gives informative groups with few rollouts; 1/8 needs more to see a success
        self.assertGreater(n["hard"], n["mid"])

    def test_http_plan_with_multiple_of(self):
        plan = self.http.plan(PROMPTS, budget_rollouts=30, multiple_of=8)
        total = sum(a["n"] for a in plan["allocations"])
        self.assertEqual(total, 24)
        self.assertIn("budget_rollouts 30 is not a multiple of multiple_of 8: at most 24 are planned", plan["warnings"])
        with self.assertRaises(rb.RolloutBudgetError) as ctx:
            self.http.plan(PROMPTS, budget_rollouts=30, multiple_of=0)
        self.assertEqual((ctx.exception.status, ctx.exception.field), (400, "body.options.multiple_of"))

    def test_http_prompt_view_counts_what_was_observed(self):
        view = self.http.prompt("mid", max_tokens=2000)
        self.assertEqual(view["rollouts"], 8)
        self.assertEqual(view["reward_sum"], 4)
        self.assertAlmostEqual(view["p_mean"], 0.5, delta=0.05)
        # length model: each class mean shrunk toward the pooled class mean with 4 pseudo-rollouts
        correct = [t for r in RESULTS for w, t in zip(r["rewards"], r["tokens"]) if w >= 0.5]
        wrong = [t for r in RESULTS for w, t in zip(r["rewards"], r["tokens"]) if w < 0.5]
        lc = (4 * 400 + 4 * sum(correct) / len(correct)) / 8
        lw = (4 * 400 + 4 * sum(wrong) / len(wrong)) / 8
        p = view["p_mean"]
        self.assertAlmostEqual(view["expected_tokens"], p * lc + (1 - p) * lw, delta=1e-6)
        self.assertFalse(self.http.prompt("never seen")["seen"])

    def test_prompt_with_an_id_that_is_not_a_string_or_not_utf8_is_an_error_naming_it(self):
        # prompt(None) returned the prior of a prompt named "None" (seen False, as for an unseen
        # prompt); a lone surrogate was a bare UnicodeEncodeError. plan and observe refuse both.
        with rb.StdioClient(self.state, command=support.COMMAND) as stdio:
            for client in (self.http, stdio, rb.Cli(state=self.state, command=support.COMMAND)):
                for bad, kind, said in ((None, TypeError, "got None (builtins.NoneType)"), (5, TypeError, "got 5 (builtins.int)"),
                                        (["mid"], TypeError, "got ['mid'] (builtins.list)"),
                                        ("a\ud800", ValueError, "prompt id 'a\\ud800' must be well-formed Unicode")):
                    with self.subTest(client=type(client).__name__, id=bad):
                        with self.assertRaises(kind) as caught:
                            client.prompt(bad)
                        self.assertIn(said, str(caught.exception))
            self.assertEqual(stdio.prompt("mid")["rollouts"], 8)

    def test_http_observe_is_idempotent(self):
        batch = [{"prompt_id": "idem", "step": 0, "reward": 1, "rollout_id": "idem-1"}]
        self.assertEqual(self.http.observe(batch)["applied"], 1)
        again = self.http.observe(batch)
        self.assertEqual((again["applied"], again["duplicates"]), (0, 1))
        self.assertEqual(self.http.prompt("idem")["rollouts"], 1)

    def test_observe_options_given_as_none_are_left_out_as_plan_does_on_every_client(self):
        # plan(decay=None) left the option out, observe(decay=None) sent null (HTTP, stdio: 400
        # "must be a finite number, got null") or `--decay None` (Cli): code passing
        # settings.options.get("decay") to both planned, then failed at observe.
        with rb.StdioClient(state=self.state, command=support.COMMAND) as stdio:
            clients = (("http", self.http), ("stdio", stdio), ("cli", rb.Cli(state=self.state, command=support.COMMAND)))
            for name, client in clients:
                client.plan([{"id": "none-%s" % name}], budget_rollouts=4, decay=None)
                rows = [{"prompt_id": "none-%s" % name, "step": 0, "reward": 1, "rollout_id": "none-%s#0" % name}]
                self.assertEqual(client.observe(rows, decay=None, reobserve_discount=None)["applied"], 1, name)
                self.assertEqual(self.http.prompt("none-%s" % name)["rollouts"], 1, name)
                with self.assertRaises(rb.RolloutBudgetError, msg=name) as caught:  # a value is still sent, and checked
                    client.observe(rows, decay=2)
                self.assertIn("decay", str(caught.exception), name)

    def test_http_errors_name_field_and_value(self):
        with self.assertRaises(rb.RolloutBudgetError) as ctx:
            self.http.plan(PROMPTS, budget_rollouts=-1)
        self.assertEqual(ctx.exception.status, 400)
        self.assertEqual(ctx.exception.field, "body.budget.rollouts")
        self.assertEqual(ctx.exception.value, "-1")
        with self.assertRaises(rb.RolloutBudgetError) as ctx:
            self.http.observe([{"prompt_id": "x", "reward": 7}])
        self.assertEqual(ctx.exception.field, "body.results[0].reward")
        self.assertFalse(self.http.prompt("x")["seen"])
        with self.assertRaises(TypeError):
            self.http.plan(PROMPTS, budget_rollouts=8, min_rollouts=2)

    def test_nan_and_infinity_are_named_before_anything_is_sent(self):
        """json.dumps wrote NaN, which is not JSON: the service answered "malformed JSON", and a
        stdio client took its reply (id null) for one out of order. A hint missing in a DataFrame
        is a NaN."""
        stdio = rb.StdioClient(state=self.state, command=support.COMMAND)
        self.addCleanup(stdio.close)
        before = self.http.prompt("nan-hint")
        for client, field in ((self.http, "body.candidates[1].prior_pass_rate"), (stdio, "body.candidates[1].prior_pass_rate")):
            with self.assertRaises(ValueError) as caught:
                client.plan([{"id": "ok"}, {"id": "nan-hint", "prior_pass_rate": float("nan")}], budget_rollouts=8)
            self.assertIn(field + " is nan, not a number JSON can carry", str(caught.exception))
        with self.assertRaises(ValueError) as caught:
            self.http.observe([{"prompt_id": "x", "reward": 1, "tokens": float("inf")}])
        self.assertIn("body.results[0].tokens is inf", str(caught.exception))
        self.assertEqual(self.http.prompt("nan-hint"), before)
        self.assertEqual(stdio.health()["status"], "ok")  # the stdio client is still in step with its process

    def test_http_names_a_service_it_cannot_reach(self):
        with socket.socket() as probe:  # a port where nothing listens: taken, then given back
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        client = rb.HttpClient("http://127.0.0.1:%d" % port, timeout=5, connect_retries=0)
        # Still the exception class a caller may catch (ConnectionRefusedError), now naming the address.
        with self.assertRaises(ConnectionRefusedError) as ctx:
            client.health()
        self.assertIn("cannot reach the rollout-budget service at http://127.0.0.1:%d" % port, str(ctx.exception))
        self.assertIn("rollout-budget serve", str(ctx.exception))
        self.assertIsInstance(ctx.exception.__cause__, ConnectionRefusedError)
        client.close()

    def test_stdio_sees_the_same_state_and_plans_the_same(self):
        http_plan = self.http.plan(PROMPTS, budget_rollouts=24, seed=7)
        with rb.StdioClient(state=self.state, command=support.COMMAND) as cli:
            self.assertEqual(cli.plan(PROMPTS, budget_rollouts=24, seed=7), http_plan)
            self.assertEqual(cli.health()["store"], "sqlite")
            summary = cli.observe([{"prompt_id": "via-stdio", "step": 0, "rewards": [1, 0]}])
            self.assertEqual(summary["applied"], 2)
            with self.assertRaises(rb.RolloutBudgetError) as ctx:
                cli.plan(PROMPTS, budget_tokens=100, policy="nope")
            self.assertEqual(ctx.exception.field, "body.options.policy")
        self.assertEqual(cli.close(), 0)
        self.assertEqual(self.http.prompt("via-stdio")["rollouts"], 2)

    def test_stdio_starts_its_process_again_when_it_was_killed_between_two_requests(self):
        import signal
        with rb.StdioClient(state=self.state, command=support.COMMAND) as cli:
            cli.observe([{"prompt_id": "before-the-kill", "step": 0, "rewards": [1, 0, 0]}])
            first = cli._proc
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=30)
            with self.assertLogs("rollout_budget", level="WARNING") as logs:
                self.assertEqual(cli.prompt("before-the-kill")["rollouts"], 3)  # what it had applied is kept
            self.assertIsNot(cli._proc, first)
            self.assertIn("`serve --stdio` exited (killed by signal 9)", logs.output[0])
            self.assertTrue(logs.output[0].endswith("; starting it again on the same state"), logs.output[0])
            cli.observe([{"prompt_id": "before-the-kill", "step": 1, "rewards": [1]}])
        self.assertEqual(self.http.prompt("before-the-kill")["rollouts"], 4)

    def test_stdio_killed_during_a_request_is_started_again_and_the_request_sent_again(self):
        import signal
        rows = [{"prompt_id": "killed-%d" % (i % 300), "step": 0, "reward": 1, "rollout_id": "killed#%d" % i} for i in range(60000)]
        with rb.StdioClient(state=self.state, command=support.COMMAND) as cli:
            cli.health()
            pid = cli._proc.pid
            # The OOM killer, mid-observe: stopped first, so the request is surely in flight when it dies.
            os.kill(pid, signal.SIGSTOP)
            threading.Timer(0.5, lambda: os.kill(pid, signal.SIGKILL)).start()
            with self.assertLogs("rollout_budget", level="WARNING") as logs:
                summary = cli.observe(rows)
            self.assertEqual(summary["applied"] + summary["duplicates"], 60000)
            self.assertEqual(len(logs.output), 1, logs.output)
            self.assertIn("`serve --stdio` was killed by signal 9 during POST /v1/observe; starting it again and sending the request again", logs.output[0])
        self.assertEqual(sum(self.http.prompt("killed-%d" % k)["rollouts"] for k in range(300)), 60000)  # each rollout once

    def test_stdio_with_a_timeout_stops_a_process_that_gives_no_answer(self):
        import signal
        with rb.StdioClient(state=self.state, command=support.COMMAND, timeout=2) as cli:
            cli.health()
            os.kill(cli._proc.pid, signal.SIGSTOP)  # stalled: a hung file system, a debugger
            started = time.monotonic()
            with self.assertRaisesRegex(TimeoutError, r"serve --stdio gave no answer to GET /healthz within 2 s \(timeout\): stopped it"):
                cli.health()
            self.assertLess(time.monotonic() - started, 15)
            with self.assertLogs("rollout_budget", level="WARNING"):
                self.assertEqual(cli.health()["status"], "ok")  # the next request starts it again

    def test_stdio_after_a_request_interrupted_while_it_waited_answers_each_request_with_its_own_reply(self):
        # Jupyter's interrupt: SIGINT to this process only, the child goes on and answers the
        # abandoned plan later. Before, every later call raised "reply out of order" for good.
        import signal
        with rb.StdioClient(state=self.state, command=support.COMMAND) as cli:
            cli.health()
            pid = cli._proc.pid
            os.kill(pid, signal.SIGSTOP)  # the plan surely waits when the interrupt comes
            threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
            with self.assertRaises(KeyboardInterrupt):
                cli.plan(PROMPTS, budget_rollouts=24, seed=7)
            os.kill(pid, signal.SIGCONT)
            self.assertEqual(cli.prompt("mid")["rollouts"], 8)  # the prompt's view, not the abandoned plan
            self.assertEqual(cli.health()["status"], "ok")
            self.assertIs(cli._proc.pid, pid)  # the same process: nothing restarted
            self.assertEqual(cli.plan(PROMPTS, budget_rollouts=24, seed=7), self.http.plan(PROMPTS, budget_rollouts=24, seed=7))

    def test_stdio_line_over_the_limit_is_a_413_not_a_reply_out_of_order(self):
        # Without rollout ids (with them, the client sends the results in parts: PartsTest).
        rows = [{"prompt_id": "p", "step": 0, "reward": 1, "tokens": i} for i in range(500)]
        with rb.StdioClient(state=self.state, command=support.COMMAND, args=["--body-limit", "4096"]) as cli:
            with self.assertRaises(rb.RolloutBudgetError) as caught:
                cli.observe(rows)
            self.assertEqual(caught.exception.status, 413)
            self.assertEqual(cli.health()["status"], "ok")

    def test_stdio_that_cannot_start_says_why_once(self):
        with rb.StdioClient(state=self.state, command=support.COMMAND, args=["--port-file", "x"]) as cli:
            with self.assertRaisesRegex(RuntimeError, "serve --stdio stopped: .*port-file"):
                cli.health()
            # The next request starts it again, once, and fails the same way: no loop of restarts.
            with self.assertLogs("rollout_budget", level="WARNING"), self.assertRaisesRegex(RuntimeError, "serve --stdio stopped"):
                cli.health()

    def test_stdio_takes_the_cli_path_from_the_environment(self):
        old = os.environ.get("ROLLOUT_BUDGET_CLI")
        os.environ["ROLLOUT_BUDGET_CLI"] = support.CLI
        try:
            with rb.StdioClient(state=self.state) as cli:
                self.assertEqual(cli.health()["status"], "ok")
        finally:
            if old is None:
                del os.environ["ROLLOUT_BUDGET_CLI"]
            else:
                os.environ["ROLLOUT_BUDGET_CLI"] = old

    def test_metrics_count_plans(self):
        self.http.plan(PROMPTS, budget_rollouts=16)
        text = self.http.metrics()
        plans = int(re.search(r"^rollout_budget_plans_total (\d+)$", text, re.M).group(1))
        self.assertGreaterEqual(plans, 1)
        self.assertIn("# TYPE rollout_budget_plan_seconds histogram", text)


if __name__ == "__main__":
    unittest.main()
