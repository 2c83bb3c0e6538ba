"""rollout_budget.slime against slime's own code at 624b824 (tests/slime_upstream.py) and a real
`rollout-budget serve`: the rollout function loaded and called the way slime calls it, per-sample
seeds, three rollouts end to end, a rollout replayed after a resume, and the flags it refuses.
The reward post-process is in test_slime_post_process.py, rounds in test_slime_rounds.py, the
state copied beside checkpoints in test_slime_checkpoint.py.
Needs torch and httpx (/usr/bin/python3 after .ci/setup-python.sh)."""

import os
import sys
import types
import unittest
from unittest import mock

from . import slime_sim, slime_upstream
from .slime_case import LABELS, RATES, _RolloutCase
from rollout_budget import group_advantages
from rollout_budget.config import Settings


class RolloutEndToEndTest(_RolloutCase):
    def test_three_rollouts_uneven_groups_per_sample_seeds_and_posteriors_that_carry_over(self):
        args = slime_upstream.args()
        dataset = [self.ns.Sample(prompt="Problem %s" % label, label=label, metadata={"index": i, "data_source": "math"})
                   for i, label in enumerate(LABELS)]
        source = slime_upstream.DataSourceStandIn(args, dataset)
        rollout_fn = self.ns.load_function("tests.slime_sim.generate_rollout")
        post = self.ns.load_function("rollout_budget.slime.post_process_rewards")
        manager = slime_upstream.ManagerStandIn(args, rollout_fn=rollout_fn, post_process=post, data_source=source)
        observed = {}
        for rollout_id in range(3):
            if rollout_id == 2:
                for pid, (count, total) in observed.items():
                    view = self.http.prompt(pid)
                    self.assertEqual(view["rollouts"], count, pid)
                    self.assertAlmostEqual(view["reward_sum"], total, places=9)
            calls_before = len(slime_sim.CALLS)
            samples, metrics = manager.get_rollout_data(rollout_id)  # slime's own call_rollout_fn and flattening
            plan = self.client.plans[-1]
            self.assertEqual(plan["step"], rollout_id)
            self.assertEqual(len(samples), sum(a["n"] for a in plan["allocations"]))
            self.assertEqual(len(samples) % args.global_batch_size, 0)
            self.assertEqual(metrics["rollout_budget/rollouts"], len(samples))
            # n = 1 requests: one generate per sample, each with its own seed (group seed + index).
            seeds = slime_sim.CALLS[calls_before:]
            self.assertEqual(len(seeds), len(samples))
            self.assertEqual(len(set(seeds)), len(seeds))
            for s in samples:
                row = s.metadata["rollout_budget"]
                self.assertEqual(row["seed"] - row["rollout_index"], samples[[t.metadata["rollout_budget"]["group_id"] for t in samples].index(row["group_id"])].metadata["rollout_budget"]["seed"])
            self.assertEqual(len({s.index for s in samples}), len(samples))
            groups = {}
            for s in samples:
                groups.setdefault(s.group_index, []).append(s)
            if rollout_id > 0:
                self.assertGreater(len({len(g) for g in groups.values()}), 1, "uneven groups")
            # The rollout_budget/* figures slime logs, counted here from the groups it trains on.
            varied = [g for g in groups.values() if len({t.reward for t in g}) > 1]
            self.assertEqual({k: metrics["rollout_budget/" + k] for k in ("candidates", "prompts", "aborted", "rounds", "applied")},
                             {"candidates": len(LABELS), "prompts": len(groups), "aborted": 0, "rounds": 1, "applied": len(samples)})
            self.assertEqual(metrics["rollout_budget/informative_groups"], len(varied))
            self.assertAlmostEqual(metrics["rollout_budget/effective_ratio"], sum(len(g) for g in varied) / len(samples), places=12)
            self.assertEqual((metrics["rollout_budget/n_min"], metrics["rollout_budget/n_max"]),
                             (min(len(g) for g in groups.values()), max(len(g) for g in groups.values())))
            self.assertGreater(metrics["rollout_budget/plan_s"], 0)
            # slime's TensorBoard writer logs each value with add_scalar: numbers only, never None.
            self.assertTrue(all(type(v) in (int, float) for v in metrics.values()), metrics)
            # The post-process slime calls: per-group GRPO on the uneven groups.
            raw, rewards = manager.post_process_rewards(samples)
            expected = group_advantages(raw, [s.group_index for s in samples], kind="grpo")
            for a, b, s in zip(rewards, expected, samples):
                self.assertAlmostEqual(a, 0.0 if len(groups[s.group_index]) == 1 else b, places=12)
            # slime's own schedule trains every rollout: Σ n is a multiple of global_batch_size.
            partitions, _, _, _ = self.ns.build_dp_schedule(
                args, {"dp_size": 2, "cp_size": 1, "vpp_size": 1, "microbatch_group_size_per_vp_stage": 1},
                [len(s.tokens) for s in samples], global_batch_size=args.global_batch_size,
                rollout_indices=[s.index for s in samples])
            self.assertEqual(sorted(i for p in partitions for i in p), list(range(len(samples))))
            for s in samples:
                pid = s.metadata["rollout_budget"]["prompt_id"]
                count, total = observed.get(pid, (0, 0.0))
                observed[pid] = (count + 1, total + s.reward)
        first = {a["prompt_id"]: a["p_mean"] for a in self.client.plans[0]["allocations"]}
        third = {a["prompt_id"]: a["p_mean"] for a in self.client.plans[2]["allocations"]}
        self.assertEqual(len({round(v, 9) for v in first.values()}), 1)
        rate = {"math/%d" % i: r for i, r in enumerate(RATES)}
        hard = [p for p in third if rate[p] <= 0.1]
        easy = [p for p in third if rate[p] >= 0.8]
        self.assertLess(max(third[p] for p in hard), min(third[p] for p in easy))
        print("\nslime e2e: rollouts per step %s, group sizes at step 3 %s" % (
            [sum(a["n"] for a in p["allocations"]) for p in self.client.plans],
            sorted(a["n"] for a in self.client.plans[2]["allocations"])))


class SettingsInRolloutTest(_RolloutCase):
    def rollout(self, dataset, settings, rollout_id=0):
        args = slime_upstream.args()
        slime_sim.SETTINGS = settings
        rollout_fn = self.ns.load_function("tests.slime_sim.generate_rollout")
        manager = slime_upstream.ManagerStandIn(args, rollout_fn=rollout_fn, data_source=slime_upstream.DataSourceStandIn(args, dataset))
        return manager.get_rollout_data(rollout_id)

    def test_a_token_budget_keeps_the_uniform_rollout_budget_beside_it(self):
        # Before, budget_tokens alone dropped rollout_batch_size × n_samples_per_prompt: the step grew past it.
        dataset = [self.ns.Sample(prompt="Problem %s" % label, label=label, metadata={"index": i, "data_source": "math"})
                   for i, label in enumerate(LABELS)]
        samples, _ = self.rollout(dataset, Settings(budget_tokens=100_000, options={"min_n": 2, "max_n": 12}))
        self.assertEqual(self.client.plans[-1]["budget"], {"rollouts": 48, "tokens": 100_000})
        self.assertLessEqual(len(samples), 48)

    def test_two_prompts_with_one_id_are_an_error_naming_them(self):
        dataset = [self.ns.Sample(prompt="Problem %s" % label, label=label, metadata={"index": i % 6, "data_source": "math"})
                   for i, label in enumerate(LABELS)]
        with self.assertRaises(ValueError) as caught:
            self.rollout(dataset, Settings(options={"min_n": 2, "max_n": 12}))
        self.assertIn("prompts 0 and 6 of the step are different prompts with the same id 'math/0'", str(caught.exception))
        self.assertEqual(self.client.plans, [])


class RolloutResumeTest(_RolloutCase):
    def test_a_rollout_replayed_after_a_resume_warns_and_is_not_applied_again(self):
        args = slime_upstream.args()
        dataset = [self.ns.Sample(prompt="Problem %s" % label, label=label, metadata={"index": i, "data_source": "math"})
                   for i, label in enumerate(LABELS)]
        rollout_fn = self.ns.load_function("tests.slime_sim.generate_rollout")
        post = self.ns.load_function("rollout_budget.slime.post_process_rewards")

        def manager(source):
            return slime_upstream.ManagerStandIn(args, rollout_fn=rollout_fn, post_process=post, data_source=source)

        first = manager(slime_upstream.DataSourceStandIn(args, dataset))
        with self.assertLogs("rollout_budget", level="WARNING") as logs:
            first.get_rollout_data(0)
        # The plan's warnings are logged, as the CLI prints them (a new state: lengths assumed).
        self.assertRegex(logs.output[0], r"rollout-budget: step 0 plan: \d+ prompts have no length data .* at their max_tokens")
        # The checkpoint of rollout 0: the data source's state (RolloutDataSource.save).
        saved = {k: getattr(first.data_source, k) for k in ("epoch_id", "sample_group_index", "sample_index", "sample_offset")}
        first.get_rollout_data(1)
        total = sum(self.http.prompt("math/%d" % i)["rollouts"] for i in range(len(LABELS)))
        # slime resumes from that checkpoint (start_rollout_id = loaded + 1, the data source loaded): rollout 1 again.
        restored = slime_upstream.DataSourceStandIn(args, dataset)
        for key, value in saved.items():
            setattr(restored, key, value)
        with self.assertLogs("rollout_budget", level="WARNING") as logs:
            again, metrics = manager(restored).get_rollout_data(1)
        self.assertIn("step 1: ", logs.output[0])
        self.assertIn("rollouts were observed before", logs.output[0])
        after = sum(self.http.prompt("math/%d" % i)["rollouts"] for i in range(len(LABELS)))
        self.assertEqual(after - total, metrics["rollout_budget/applied"])
        self.assertLess(metrics["rollout_budget/applied"], len(again))


class NotCombinableTest(unittest.TestCase):
    def test_flags_the_rollout_function_cannot_honour_are_refused_by_name(self):
        from rollout_budget.slime import check_args

        check_args(slime_upstream.args())
        check_args(slime_upstream.args(over_sampling_batch_size=12))  # slime's own default: rollout_batch_size
        for flag, override in (("--partial-rollout", {"partial_rollout": True}),
                               ("--dynamic-sampling-filter-path", {"dynamic_sampling_filter_path": "my_filters.check"}),
                               ("--over-sampling-batch-size 16", {"over_sampling_batch_size": 16}),
                               ("--rollout-sample-filter-path", {"rollout_sample_filter_path": "f.g"}),
                               ("--rollout-all-samples-process-path", {"rollout_all_samples_process_path": "f.g"}),
                               ("--group-rm", {"group_rm": True}),
                               ("--log-passrate", {"log_passrate": True})):
            with self.assertRaises(ValueError) as caught:
                check_args(slime_upstream.args(**override))
            self.assertIn(flag, str(caught.exception))
        # The rollout function checks them before it takes any prompt from the data source.
        from rollout_budget.slime import make_rollout_function

        taken = []
        source = types.SimpleNamespace(get_samples=lambda n: taken.append(n))
        with self.assertRaisesRegex(ValueError, "--log-passrate"):
            make_rollout_function(client=object(), settings=Settings())(slime_upstream.args(log_passrate=True), 0, source)
        self.assertEqual(taken, [])
        # At evaluation too (slime evaluates before the first training rollout), before slime's own rollout runs.
        with self.assertRaisesRegex(ValueError, "--log-passrate"):
            make_rollout_function(client=object(), settings=Settings())(slime_upstream.args(log_passrate=True), 0, source, evaluation=True)
        with mock.patch.dict(os.environ, {}, clear=True), self.assertRaisesRegex(ValueError, r"set url \(ROLLOUT_BUDGET_URL\)"):
            make_rollout_function()(slime_upstream.args(), 0, source, evaluation=True)
        self.assertEqual(taken, [])


class DefaultGeneratePathTest(unittest.TestCase):
    """The default generator calls slime's generate_and_rm once per sample with the sample's own
    `sampling_seed`, `max_new_tokens` and `session_id`. slime.rollout.sglang_rollout cannot be imported here
    (SGLang, Ray): a stand-in module with its `GenerateState.sampling_params` and
    `generate_and_rm(args, sample, sampling_params, evaluation)` signature records the calls."""

    def test_one_request_per_sample_with_its_seed(self):
        slime_upstream.load()
        calls = []

        class GenerateState:
            def __init__(self, args):
                self.sampling_params = {"temperature": 1.0, "max_new_tokens": 64}

        async def generate_and_rm(args, sample, sampling_params, evaluation=False):
            calls.append((sample.index, dict(sampling_params), evaluation))
            sample.reward = 1.0
            return sample

        fake = types.ModuleType("slime.rollout.sglang_rollout")
        fake.GenerateState, fake.generate_and_rm = GenerateState, generate_and_rm
        saved = sys.modules.get("slime.rollout.sglang_rollout")
        sys.modules["slime.rollout.sglang_rollout"] = fake
        try:
            from rollout_budget import slime as rb_slime
            from slime.utils.async_utils import run
            from slime.utils.types import Sample

            samples = [Sample(index=i, metadata={"rollout_budget": {"seed": 1000 + i, "max_tokens": 32 if i == 0 else None}}) for i in range(3)]
            out = run(rb_slime._sglang_generate(slime_upstream.args(), samples))
        finally:
            if saved is None:
                sys.modules.pop("slime.rollout.sglang_rollout", None)
            else:
                sys.modules["slime.rollout.sglang_rollout"] = saved
        self.assertEqual([s.index for s in out], [0, 1, 2])
        # Each sample its own session_id, as slime's generate_and_rm_group gives them: generate
        # sends it as the routing key (--router-policy consistent_hashing).
        self.assertEqual(len({s.session_id for s in out} - {None}), 3)
        self.assertEqual([(i, p["sampling_seed"], p["max_new_tokens"], e) for i, p, e in calls],
                         [(0, 1000, 32, False), (1, 1001, 64, False), (2, 1002, 64, False)])


if __name__ == "__main__":
    unittest.main()
