"""The service client against a real `rollout-budget serve` at its limits: a body the service
refuses from its headers is its answer at once, a prompt id at the id limit plans and observes,
and results over the body limit are sent in parts."""

import json
import os
import tempfile
import time
import unittest

from . import support
import rollout_budget as rb


class RefusedBodyTest(support.ServiceCase):
    """http.client sends a whole body before it reads the answer: a body the service refused
    from its headers (over --body-limit, a wrong token) ended in a connection reset, which the
    client took for a service it could not reach, retried for 25 s, then raised."""

    serve_args = ("--body-limit", "65536", "--token", "right")

    def test_a_body_over_the_limit_or_with_a_wrong_token_is_the_services_answer_at_once(self):
        # About 16 MB: more than the kernel buffers on the way (a small body fitted in them, and
        # the reset never showed on loopback).
        # Without rollout ids: the client cannot send them in parts (PartsTest), so the 413 is raised.
        rows = [{"prompt_id": "p%d" % (i % 50), "step": 1, "reward": 1, "tokens": i} for i in range(250000)]
        for token, status in (("right", 413), ("wrong", 401)):
            with self.subTest(token=token), rb.HttpClient(self.url, token=token) as client:
                started = time.monotonic()
                with self.assertRaises(rb.RolloutBudgetError) as caught:
                    client.observe(rows)
                self.assertEqual(caught.exception.status, status)
                self.assertLess(time.monotonic() - started, 5)


def _rows(n, prompts, ids=True):
    """n results over `prompts` prompts, interleaved (prompt i % prompts), with rollout ids or without."""
    rows = []
    for i in range(n):
        row = {"prompt_id": "prompt-%04d" % (i % prompts), "step": 3, "reward": (i * 7 % 5) / 4, "tokens": 100 + i % 50,
               "group": "g%d" % (i % 3)}
        if ids:
            row["rollout_id"] = "3/prompt-%04d#%d" % (i % prompts, i // prompts)
        rows.append(row)
    return rows


class LongestIdTest(support.ServiceCase):
    def test_a_prompt_id_at_the_limit_plans_and_its_rollouts_observe(self):
        # The rollout ids "<step>/<id>#<j>" of a 65,536-character id were 65,543 long, over the
        # id limit: observe refused the step's results after they were generated.
        long_id = "x" * 65536
        with rb.HttpClient(self.url) as client:
            plan = client.plan([{"id": long_id}, {"id": "short"}], budget_rollouts=8, step=1234567890)
            rows = rb.expand_plan(plan)
            self.assertGreater(max(len(r["rollout_id"]) for r in rows), 65536)
            summary = client.observe(rb.results_rows(rows, [1, 0] * 4))
            self.assertEqual((summary["applied"], summary["duplicates"]), (8, 0))
            again = client.observe(rb.results_rows(rows, [1, 0] * 4))
            self.assertEqual(again["duplicates"], 8)


class PartsTest(unittest.TestCase):
    """A step's results over the service's --body-limit (64 kB here; 8 MiB by default, some 47,000
    rollouts) were a 413 after the step was generated: with rollout ids they are sent in parts."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="rb-py-parts-")
        self.addCleanup(lambda: __import__("shutil").rmtree(self.dir, ignore_errors=True))

    def check_parts(self, client):
        rows = _rows(3000, 300)  # about 350 kB in one body: 6 or more parts
        self.assertGreater(len(json.dumps({"results": rows})), 5 * 65536)
        with self.assertLogs("rollout_budget", level="INFO") as logs:
            summary = client.observe(rows)
        self.assertTrue(any("3000 results are over the service's body limit: sending them in parts" in line for line in logs.output),
                        logs.output)
        # Counted from the rows, not from the service: 3,000 applied over 300 prompts, each once.
        self.assertEqual({k: summary[k] for k in ("applied", "duplicates", "aborted", "prompts", "last_step")},
                         {"applied": 3000, "duplicates": 0, "aborted": 0, "prompts": 300, "last_step": 3})
        for pid in ("prompt-0000", "prompt-0123", "prompt-0299"):
            mine = [r for r in rows if r["prompt_id"] == pid]
            view = client.prompt(pid)
            self.assertEqual(view["rollouts"], len(mine), pid)
            self.assertAlmostEqual(view["reward_sum"], sum(r["reward"] for r in mine), places=9)
        # The whole sent again (after a failed part, a retry): each rollout once.
        again = client.observe(rows)
        self.assertEqual((again["applied"], again["duplicates"]), (0, 3000))
        # Without ids a part would be keyed apart from the whole: the 413, saying what to do; nothing applied.
        with self.assertRaises(rb.RolloutBudgetError) as caught:
            client.observe(_rows(3000, 300, ids=False))
        self.assertEqual(caught.exception.status, 413)
        self.assertIn("(3000 results in one request: with a rollout_id and a step on each, the client sends them in parts; "
                      "or raise the limit)", str(caught.exception))
        # Without steps each part would take the state's last step + 1 after the part before: the 413 too.
        stepless = [{k: v for k, v in r.items() if k != "step"} for r in _rows(3000, 300)]
        with self.assertRaises(rb.RolloutBudgetError) as caught:
            client.observe(stepless)
        self.assertEqual(caught.exception.status, 413)
        self.assertEqual(client.prompt("prompt-0000")["rollouts"], 10)
        # A result alone over the limit, sent after other parts were applied: the error says how many were.
        huge = _rows(400, 40)
        huge.append({"prompt_id": "y" * 40000, "step": 3, "reward": 1, "rollout_id": "3/" + "y" * 40000 + "#0"})
        with self.assertRaises(rb.RolloutBudgetError) as caught:
            client.observe(huge)
        self.assertEqual(caught.exception.status, 413)
        self.assertRegex(str(caught.exception), r"\(sending 401 results in parts: 400 of them were observed in parts before this one; "
                                                r"send the whole again once the cause is fixed: those count as duplicates\)")

    def test_http_results_over_the_body_limit_with_ids_are_sent_in_parts_and_apply_once(self):
        proc, port = support.start_http(os.path.join(self.dir, "http.db"), "--body-limit", "65536")
        self.addCleanup(support.stop, proc)
        with rb.HttpClient("http://127.0.0.1:%d" % port) as client:
            self.check_parts(client)

    def test_stdio_results_over_the_line_limit_with_ids_are_sent_in_parts_and_apply_once(self):
        with rb.StdioClient(os.path.join(self.dir, "stdio.db"), command=support.COMMAND, args=("--body-limit", "65536")) as client:
            self.check_parts(client)

    def test_one_prompt_over_the_limit_is_split_within_it(self):
        proc, port = support.start_http(os.path.join(self.dir, "one.db"), "--body-limit", "65536")
        self.addCleanup(support.stop, proc)
        rows = _rows(1500, 1)
        with rb.HttpClient("http://127.0.0.1:%d" % port) as client:
            summary = client.observe(rows)
            self.assertEqual(summary["applied"], 1500)
            self.assertEqual(client.prompt("prompt-0000")["rollouts"], 1500)


if __name__ == "__main__":
    unittest.main()
