"""rollout_budget.slime with ROLLOUT_BUDGET_ROUNDS, against slime's own code at 624b824
(tests/slime_upstream.py) and a real `rollout-budget serve`: a step planned and generated in rounds,
cut to the global batch size, with aborted samples left out and planned again.
Needs torch and httpx (/usr/bin/python3 after .ci/setup-python.sh)."""

import unittest

from . import slime_sim, slime_upstream, support
from .slime_case import LABELS, _RolloutCase
from rollout_budget import group_advantages, run_rounds
from rollout_budget.config import Settings


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


if __name__ == "__main__":
    unittest.main()
