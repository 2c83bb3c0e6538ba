"""rollout_budget.slime against slime's own code at 624b824 (tests/slime_upstream.py) and a real
`rollout-budget serve`: the reward post-process on uneven groups, the rollout function loaded
and called the way slime calls it, per-sample seeds, and three rollouts end to end.
Needs torch and httpx (/usr/bin/python3 after .ci/setup-python.sh)."""

import os
import random
import shlex
import sys
import types
import unittest
from unittest import mock

from . import slime_sim, slime_upstream, support
from rollout_budget import HttpClient, group_advantages, run_rounds
from rollout_budget.config import Settings

LABELS = ["p%02d" % i for i in range(12)]
RATES = [0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.97]


def samples_of(groups, ns):
    """Flattened samples: group g has sizes[g] samples with the given rewards."""
    out = []
    for g, rewards in enumerate(groups):
        for r in rewards:
            out.append(ns.Sample(group_index=g, index=len(out), reward=float(r)))
    return out


class PostProcessTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ns = slime_upstream.load()
        cls.ours = staticmethod(cls.ns.load_function("rollout_budget.slime.post_process_rewards"))

    def uneven(self, seed):
        rng = random.Random(seed)
        return [[float(rng.random() < rng.random()) for _ in range(rng.choice([1, 2, 3, 5, 8, 11]))] for _ in range(rng.randint(2, 7))]

    def test_each_group_is_normalised_as_slime_normalises_an_even_batch_of_it(self):
        checked = 0
        for seed in range(60):
            groups = self.uneven(seed)
            for estimator, std in (("grpo", True), ("grpo", False), ("gspo", True), ("reinforce_plus_plus_baseline", True)):
                args = slime_upstream.args(advantage_estimator=estimator, grpo_std_normalization=std)
                samples = samples_of(groups, self.ns)
                raw, ours = slime_upstream.ManagerStandIn(args, post_process=self.ours).post_process_rewards(samples)
                self.assertEqual(raw, [s.reward for s in samples])
                # Reference: slime's own _post_process_rewards on each group alone, as the even
                # batch it handles (rollout_batch_size 1, n_samples_per_prompt = the group's size;
                # slime turns std normalisation off when n_samples_per_prompt is 1).
                k = 0
                for rewards in groups:
                    one = slime_upstream.args(advantage_estimator=estimator, rollout_batch_size=1, n_samples_per_prompt=len(rewards),
                                              grpo_std_normalization=std and len(rewards) > 1)
                    _, ref = slime_upstream.ManagerStandIn(one).post_process_rewards(samples_of([rewards], self.ns))
                    for a, b in zip(ours[k:k + len(rewards)], ref):
                        self.assertAlmostEqual(a, b, delta=2e-6 + 2e-6 * abs(b), msg="seed %d %s std=%s" % (seed, estimator, std))
                    k += len(rewards)
                    checked += 1
        self.assertGreater(checked, 500)

    def test_slimes_default_mixes_prompts_on_uneven_groups(self):
        # The bug the post-process fixes: with Σ n ≠ rollout_batch_size × n_samples_per_prompt,
        # slime/ray/rollout.py normalises the whole batch as one row (`rewards.view(-1, rewards.shape[-1])`).
        groups = [[1, 1, 1, 1, 1, 0], [0, 0, 1], [0, 1]]
        samples = samples_of(groups, self.ns)
        args = slime_upstream.args(rollout_batch_size=3, n_samples_per_prompt=4)
        _, default = slime_upstream.ManagerStandIn(args).post_process_rewards(samples)
        _, ours = slime_upstream.ManagerStandIn(args, post_process=self.ours).post_process_rewards(samples)
        ids = [s.group_index for s in samples]
        self.assertEqual(ours, [float(x) for x in group_advantages([s.reward for s in samples], ids, kind="grpo")])
        whole = group_advantages([s.reward for s in samples], [0] * len(samples), kind="grpo")
        for a, b in zip(default, whole):
            self.assertAlmostEqual(a, b, places=5)
        self.assertGreater(max(abs(a - b) for a, b in zip(default, ours)), 0.3)

    def test_estimators_slime_leaves_alone_get_the_raw_rewards(self):
        samples = samples_of([[1, 0, 0], [1]], self.ns)
        for args in (slime_upstream.args(advantage_estimator="ppo"), slime_upstream.args(rewards_normalization=False)):
            raw, rewards = self.ours(args, samples)
            self.assertEqual(rewards, [1.0, 0.0, 0.0, 1.0])

    def test_partial_rollout_cannot_be_combined(self):
        # slime's buffer takes back aborted groups only whole: add_samples asserts each group
        # has n_samples_per_prompt samples (slime/rollout/data_source.py).
        holder = types.SimpleNamespace(args=slime_upstream.args(n_samples_per_prompt=4), buffer=[])
        with self.assertRaisesRegex(AssertionError, "must be equal to n_samples_per_prompt"):
            self.ns.add_samples(holder, [samples_of([[1, 0, 1]], self.ns)])


class RecordingClient:
    """Forwards every call to the real client unchanged; records the plans, what each plan was
    asked (`asked`: the candidates and keywords) and the observes (`observed`: each one's results)."""

    def __init__(self, client):
        self.client = client
        self.plans = []
        self.asked = []
        self.observed = []

    def plan(self, prompts, **kwargs):
        self.asked.append(dict(kwargs, prompts=[dict(p) for p in prompts]))
        self.plans.append(self.client.plan(prompts, **kwargs))
        return self.plans[-1]

    def observe(self, results):
        self.observed.append(list(results))
        return self.client.observe(results)


class _RolloutCase(support.ServiceCase):
    """slime's rollout manager on our rollout function, against its own real service."""

    def setUp(self):
        self.ns = slime_upstream.load()
        self.http = HttpClient(self.url)
        self.client = RecordingClient(self.http)
        slime_sim.CLIENT = self.client
        slime_sim.SETTINGS = Settings(options={"min_n": 2, "max_n": 12, "seed": 4})
        slime_sim.PASS.clear()
        slime_sim.PASS.update(dict(zip(LABELS, RATES)))
        slime_sim.CALLS.clear()
        slime_sim.INDICES.clear()

    def tearDown(self):
        slime_sim.CLIENT = slime_sim.SETTINGS = None
        self.http.close()


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


class RolloutRoundsTest(_RolloutCase):
    """ROLLOUT_BUDGET_ROUNDS 2: the step planned and generated in two rounds (run_rounds) through
    slime's own _get_rollout_data and the simulated generate_and_rm. A service of its own per
    test: its rollout ids and priors are that test's alone."""

    @classmethod
    def setUpClass(cls):
        pass

    @classmethod
    def tearDownClass(cls):
        pass

    def setUp(self):
        proc, port = support.start_http(support.temp_folder(self) + "/state.db")
        self.addCleanup(support.stop, proc)
        self.url = "http://127.0.0.1:%d" % port
        super().setUp()
        self.addCleanup(setattr, slime_sim, "ABORT", None)
        self.dataset = [self.ns.Sample(prompt="Problem %s" % label, label=label, metadata={"index": i, "data_source": "math"})
                        for i, label in enumerate(LABELS)]

    def manager(self, args, settings):
        slime_sim.SETTINGS = settings
        rollout_fn = self.ns.load_function("tests.slime_sim.generate_rollout")
        post = self.ns.load_function("rollout_budget.slime.post_process_rewards")
        return slime_upstream.ManagerStandIn(args, rollout_fn=rollout_fn, post_process=post,
                                             data_source=slime_upstream.DataSourceStandIn(args, self.dataset))

    def test_a_last_round_cut_below_what_a_new_prompt_needs_keeps_its_plan(self):
        # Found in review: a prompt whose round-1 rollouts all aborted is new again in round 2
        # (min_n), and the last round's cut to a multiple of global_batch_size asked for less than
        # it needs: BUDGET_INFEASIBLE, and the whole rollout failed. The round keeps its plan now.
        args = slime_upstream.args(rollout_batch_size=3, n_samples_per_prompt=4, global_batch_size=4)
        self.dataset = self.dataset[:3]
        # Round 1 (6 rollouts, 2 a prompt): both of math/0's abort, and math/1's first.
        slime_sim.ABORT = lambda row: row["rollout_index"] < 2 and (row["prompt_id"] == "math/0" or (row["prompt_id"] == "math/1" and row["rollout_index"] == 0))
        manager = self.manager(args, Settings(rounds=2, options={"min_n": 2, "max_n": 2, "seed": 4}))
        samples, metrics = manager.get_rollout_data(0)
        self.assertEqual(metrics["rollout_budget/aborted"], 3)
        # Every sample kept has a reward; math/0 was started again in round 2 (min_n 2).
        self.assertTrue(all(s.reward is not None for s in samples))
        self.assertEqual(sum(1 for s in samples if s.metadata["rollout_budget"]["prompt_id"] == "math/0"), 2)

    def trains_every_sample(self, args, samples):
        """slime's own build_dp_schedule puts every sample in a training step (none dropped)."""
        partitions, _, _, _ = self.ns.build_dp_schedule(
            args, {"dp_size": 2, "cp_size": 1, "vpp_size": 1, "microbatch_group_size_per_vp_stage": 1},
            [len(s.tokens) for s in samples], global_batch_size=args.global_batch_size, rollout_indices=[s.index for s in samples])
        self.assertEqual(sorted(i for p in partitions for i in p), list(range(len(samples))))

    def groups_of(self, samples):
        """The flattened samples as slime gets them, cut where group_index changes: each group must be one prompt's."""
        groups = []
        for s in samples:
            if not groups or groups[-1][0].group_index != s.group_index:
                groups.append([])
            groups[-1].append(s)
        self.assertEqual(len({g[0].group_index for g in groups}), len(groups), "a prompt's samples together")
        for g in groups:
            self.assertEqual(len({s.metadata["rollout_budget"]["prompt_id"] for s in g}), 1)
        return {g[0].metadata["rollout_budget"]["prompt_id"]: g for g in groups}

    def test_two_rounds_top_up_each_group_by_its_round_one_rewards_and_observe_once(self):
        from rollout_budget.plan import group_seed

        args = slime_upstream.args()  # 12 prompts × 4 = 48 rollouts, global_batch_size 8
        manager = self.manager(args, Settings(rounds=2, options={"min_n": 2, "max_n": 12, "seed": 4}))
        seen = {}
        for rollout_id in range(2):
            asked, plans, calls, observes = len(self.client.asked), len(self.client.plans), len(slime_sim.CALLS), len(self.client.observed)
            before = {"math/%d" % i: self.http.prompt("math/%d" % i, group="math", step=rollout_id) for i in range(len(LABELS))}
            samples, metrics = manager.get_rollout_data(rollout_id)
            first, second = self.client.asked[asked:]
            plan1, plan2 = self.client.plans[plans:]
            n1 = {a["prompt_id"]: a["n"] for a in plan1["allocations"]}
            n2 = {a["prompt_id"]: a["n"] for a in plan2["allocations"]}
            spent1 = sum(n1.values())
            self.assertTrue(0 < spent1 < 48 and sum(n2.values()) > 0, (n1, n2))
            # Round 1: its share (rounds_left 2) of the step's budget, no Σ n constraint of its own.
            self.assertEqual((first["budget_rollouts"], first["rounds_left"], first.get("multiple_of")), (48, 2, None))
            self.assertEqual((first["step"], plan1["step"], plan1["rounds_left"]), (rollout_id, rollout_id, 2))
            self.assertFalse(any("partial_rewards" in p for p in first["prompts"]))
            # Round 2: what is left, each prompt with its round-1 rewards; the step's total a multiple of 8.
            self.assertEqual((second["budget_rollouts"], second.get("rounds_left", 1), second["step"]), (48 - spent1, 1, rollout_id))
            self.assertEqual(second.get("multiple_of"), 8 if spent1 % 8 == 0 else None)
            groups = self.groups_of(samples)
            partial = {p["id"]: p.get("partial_rewards") for p in second["prompts"]}
            self.assertEqual(set(groups), set(n1) | set(n2))
            for pid, group in groups.items():
                rows = [s.metadata["rollout_budget"] for s in group]
                self.assertEqual([r["rollout_index"] for r in rows], list(range(n1.get(pid, 0) + n2.get(pid, 0))))
                self.assertEqual(partial[pid], [s.reward for s in group[:n1.get(pid, 0)]] if pid in n1 else None)
                self.assertEqual({s.group_index for s in group}, {group[0].group_index})
                # Seeds: the plan's group seed + rollout index, round 2's after round 1's.
                self.assertEqual({r["seed"] - r["rollout_index"] for r in rows}, {group_seed(4, rollout_id, pid)})
                self.assertEqual({r["group_id"] for r in rows}, {"%d/%s" % (rollout_id, pid)})
            for a in plan2["allocations"]:
                self.assertEqual(a.get("first_rollout", 0), n1.get(a["prompt_id"], 0))
            self.assertEqual(len(samples), 48)
            self.assertEqual(len({s.index for s in samples}), 48, "unique sample indices")
            self.assertEqual(sorted(slime_sim.CALLS[calls:]), sorted(s.metadata["rollout_budget"]["seed"] for s in samples))
            self.assertEqual(len(set(slime_sim.CALLS[calls:])), 48, "one request a rollout, no seed twice")
            self.assertEqual((metrics["rollout_budget/rounds"], metrics["rollout_budget/rollouts"], metrics["rollout_budget/applied"]), (2, 48, 48))
            self.trains_every_sample(args, samples)
            # One observe, after round 2, of both rounds' rollouts.
            self.assertEqual(len(self.client.observed), observes + 1)
            self.assertEqual(sorted(r["rollout_id"] for r in self.client.observed[-1]),
                             sorted(s.metadata["rollout_budget"]["rollout_id"] for s in samples))
            for pid, group in groups.items():
                seen[pid] = seen.get(pid, 0) + len(group)
                self.assertEqual(self.http.prompt(pid)["rollouts"], seen[pid])
            # Round 2 values each group by what it showed: its posterior at this step plus its round-1 rewards.
            for a in plan2["allocations"]:
                got = partial[a["prompt_id"]]
                prior = before[a["prompt_id"]]
                self.assertAlmostEqual(a["p_mean"], (prior["alpha"] + sum(got)) / (prior["alpha"] + prior["beta"] + len(got)), places=9)
            if rollout_id > 0:
                self.assertGreater(len(set(n2.values())), 1, "round 2 tops groups up unevenly: %s" % n2)
            # The post-process normalises the groups of both rounds as one group a prompt.
            raw, rewards = manager.post_process_rewards(samples)
            expected = group_advantages(raw, [s.group_index for s in samples], kind="grpo")
            for a, b in zip(rewards, expected):
                self.assertAlmostEqual(a, b, places=12)

    def test_a_global_batch_size_of_the_whole_budget_makes_the_step_total_a_multiple_not_each_round(self):
        # rollout_batch_size × n_samples_per_prompt = global_batch_size (one training step a
        # rollout): a round's share below 48 cannot be a multiple of 48 but 0.
        args = slime_upstream.args(global_batch_size=48)
        manager = self.manager(args, Settings(rounds=2, options={"min_n": 2, "max_n": 12, "seed": 4}))
        for rollout_id in range(2):
            plans = len(self.client.plans)
            samples, metrics = manager.get_rollout_data(rollout_id)
            spent = [p["totals"]["rollouts"] for p in self.client.plans[plans:]]
            self.assertEqual(len(spent), 2)
            self.assertTrue(0 < spent[0] < 48 and spent[1] == 48 - spent[0], spent)
            self.assertEqual((len(samples), metrics["rollout_budget/rounds"]), (48, 2))
            self.trains_every_sample(args, samples)
        # Each round a multiple of 48 (run_rounds' multiple_of) is one round in all but name.
        candidates = [{"id": "math/%d" % i, "max_tokens": 64, "group": "math"} for i in range(12)]
        # With min_n 2 round 1 grows to all 48 (the 24 its prompts need, up to a multiple); with skip it plans 0.
        for options, spent in (({"min_n": 2}, [48]), ({"skip": True}, [0, 48])):
            done = run_rounds(self.http, candidates, lambda rows: [0.0] * len(rows), budget_rollouts=48, rounds=2, multiple_of=48,
                              observe=False, step=5, seed=4, max_n=12, **options)
            self.assertEqual([p["totals"]["rollouts"] for p in done.plans], spent, options)

    def test_the_last_round_is_cut_to_the_multiple_below_what_it_can_spend(self):
        # max_n 3: 12 prompts take at most 36 of the 48 rollouts; global_batch_size 16; fresh_share
        # 0: round 1 takes half (24), though its prompts are new to the state.
        args = slime_upstream.args(global_batch_size=16)
        with self.assertLogs("rollout_budget", level="WARNING") as logs:
            samples, _ = self.manager(args, Settings(rounds=2, options={"min_n": 1, "max_n": 3, "seed": 4, "fresh_share": 0})).get_rollout_data(0)
        first, planned, again = self.client.asked
        self.assertEqual([p["totals"]["rollouts"] for p in self.client.plans], [24, 12, 8])
        self.assertEqual((planned["budget_rollouts"], again["budget_rollouts"], again.get("rounds_left", 1)), (24, 8, 1))
        self.assertIn("the last round planned again with budget_rollouts 8 (it planned 12 of the 24 left): the step's 24 rollouts "
                      "so far and these make a multiple of multiple_of 16", self.client.plans[-1]["warnings"])
        self.assertTrue(any("the last round planned again" in line for line in logs.output))
        self.assertEqual(len(samples), 32)
        self.trains_every_sample(args, samples)
        # min_n = max_n 2: round 1 must start every prompt (24), round 2 has nothing to add: 24
        # is past 16, which no smaller last round reaches: slime drops 8, and the log says so.
        with self.assertLogs("rollout_budget", level="WARNING") as logs:
            samples, _ = self.manager(args, Settings(rounds=2, options={"min_n": 2, "max_n": 2, "seed": 4})).get_rollout_data(1)
        self.assertEqual(len(samples), 24)
        self.assertIn("WARNING:rollout_budget:rollout-budget: step 1: 24 rollouts, not a multiple of global_batch_size 16: slime "
                      "trains on 16 and drops the rest", logs.output)

    def test_aborted_samples_give_no_partial_reward_are_not_charged_and_are_left_out(self):
        # SGLang's finish_reason abort: status ABORTED, no reward. Round 1 aborts rollout 0 of four prompts.
        aborted = {"math/0", "math/3", "math/6", "math/9"}
        slime_sim.ABORT = lambda row: row["prompt_id"] in aborted and row["rollout_index"] == 0
        args = slime_upstream.args()
        with self.assertLogs("rollout_budget", level="WARNING") as logs:
            samples, metrics = self.manager(args, Settings(rounds=2, options={"min_n": 2, "max_n": 12, "seed": 4})).get_rollout_data(0)
        first, second = self.client.asked
        n1 = {a["prompt_id"]: a["n"] for a in self.client.plans[0]["allocations"]}
        # As run_rounds documents: not charged, no partial reward, round 2 numbered after them.
        self.assertEqual(second["budget_rollouts"], 48 - (sum(n1.values()) - 4))
        partial = {p["id"]: p.get("partial_rewards") for p in second["prompts"]}
        groups = self.groups_of(samples)
        for pid in aborted:
            self.assertEqual(len(partial[pid]), n1[pid] - 1)
            self.assertEqual(groups[pid][0].metadata["rollout_budget"]["rollout_index"], 1)
        for a in self.client.plans[1]["allocations"]:
            self.assertEqual(a.get("first_rollout", 0), n1[a["prompt_id"]] - (a["prompt_id"] in aborted))
        self.assertEqual(len(set(slime_sim.CALLS)), len(slime_sim.CALLS), "no seed twice")
        self.assertEqual(len(slime_sim.CALLS), 52)
        # Left out of what slime trains on (no reward); the step's 48 others, all of them trained.
        self.assertEqual(len(samples), 48)
        self.assertFalse(any(s.status == self.ns.Sample.Status.ABORTED or s.reward is None for s in samples))
        self.assertEqual((metrics["rollout_budget/aborted"], metrics["rollout_budget/applied"]), (4, 48))
        self.trains_every_sample(args, samples)
        (results,) = self.client.observed
        self.assertEqual(sorted(r["rollout_id"] for r in results if r.get("finish_reason") == "abort"), sorted("0/%s#0" % p for p in aborted))
        for pid in aborted:
            self.assertEqual(self.http.prompt(pid)["rollouts"], len(groups[pid]))
        self.assertIn("WARNING:rollout_budget:rollout-budget: step 0: 4 aborted samples (finish_reason abort) left out of the rollout: "
                      "they have no reward (their results are observed as aborted)", logs.output)

    def test_a_step_that_generates_past_its_reserved_indices_moves_the_data_source_on(self):
        # Found in review: the data source reserves rollout_batch_size × n_samples_per_prompt
        # indices a step (48 here); aborted samples are not charged, so a step generates more
        # (52), and its last indices were the next step's first: two samples of the run, one index.
        slime_sim.ABORT = lambda row: row["prompt_id"] in {"math/0", "math/3", "math/6", "math/9"} and row["rollout_index"] == 0
        args = slime_upstream.args()
        manager = self.manager(args, Settings(rounds=2, options={"min_n": 2, "max_n": 12, "seed": 4}))
        with self.assertLogs("rollout_budget", level="WARNING"):
            manager.get_rollout_data(0)
        self.assertEqual(len(slime_sim.INDICES), 52)
        self.assertEqual(manager.data_source.sample_index, 52, "saved with the data source's state: a resumed run goes on from it")
        with self.assertLogs("rollout_budget", level="WARNING"):
            manager.get_rollout_data(1)
        self.assertEqual(len(slime_sim.INDICES), 104)
        self.assertEqual(len(set(slime_sim.INDICES)), 104, "no index twice in the run")
        self.assertEqual(min(slime_sim.INDICES[52:]), 52)

    def test_one_round_an_aborted_sample_is_left_out_not_a_type_error_and_planned_again(self):
        # Its reward None went to float(): TypeError, and the rollout failed. Then the step had 47
        # rollouts, and slime trained 40 of them; now the budget it left is planned again.
        slime_sim.ABORT = lambda row: row["prompt_id"] == "math/0" and row["rollout_index"] == 0
        args = slime_upstream.args()
        with self.assertLogs("rollout_budget", level="WARNING") as logs:
            samples, metrics = self.manager(args, Settings(options={"min_n": 2, "max_n": 12, "seed": 4})).get_rollout_data(0)
        self.assertEqual(len(self.client.plans), 2)
        # The request of a step without rounds, as before them: no rounds_left (the planner's default, 1).
        self.assertEqual(sorted(self.client.asked[0]), ["budget_rollouts", "budget_tokens", "max_n", "min_n", "multiple_of", "prompts", "seed", "step"])
        self.assertEqual(self.client.asked[1]["budget_rollouts"], 1)  # what the aborted sample left
        self.assertEqual((len(samples), metrics["rollout_budget/aborted"], metrics["rollout_budget/applied"]), (48, 1, 48))
        self.assertTrue(all(s.reward is not None for s in samples))
        self.assertFalse([line for line in logs.output if "not a multiple of global_batch_size" in line], logs.output)
        self.trains_every_sample(args, samples)

    def test_an_aborted_sample_when_the_step_is_one_global_batch_is_planned_again_so_slime_trains(self):
        # slime's own scripts (run-qwen3-4B.sh: 32 × 8, --global-batch-size 256) make the step one
        # global batch: one aborted sample left 255 rollouts, and build_dp_schedule asserted.
        slime_sim.ABORT = lambda row: row["prompt_id"] == "math/3" and row["rollout_index"] == 1
        args = slime_upstream.args(global_batch_size=48)
        samples, metrics = self.manager(args, Settings(options={"min_n": 2, "max_n": 12, "seed": 4})).get_rollout_data(0)
        self.assertEqual((len(samples), metrics["rollout_budget/aborted"]), (48, 1))
        self.trains_every_sample(args, samples)

    def test_samples_that_abort_again_and_again_are_an_error_saying_so_not_slimes_assert(self):
        calls = {"n": 0}

        def abort(row):  # the first sample of the step, and every sample planned again after it
            calls["n"] += 1
            return calls["n"] == 1 or calls["n"] > 48

        slime_sim.ABORT = abort
        args = slime_upstream.args(global_batch_size=48)
        with self.assertRaises(ValueError) as caught:
            self.manager(args, Settings(options={"min_n": 2, "max_n": 12, "seed": 4})).get_rollout_data(0)
        self.assertEqual(len(self.client.plans), 4)  # the step, then three refills of one rollout each
        self.assertIn("rollout_budget.slime: step 0 has 47 rollouts to train on (4 aborted samples left out), fewer than one "
                      "global_batch_size (48), which slime cannot train: samples SGLang aborted (finish_reason abort) were "
                      "planned again 3 times and aborted again", str(caught.exception))

    def test_options_that_plan_less_than_one_global_batch_are_an_error_naming_them(self):
        # max_n 3 × 12 prompts = 36 < 48: the planner names max_n; with skip, it plans nothing,
        # and slime failed with an IndexError on the empty rollout.
        args = slime_upstream.args(global_batch_size=48)
        with self.assertRaisesRegex(Exception, r"the 12 prompts take at most 36 rollouts \(options.max_n 3\)"):
            self.manager(args, Settings(options={"min_n": 2, "max_n": 3, "seed": 4})).get_rollout_data(0)
        with self.assertRaises(ValueError) as caught:
            self.manager(args, Settings(options={"min_n": 2, "max_n": 3, "skip": True, "seed": 4})).get_rollout_data(0)
        self.assertIn("step 0 has 0 rollouts to train on, fewer than one global_batch_size (48), which slime cannot train: "
                      "max_n 3 × rollout_batch_size 12 is below it: raise max_n; skip may leave prompts out: turn it off; "
                      "or lower --global-batch-size", str(caught.exception))


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


class CheckpointCopyTest(unittest.TestCase):
    """The state copied beside slime's checkpoints (``--save``, ``--save-interval``) and the
    resumed run's first rollout (``--load``). slime's own save needs Megatron and Ray: the tests
    make the folder as `RolloutDataSource.save` does; what each copy holds is read with sqlite3."""

    def setUp(self):
        import rollout_budget.slime as ours

        self.ns = slime_upstream.load()
        # The copies run the CLI as a trainer's process finds it.
        environ = mock.patch.dict(os.environ, {"ROLLOUT_BUDGET_CLI": " ".join(shlex.quote(a) for a in support.COMMAND)})
        environ.start()
        self.addCleanup(environ.stop)
        self.dir = support.temp_folder(self)
        self.state = self.dir + "/state.db"  # a service of its own per test: its state holds this test's rollouts only
        proc, port = support.start_http(self.state)
        self.addCleanup(support.stop, proc)
        self.http = HttpClient("http://127.0.0.1:%d" % port)
        self.addCleanup(self.http.close)
        slime_sim.CLIENT = self.http
        self.addCleanup(setattr, slime_sim, "CLIENT", None)
        self.addCleanup(setattr, slime_sim, "SETTINGS", None)
        slime_sim.PASS.clear()
        slime_sim.PASS.update(dict(zip(LABELS, RATES)))

        self.ours = ours
        ours._progress.clear()  # a new process
        self.addCleanup(ours._progress.clear)
        slime_sim.SETTINGS = Settings(options={"min_n": 2, "max_n": 12, "seed": 4}, backup_state=self.state)
        self.dataset = [self.ns.Sample(prompt="Problem %s" % label, label=label, metadata={"index": i, "data_source": "math"})
                        for i, label in enumerate(LABELS)]

    def manager(self, args):
        rollout_fn = self.ns.load_function("tests.slime_sim.generate_rollout")
        return slime_upstream.ManagerStandIn(args, rollout_fn=rollout_fn, data_source=slime_upstream.DataSourceStandIn(args, self.dataset))

    def held(self, path):
        import sqlite3

        db = sqlite3.connect("file:%s?mode=rw" % path, uri=True)
        try:
            return db.execute("SELECT sum(rollouts), max(last_step) FROM prompts").fetchone()
        finally:
            db.close()

    def test_the_state_as_of_each_saved_rollout_is_copied_beside_the_data_source_state(self):
        save = self.dir + "/ckpt"
        args = slime_upstream.args(save=save, save_interval=2, num_rollout=5)
        manager = self.manager(args)
        rollouts = []
        for rollout_id in range(5):
            samples, _ = manager.get_rollout_data(rollout_id)
            rollouts.append(len(samples))
        # should_run_periodic_action: (id + 1) % 2 == 0 → after rollouts 1 and 3, and the last, 4.
        for rollout_id in (1, 3, 4):
            self.assertEqual(self.held(self.ours.state_copy(save, rollout_id)), (sum(rollouts[:rollout_id + 1]), rollout_id))
        for rollout_id in (0, 2):
            self.assertFalse(os.path.exists(self.ours.state_copy(save, rollout_id)), rollout_id)

    def test_release_train_saves_after_every_rollout_so_each_gets_its_copy(self):
        # slime's train.py:71 saves after every rollout with --release-train, --save-interval or
        # not; without an interval no copy was ever made, and a resume kept the state as it was.
        save = self.dir + "/ckpt"
        args = slime_upstream.args(save=save, save_interval=None, release_train=True, num_rollout=3)
        manager = self.manager(args)
        rollouts = []
        for rollout_id in range(3):
            samples, _ = manager.get_rollout_data(rollout_id)
            rollouts.append(len(samples))
        for rollout_id in range(3):
            self.assertEqual(self.held(self.ours.state_copy(save, rollout_id)), (sum(rollouts[:rollout_id + 1]), rollout_id))

    def test_an_epoch_end_saved_by_the_data_source_gets_its_copy_too(self):
        save = self.dir + "/ckpt"
        args = slime_upstream.args(save=save, save_interval=10, num_rollout=20)
        manager = self.manager(args)
        first, _ = manager.get_rollout_data(0)
        os.makedirs(save + "/rollout")
        open(save + "/rollout/global_dataset_state_dict_0.pt", "wb").close()  # RolloutDataSource.save at an epoch's end
        manager.get_rollout_data(1)
        self.assertEqual(self.held(self.ours.state_copy(save, 0)), (len(first), 0))

    def test_a_run_resumed_with_load_says_how_to_put_the_copy_back_while_the_service_has_the_state(self):
        save = self.dir + "/ckpt"
        self.manager(slime_upstream.args(save=save, save_interval=1, num_rollout=5)).get_rollout_data(0)
        manager = self.manager(slime_upstream.args(save=save, save_interval=1, num_rollout=5))
        manager.get_rollout_data(1)
        self.ours._progress.clear()  # a new process, resumed from the checkpoint of rollout 0
        resumed = self.manager(slime_upstream.args(save=save, load=save, save_interval=1, num_rollout=5))
        with self.assertLogs("rollout_budget", level="WARNING") as logs:
            resumed.get_rollout_data(1)
        self.assertIn("resumed from %s, whose copy of the state (%s) holds the results up to step 0" % (save, self.ours.state_copy(save, 0)), logs.output[0])
        self.assertIn("rollout-budget backup --state %s --out %s" % (self.ours.state_copy(save, 0), self.state), logs.output[0])


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
