"""rollout_budget.metrics: a step's figures from hand-made plans and results (every expected
number counted here by hand), and TimedClient against a real `rollout-budget serve`."""

import time
import unittest

from . import support
from rollout_budget import HttpClient, run_rounds, step_metrics
from rollout_budget.metrics import TimedClient


def plan(*ns):
    return {"allocations": [{"prompt_id": "p%d" % i, "n": n} for i, n in enumerate(ns)], "totals": {"rollouts": sum(ns)}}


def result(pid, reward, finish=None):
    row = {"prompt_id": pid, "reward": reward, "step": 1}
    if finish is not None:
        row["finish_reason"] = finish
    return row


class StepMetricsTest(unittest.TestCase):
    def test_groups_aborted_rollouts_and_rounds_counted_by_hand(self):
        results = [
            result("a", 1.0), result("a", 0.0), result("a", 1.0),  # informative, 3 rollouts
            result("b", 1.0), result("b", 1.0),                    # all correct
            result("c", 0.0), result("c", 0.0), result("c", 0.0), result("c", 0.0, "abort"),  # all wrong, one aborted
            result("d", 0.25), result("d", 0.75),                  # fractional rewards that differ: informative
            result("e", 0.5), result("e", 0.5),                    # equal at 0.5: all correct (mean ≥ 0.5)
            result("f", 0.0, "abort"),                              # only aborted: no group
        ]
        m = step_metrics([plan(3, 2, 3, 2, 2, 1, 0), plan(0, 0, 1, 0, 0, 0, 0), plan(0, 0, 0, 0, 0, 0, 0)], results,
                         {"applied": 12, "duplicates": 1, "warnings": []}, {"plan": 0.5, "observe": 0.25}, candidates=7)
        self.assertEqual(m, {
            "rollout_budget/candidates": 7, "rollout_budget/prompts": 5, "rollout_budget/rollouts": 12,
            "rollout_budget/aborted": 2, "rollout_budget/rounds": 2,
            "rollout_budget/n_min": 2, "rollout_budget/n_mean": 12 / 5, "rollout_budget/n_max": 3,
            "rollout_budget/informative_groups": 2, "rollout_budget/informative_group_ratio": 2 / 5,
            "rollout_budget/effective_ratio": 5 / 12, "rollout_budget/all_correct_ratio": 2 / 5,
            "rollout_budget/all_wrong_ratio": 1 / 5, "rollout_budget/applied": 12, "rollout_budget/duplicates": 1,
            "rollout_budget/plan_s": 0.5, "rollout_budget/observe_s": 0.25,
        })

    def test_a_step_without_results_has_no_ratios_and_no_observe_figures(self):
        m = step_metrics([plan(0, 0)], [result("a", 0.0, "abort")], None, None, candidates=2)
        self.assertEqual(m, {"rollout_budget/candidates": 2, "rollout_budget/prompts": 0, "rollout_budget/rollouts": 0,
                             "rollout_budget/aborted": 1, "rollout_budget/rounds": 0, "rollout_budget/informative_groups": 0})
        # Not given: left out (a plan's allocations list only the prompts it gives rollouts).
        self.assertNotIn("rollout_budget/candidates", step_metrics([plan(2)], [], None, None))


class TimedClientTest(support.ServiceCase):
    def test_plan_and_observe_are_timed_and_every_other_call_reaches_the_client(self):
        with HttpClient(self.url) as inner:
            timed = TimedClient(inner)
            prompts = [{"id": "t%d" % i} for i in range(6)]
            start = time.perf_counter()
            done = run_rounds(timed, prompts, lambda rows: [float(r["rollout_index"] % 2) for r in rows], budget_rollouts=24, rounds=2)
            wall = time.perf_counter() - start
            self.assertEqual(len(done.plans), 2)
            self.assertGreater(timed.seconds["plan"], 0)
            self.assertGreater(timed.seconds["observe"], 0)
            self.assertLessEqual(timed.seconds["plan"] + timed.seconds["observe"], wall)
            given = sum(a["n"] for p in done.plans for a in p["allocations"] if a["prompt_id"] == "t0")
            self.assertEqual(timed.prompt("t0")["rollouts"], given)
            m = step_metrics(done.plans, done.results, done.summary, timed.seconds)
            # Rewards alternate 0, 1 by rollout index: every group with 2 or more rollouts varies.
            self.assertEqual(m["rollout_budget/effective_ratio"], 1.0)
            self.assertEqual(m["rollout_budget/rollouts"], 24)
            self.assertEqual(m["rollout_budget/applied"], 24)
            timed.reset()
            self.assertEqual(timed.seconds, {"plan": 0.0, "observe": 0.0})


if __name__ == "__main__":
    unittest.main()
