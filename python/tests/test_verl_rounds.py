"""verl with rollout_budget.rounds: a step planned and generated in rounds through the patched step
(tests/verl_trainer.py: verl's own DataProto and fit's reward extraction; the model and reward are
simulated) against a real `rollout-budget serve`. Groups span rounds, each rollout is rewarded and
observed once, rounds whose outputs differ are joined, a last round is cut to the multiple, what
rounds cannot run with is refused, and one round is one plan a step as before."""

import unittest

from . import support, verl_trainer, verl_upstream
from .verl_steps import PASS, PROMPTS, check_metrics, recorded, rows_of
from rollout_budget import HttpClient, group_advantages


class VerlRoundsTest(support.ServiceCase):
    def test_three_steps_in_two_rounds_groups_span_rounds_and_each_rollout_is_rewarded_and_observed_once(self):
        # Two agent-loop workers (each round's generation is chunked over them) and dp 5: every
        # round a multiple of 2, the step a multiple of 10 (of the budget 12 × 4 = 48, at most 40).
        ns = verl_upstream.load()
        trainer = verl_trainer.TrainerStandIn(rollout_n=4, workers=2, dp_size=5, budget_settings={
            "url": self.url, "rounds": 2, "options": {"min_n": 2, "max_n": 12, "seed": 1},
        })
        adapter = recorded(trainer)
        self.assertEqual((adapter.multiple_of, adapter.each), (10, 2))
        observed, spanning, cut, sizes_by_step = {}, 0, 0, []
        for _ in range(3):
            asked = len(adapter.client.requests)
            scored = trainer.reward_fn.rows if trainer.reward_fn else 0
            out = verl_trainer.patched_step(trainer, verl_trainer.dataset_batch(PROMPTS), PASS, ns.AdvantageEstimator.GRPO)
            step = trainer.global_steps
            plans, requests = adapter.last_rounds.plans, adapter.client.requests[asked:]
            self.assertEqual(len(plans), 2)
            self.assertEqual([r.get("rounds_left") for r in requests[:1]], [2])
            sizes = [p["totals"]["rollouts"] for p in plans]
            self.assertTrue(all(n % 2 == 0 for n in sizes), sizes)
            # Step 1: every prompt new, round 1 takes the larger share (the planner's fresh_share).
            self.assertTrue(all(n > 0 for n in sizes) or step == 1, sizes)
            self.assertEqual(len(out), sum(sizes))
            self.assertEqual(len(out) % 10, 0, "Σ n of the step a multiple of lcm(2 workers, dp 5)")
            sizes_by_step.append(sizes)
            self.assertLessEqual(len(out), 48)
            cut += any("planned again" in w for w in plans[-1].get("warnings", []))
            rows = rows_of(out)
            # Round 2's plan saw round 1's rewards, in rollout order, as partial_rewards.
            first = {}
            for row in rows[: sizes[0]]:
                first.setdefault(row["prompt_id"], []).append(row["reward"])
            partial = {c["id"]: c.get("partial_rewards") for c in requests[-1]["candidates"]}
            self.assertTrue(all(partial[pid] == rewards for pid, rewards in first.items()), (partial, first))
            self.assertTrue(all(c.get("partial_rewards") is None for c in requests[0]["candidates"]))
            # One uid a prompt, the plan's group id, its rollouts of both rounds numbered 0.. without a repeat.
            by_uid = {}
            for row in rows:
                self.assertEqual(row["uid"], "%d/%s" % (step, row["prompt_id"]))
                by_uid.setdefault(row["uid"], []).append(row["rollout_index"])
            for uid, indices in by_uid.items():
                self.assertEqual(sorted(indices), list(range(len(indices))), uid)
            self.assertEqual(len({r["rollout_id"] for r in rows}), len(rows))
            second = {r["uid"] for r in rows[sizes[0]:]}
            spanning += len(second & {r["uid"] for r in rows[: sizes[0]]})
            # verl's compute_advantage over the joined batch equals group_advantages by the plan's groups.
            ours = group_advantages([r["reward"] for r in rows], [r["uid"] for r in rows], kind="grpo")
            theirs = out.batch["advantages"][:, 0].tolist()
            for k, (a, b) in enumerate(zip(ours, theirs)):
                self.assertLessEqual(abs(a - b), 2e-6 + 2e-6 * abs(b), "step %d row %d" % (step, k))
            # Each rollout's reward computed once, in its round: fit's reward step extracted it.
            self.assertEqual(trainer.reward_fn.rows - scored, len(out))
            self.assertEqual(out.non_tensor_batch["acc"].tolist(), [r["reward"] for r in rows])
            timing = trainer.timing_raw
            self.assertLessEqual(timing["agent_loop/generate_sequences/min"], timing["agent_loop/generate_sequences/mean"])
            self.assertLessEqual(timing["agent_loop/generate_sequences/mean"], timing["agent_loop/generate_sequences/max"])
            self.assertEqual(adapter.last_rounds.summary["applied"], len(out))
            # A round that planned nothing (step 1 may give round 1 the whole step) is not counted.
            check_metrics(self, trainer.metrics, out, candidates=len(PROMPTS), rounds=sum(1 for n in sizes if n > 0))
            for row in rows:
                count, total = observed.get(row["prompt_id"], (0, 0.0))
                observed[row["prompt_id"]] = (count + 1, total + row["reward"])
        self.assertGreater(spanning, 0, "some groups have rollouts of both rounds")
        self.assertGreater(cut, 0, "a last round planned again to bring the step to a multiple of 10")
        with HttpClient(self.url) as c:
            for pid in PASS:
                view = c.prompt(pid)
                count, total = observed.get(pid, (0, 0.0))
                self.assertEqual(view["rollouts"], count, pid)
                self.assertAlmostEqual(view["reward_sum"], total, places=9)
        adapter.client.close()
        print("\nverl rounds: rounds' rollouts per step %s, last rounds cut to a multiple in %d of 3 steps" % (sizes_by_step, cut))


class VerlRoundsRewardLoopTest(support.ServiceCase):
    def test_with_the_reward_loop_generation_gives_the_reward_and_nothing_computes_it_again(self):
        # verl's default (reward_model.use_reward_loop): the agent loop scores each rollout and
        # returns rm_scores; the rounds read them through fit's own _compute_or_extract_reward.
        ns = verl_upstream.load()
        trainer = verl_trainer.TrainerStandIn(rollout_n=4, workers=4, dp_size=2, reward_loop=True, budget_settings={
            "url": self.url, "rounds": 2, "options": {"min_n": 2, "max_n": 12, "seed": 2},
        })
        out = verl_trainer.patched_step(trainer, verl_trainer.dataset_batch(PROMPTS), PASS, ns.AdvantageEstimator.GRPO)
        self.assertEqual(trainer.reward_fn.rows, 0)
        rows = rows_of(out)
        self.assertEqual([r["reward"] for r in rows], [verl_trainer.pass_of(r, PASS) for r in rows])
        self.assertEqual(len(out) % 4, 0)
        self.assertEqual(len(trainer._rollout_budget.last_rounds.plans), 2)
        trainer._rollout_budget.client.close()


class AlignedTest(unittest.TestCase):
    def test_a_column_one_round_lacks_takes_the_others_shape(self):
        # numpy makes a column of equal-length lists 2-D: a 1-D fill broke np.concatenate.
        support.require_torch()
        import numpy as np
        import torch

        from rollout_budget.verl_rounds import _aligned

        ns = verl_upstream.load()
        with_it = ns.DataProto.from_dict(tensors={"x": torch.zeros(3, 2)}, non_tensors={"turn_scores": np.array([[0.5, 1.0]] * 3)},
                                         meta_info={"reward_extra_keys": ["acc"]})
        without = ns.DataProto.from_dict(tensors={"x": torch.ones(2, 2)}, non_tensors={"acc": np.array([1.0, 0.0])},
                                         meta_info={"reward_extra_keys": ["acc", "format"]})
        joined = ns.DataProto.concat(_aligned([without, with_it]))
        self.assertEqual(joined.non_tensor_batch["turn_scores"].shape, (5, 2))
        self.assertEqual(joined.non_tensor_batch["turn_scores"].tolist(), [[None, None]] * 2 + [[0.5, 1.0]] * 3)
        self.assertEqual(joined.non_tensor_batch["acc"].tolist(), [1.0, 0.0, None, None, None])
        self.assertEqual(joined.meta_info["reward_extra_keys"], ["acc", "format"])


class RowsKeptTest(unittest.TestCase):
    def test_the_cut_leaves_no_group_with_one_where_it_can(self):
        support.require_torch()  # numpy
        from rollout_budget.verl_rounds import _rows_kept

        # a: 3 rows, b: 2, c: 2 (c last). One row out: a's third, not c's last (c left with one, as before).
        uids = ["a", "a", "b", "b", "a", "c", "c"]
        self.assertEqual(_rows_kept(uids, 1).tolist(), [0, 1, 2, 3, 5, 6])
        # Two: a's third, then no row leaves its group two or more: the last row.
        self.assertEqual(_rows_kept(uids, 2).tolist(), [0, 1, 2, 3, 5])
        self.assertEqual(_rows_kept(["a"] * 5 + ["b", "b", "b"], 2).tolist(), [0, 1, 2, 3, 5, 6])  # b's third, a's fifth


class VerlRoundsMixedAgentsTest(support.ServiceCase):
    def test_rounds_whose_outputs_hold_different_columns_are_joined(self):
        # A dataset mixing agent loops: a tool agent's rows carry "turn_scores"
        # (tool_agent_loop.py:208), and a generation call has that column only when one of its
        # rows does (agent_loop.py:786–791). Round 1 without such rows, round 2 with them:
        # DataProto.concat asserted ("key in output") on the rounds' outputs.
        support.require_torch()
        from unittest import mock

        import numpy as np

        ns = verl_upstream.load()
        real = verl_trainer.generate_sequences
        calls = []

        def generate(trainer, prompts, pass_rates):
            out = real(trainer, prompts, pass_rates)
            calls.append(len(out))
            if len(calls) % 2 == 0:  # each step's second call: a tool agent's rows
                column = np.empty(len(out), dtype=object)
                for i in range(len(out)):
                    column[i] = [0.5]
                out.non_tensor_batch["turn_scores"] = column
            return out

        trainer = verl_trainer.TrainerStandIn(rollout_n=4, workers=2, dp_size=2, budget_settings={
            "url": self.url, "rounds": 2, "options": {"min_n": 2, "max_n": 12, "seed": 6},
        })
        with mock.patch.object(verl_trainer, "generate_sequences", generate):
            joined = 0
            for _ in range(3):
                calls.clear()
                out = verl_trainer.patched_step(trainer, verl_trainer.dataset_batch(PROMPTS), PASS, ns.AdvantageEstimator.GRPO)
                if len(calls) == 2:
                    joined += 1
                    column = list(out.non_tensor_batch["turn_scores"])
                    self.assertEqual(column, [None] * calls[0] + [[0.5]] * calls[1])
        self.assertGreater(joined, 0, "a step in two generation calls")
        trainer._rollout_budget.client.close()


class VerlRoundsCutTest(support.ServiceCase):
    def test_a_last_round_that_cannot_reach_the_multiple_leaves_the_last_rows_out_and_observes_them(self):
        # max_n 2 and min_n 2: round 1 gives 3 prompts their 2 rollouts each (6), round 2 nothing,
        # and 6 is not a multiple of lcm(2 workers, dp 4) = 4: _balance_batch would fail on it.
        ns = verl_upstream.load()
        three = PROMPTS[:3]
        trainer = verl_trainer.TrainerStandIn(rollout_n=4, workers=2, dp_size=4, budget_settings={
            "url": self.url, "rounds": 2, "options": {"min_n": 2, "max_n": 2, "seed": 3},
        })
        with self.assertLogs("rollout_budget", level="WARNING") as logs:
            out = verl_trainer.patched_step(trainer, verl_trainer.dataset_batch(three), PASS, ns.AdvantageEstimator.GRPO)
        self.assertEqual(len(out), 4)
        self.assertIn("step 1: 6 rollouts in 2 rounds, not a multiple of multiple_of 4: 2 are left out of training "
                      "(their results are observed)", "\n".join(logs.output))
        results = trainer._rollout_budget.last_rounds.results
        self.assertEqual(len(results), 6)
        self.assertEqual([r["rollout_id"] for r in results[:4]], [r["rollout_id"] for r in rows_of(out)])
        with HttpClient(self.url) as c:
            self.assertEqual(sum(c.prompt("math/%d" % p["index"])["rollouts"] for p in three), 6)
        trainer._rollout_budget.client.close()


class VerlRoundsRefusedTest(support.ServiceCase):
    def test_what_rounds_cannot_run_with_is_an_error_at_the_first_step_naming_the_setting(self):
        # (A comment, not a docstring: unittest -v would print it in place of the test's name.)
        import os
        from unittest import mock

        ns = verl_upstream.load()
        cases = (
            ({"url": self.url, "rounds": 2}, {"adv_estimator": "remax"}, {},
             "rollout_budget.rounds 2 with algorithm.adv_estimator remax"),
            ({"url": self.url, "rounds": 2, "multiple_of": 6}, {}, {},
             "rollout_budget.multiple_of 6 is not a multiple of the 4 agent-loop workers each round's generation is split over "
             "(rounds 2): set multiple_of to a multiple of 4, e.g. 12, or leave it out"),
            ({"url": self.url}, {}, {"ROLLOUT_BUDGET_ROUNDS": "0"}, "rollout_budget.rounds must be ≥ 1, got '0'"),
        )
        for settings, extra, environ, message in cases:
            trainer = verl_trainer.TrainerStandIn(rollout_n=4, budget_settings=settings, **extra)
            with mock.patch.dict(os.environ, environ), self.assertRaises(ValueError) as caught:
                verl_trainer.patched_step(trainer, verl_trainer.dataset_batch(PROMPTS), PASS, ns.AdvantageEstimator.GRPO)
            self.assertIn(message, str(caught.exception))
            self.assertIsNone(getattr(trainer, "_rollout_budget", None))
        trainer = verl_trainer.TrainerStandIn(rollout_n=4, budget_settings={"url": self.url, "rounds": 2})
        trainer.async_rollout_mode = False
        with self.assertRaisesRegex(ValueError, "rollout_budget.rounds 2 needs verl's async rollout mode"):
            verl_trainer.patched_step(trainer, verl_trainer.dataset_batch(PROMPTS), PASS, ns.AdvantageEstimator.GRPO)
        with HttpClient(self.url) as c:
            self.assertEqual(c.health().get("prompts", 0), 0, "nothing planned or observed")


class VerlOneRoundTest(support.ServiceCase):
    def test_one_round_is_one_plan_a_step_as_before(self):
        ns = verl_upstream.load()
        trainer = verl_trainer.TrainerStandIn(rollout_n=4, budget_settings={"url": self.url, "rounds": 1})
        adapter = recorded(trainer)
        out = verl_trainer.patched_step(trainer, verl_trainer.dataset_batch(PROMPTS), PASS, ns.AdvantageEstimator.GRPO)
        self.assertEqual(len(out), sum(a["n"] for a in adapter.last_plan["allocations"]))
        self.assertIsNone(adapter.last_rounds)
        # The request of a step without rounds: the whole budget, the trainer's multiple, no rounds_left.
        self.assertEqual(len(adapter.client.requests), 1)
        request = adapter.client.requests[0]
        self.assertEqual((request["budget_rollouts"], request["multiple_of"], request.get("rounds_left")), (48, 4, None))
        adapter.client.close()


if __name__ == "__main__":
    unittest.main()
