"""verl end to end: three steps of plan → expand → (simulated) generate → advantages → observe
through the patched step (tests/verl_trainer.py: verl's own DataProto, _get_gen_batch and
compute_advantage; the model and reward are simulated) against a real `rollout-budget serve`.
Step 3's plan uses what steps 1–2 observed."""

import os
import unittest

from . import support, verl_trainer, verl_upstream
from rollout_budget import HttpClient, group_advantages

PROMPTS = [{"text": "problem %d" % i, "index": i, "data_source": "math"} for i in range(12)]
# True pass rates by prompt id ("math/<index>"): from nearly never to nearly always solved.
PASS = {"math/%d" % i: p for i, p in enumerate([0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.97])}


class VerlEndToEndTest(support.ServiceCase):
    def test_three_steps_uneven_groups_verl_advantages_and_posteriors_that_carry_over(self):
        ns = verl_upstream.load()
        trainer = verl_trainer.TrainerStandIn(rollout_n=4, workers=4, dp_size=2, budget_settings={
            "url": self.url, "options": {"min_n": 2, "max_n": 12, "seed": 1},
        })
        observed = {}
        plans = []
        for _ in range(3):
            if trainer.global_steps == 2:
                # Before step 3: the service holds exactly what steps 1–2 observed.
                with HttpClient(self.url) as c:
                    for pid, (count, total) in observed.items():
                        view = c.prompt(pid)
                        self.assertEqual(view["rollouts"], count, pid)
                        self.assertAlmostEqual(view["reward_sum"], total, places=9)
            batch = verl_trainer.dataset_batch(PROMPTS)
            out = verl_trainer.patched_step(trainer, batch, PASS, ns.AdvantageEstimator.GRPO)
            plan = trainer._rollout_budget.last_plan
            plans.append(plan)
            self.assertEqual(plan["step"], trainer.global_steps)
            self.assertEqual(len(out) % 4, 0, "Σ n a multiple of lcm(4 agent-loop workers, dp 2)")
            rewards = out.batch["token_level_scores"].sum(-1).tolist()
            uids = list(out.non_tensor_batch["uid"])
            ours = group_advantages(rewards, uids, kind="grpo")
            # verl broadcasts a row's advantage over its response mask; the first token is always in it.
            self.assertTrue(bool(out.batch["response_mask"][:, 0].all()))
            theirs = out.batch["advantages"][:, 0].tolist()
            for k, (a, b) in enumerate(zip(ours, theirs)):
                self.assertLessEqual(abs(a - b), 2e-6 + 2e-6 * abs(b), "step %d row %d" % (plan["step"], k))
            sizes = sorted({uids.count(u) for u in set(uids)})
            check_metrics(self, trainer.metrics, out, candidates=len(PROMPTS), rounds=1)
            if plan["step"] > 1:  # step 1 knows nothing: every prompt gets the same n
                self.assertGreater(len(sizes), 1, "uneven groups: %s" % sizes)
            for info, r in zip(out.non_tensor_batch["extra_info"], rewards):
                pid = info["rollout_budget"]["prompt_id"]
                count, total = observed.get(pid, (0, 0.0))
                observed[pid] = (count + 1, total + r)
        trainer._rollout_budget.client.close()
        first = {a["prompt_id"]: a for a in plans[0]["allocations"]}
        third = {a["prompt_id"]: a for a in plans[2]["allocations"]}
        # Step 1: nothing observed, every prompt gets the same prior.
        self.assertEqual(len({round(a["p_mean"], 9) for a in first.values()}), 1)
        # Step 3: posteriors from steps 1–2 order the prompts by what they showed.
        means = {pid: a["p_mean"] for pid, a in third.items()}
        hard = [pid for pid in means if PASS[pid] <= 0.1]
        easy = [pid for pid in means if PASS[pid] >= 0.8]
        self.assertTrue(hard and easy, (hard, easy))
        self.assertLess(max(means[p] for p in hard), min(means[p] for p in easy))
        with HttpClient(self.url) as c:
            total = sum(c.prompt(pid)["rollouts"] for pid in PASS)
        self.assertEqual(total, sum(count for count, _ in observed.values()))
        print("\nverl e2e: rollouts per step %s, group sizes at step 3 %s"
              % ([sum(a["n"] for a in p["allocations"]) for p in plans], sorted(a["n"] for a in third.values())))


class VerlResumeTest(support.ServiceCase):
    def test_a_step_replayed_after_a_resume_warns_and_keeps_the_first_results(self):
        verl_upstream.load()
        trainer = verl_trainer.TrainerStandIn(rollout_n=4, workers=4, dp_size=2, budget_settings={
            "url": self.url, "options": {"min_n": 2, "max_n": 12, "seed": 1},
        })
        for _ in range(2):
            verl_trainer.patched_step(trainer, verl_trainer.dataset_batch(PROMPTS), PASS, verl_upstream.load().AdvantageEstimator.GRPO)
        self.addCleanup(trainer._rollout_budget.client.close)
        with HttpClient(self.url) as c:
            before = {pid: c.prompt(pid)["rollouts"] for pid in PASS}
        # verl's _load_checkpoint of global_step_1: global_steps back to 1, the same batch again.
        trainer.global_steps = 1
        with self.assertLogs("rollout_budget", level="WARNING") as logs:
            out = verl_trainer.patched_step(trainer, verl_trainer.dataset_batch(PROMPTS), PASS, verl_upstream.load().AdvantageEstimator.GRPO)
        ids = [info["rollout_budget"]["rollout_id"] for info in out.non_tensor_batch["extra_info"]]
        with HttpClient(self.url) as c:
            after = {pid: c.prompt(pid)["rollouts"] for pid in PASS}
        new = sum(after.values()) - sum(before.values())
        # The replayed ids were not applied again; only those beyond the first run's groups were.
        self.assertEqual(len(logs.output), 1)
        self.assertIn("step 2: %d of %d rollouts were observed before" % (len(ids) - new, len(ids)), logs.output[0])
        self.assertIn("Resuming a run from a checkpoint", logs.output[0])
        self.assertLess(new, len(ids))
        # The step's figures say it too.
        self.assertEqual((trainer.metrics["rollout_budget/applied"], trainer.metrics["rollout_budget/duplicates"]), (new, len(ids) - new))



class RequestRecorder:
    """Forwards to the adapter's client and records each plan request (candidates and options)."""

    def __init__(self, client):
        self.client = client
        self.requests = []

    def plan(self, candidates, **options):
        self.requests.append({"candidates": [dict(c) for c in candidates], **options})
        return self.client.plan(candidates, **options)

    def observe(self, results):
        return self.client.observe(results)

    def close(self):
        self.client.close()


def recorded(trainer):
    """The trainer's adapter (built as the patched fit's first call builds it), its client recorded."""
    from rollout_budget import verl as rollout_budget_verl

    adapter = rollout_budget_verl.adapter_for(trainer)
    adapter.client = RequestRecorder(adapter.client)
    return adapter


def check_metrics(case, metrics, out, candidates, rounds):
    """fit's rollout_budget/* metrics of a step against its batch, counted here from the rewards
    and uids verl trains on (one group a uid)."""
    groups = {}
    for row in rows_of(out):
        groups.setdefault(row["uid"], []).append(row["reward"])
    varied = [g for g in groups.values() if max(g) != min(g)]
    flat = [g for g in groups.values() if max(g) == min(g)]
    sizes = [len(g) for g in groups.values()]
    m = {k[len("rollout_budget/"):]: v for k, v in metrics.items() if k.startswith("rollout_budget/")}
    case.assertEqual(sorted(m), sorted(["candidates", "prompts", "rollouts", "aborted", "rounds", "n_min", "n_mean", "n_max",
                                        "informative_groups", "informative_group_ratio", "effective_ratio", "all_correct_ratio",
                                        "all_wrong_ratio", "applied", "duplicates", "plan_s", "observe_s"]))
    case.assertEqual({k: m[k] for k in ("candidates", "prompts", "rollouts", "aborted", "rounds", "applied", "duplicates")},
                     {"candidates": candidates, "prompts": len(groups), "rollouts": len(out), "aborted": 0, "rounds": rounds,
                      "applied": len(out), "duplicates": 0})
    case.assertEqual((m["n_min"], m["n_max"]), (min(sizes), max(sizes)))
    case.assertAlmostEqual(m["n_mean"], len(out) / len(groups), places=12)
    case.assertEqual(m["informative_groups"], len(varied))
    case.assertAlmostEqual(m["informative_group_ratio"], len(varied) / len(groups), places=12)
    case.assertAlmostEqual(m["effective_ratio"], sum(len(g) for g in varied) / len(out), places=12)
    case.assertAlmostEqual(m["all_correct_ratio"], sum(1 for g in flat if g[0] >= 0.5) / len(groups), places=12)
    case.assertAlmostEqual(m["all_wrong_ratio"], sum(1 for g in flat if g[0] < 0.5) / len(groups), places=12)
    case.assertGreater(m["plan_s"], 0)
    case.assertGreater(m["observe_s"], 0)
    return m


def rows_of(out):
    """(rollout ids row, reward) of each row of a step's batch, with its uid."""
    rewards = out.batch["token_level_scores"].sum(-1).tolist()
    return [dict(info["rollout_budget"], reward=r, uid=u)
            for info, r, u in zip(out.non_tensor_batch["extra_info"], rewards, out.non_tensor_batch["uid"])]


class VerlMetricsSkipTest(support.ServiceCase):
    def test_candidates_counts_the_prompts_offered_also_those_the_plan_leaves_out(self):
        # Found in review: the figure was the first plan's allocations, which list only the
        # prompts given rollouts (with skip, 2 or 4 of the 12 offered).
        ns = verl_upstream.load()
        trainer = verl_trainer.TrainerStandIn(rollout_n=4, workers=4, dp_size=2, budget_settings={
            "url": self.url, "budget_rollouts": 8, "options": {"skip": True, "min_n": 2, "max_n": 12, "seed": 1},
        })
        out = verl_trainer.patched_step(trainer, verl_trainer.dataset_batch(PROMPTS), PASS, ns.AdvantageEstimator.GRPO)
        trainer._rollout_budget.client.close()
        uids = set(out.non_tensor_batch["uid"])
        self.assertLess(len(uids), len(PROMPTS))
        self.assertEqual((trainer.metrics["rollout_budget/candidates"], trainer.metrics["rollout_budget/prompts"]), (len(PROMPTS), len(uids)))


class VerlMiniBatchTest(support.ServiceCase):
    def test_a_token_budget_gives_every_rank_whole_ppo_mini_batches(self):
        # Found in review: verl's legacy workers (its default) cut each data-parallel rank's rows
        # into mini-batches of ppo_mini_batch_size × n / dp rows (fsdp_workers.py:241–242); FSDP's
        # update_policy steps the optimizer once a part (dp_actor.py:541, data.split), Megatron
        # asserts the rows divide (protocol.py:827). A token budget made Σ n 18 of 32 there: a
        # step on one rollout, or AssertionError: 9 % 8 != 0.
        ns = verl_upstream.load()
        trainer = verl_trainer.TrainerStandIn(rollout_n=4, workers=2, dp_size=2, budget_settings={
            "url": self.url, "budget_tokens": 300, "options": {"min_n": 2, "max_n": 12, "seed": 1},
        })
        trainer.config["actor_rollout_ref"]["actor"] = {"ppo_mini_batch_size": 4}
        out = verl_trainer.patched_step(trainer, verl_trainer.dataset_batch(PROMPTS), PASS, ns.AdvantageEstimator.GRPO)
        trainer._rollout_budget.client.close()
        self.assertEqual(trainer._rollout_budget.multiple_of, 16)  # lcm(2 workers, dp 2, 4 × 4)
        self.assertLess(len(out), len(PROMPTS) * 4, "the token budget binds")
        mini = 4 * 4 // 2
        for rank in out.chunk(2):  # fit's dispatch over the data-parallel ranks
            self.assertEqual({len(part) for part in rank.split(mini)}, {mini})

    def test_a_token_budget_below_one_mini_batch_is_an_error_saying_why(self):
        # train_batch_size == ppo_mini_batch_size (one PPO update a step): a token budget that
        # binds leaves no multiple of the whole batch but 0. The error names the multiple's parts
        # and the setting that lets a shorter step through.
        ns = verl_upstream.load()
        trainer = verl_trainer.TrainerStandIn(rollout_n=4, workers=2, dp_size=2, budget_settings={
            "url": self.url, "budget_tokens": 300, "options": {"min_n": 1, "max_n": 12, "seed": 1},
        })
        trainer.config["actor_rollout_ref"]["actor"] = {"ppo_mini_batch_size": len(PROMPTS)}
        self.addCleanup(lambda: trainer._rollout_budget.client.close())
        with self.assertRaises(RuntimeError) as caught:
            verl_trainer.patched_step(trainer, verl_trainer.dataset_batch(PROMPTS), PASS, ns.AdvantageEstimator.GRPO)
        said = str(caught.exception)
        self.assertIn("the step's Σ n is a multiple of 48, the lcm of the actor's ppo_mini_batch_size 12 × rollout.n 4 (48)", said)
        self.assertIn("set rollout_budget.multiple_of", said)


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


def reward_model_trainer(url, rounds, seed):
    """A trainer stand-in with a reward model (reward_model.enable) on GPUs of its own
    (enable_resource_pool: else refused with rounds, VerlRoundsColocatedRewardModelTest)."""
    trainer = verl_trainer.TrainerStandIn(rollout_n=4, workers=2, dp_size=2, budget_settings={
        "url": url, "rounds": rounds, "options": {"min_n": 2, "max_n": 12, "seed": seed},
    })
    trainer.use_rm = True
    trainer.config["reward_model"]["enable_resource_pool"] = True
    return trainer


class VerlRewardModelTest(support.ServiceCase):
    def test_a_reward_models_ranks_divide_every_batch_it_scores_with_rounds_or_without(self):
        # rm_wg.compute_rm_score splits the batch it scores over the reward mesh's ranks
        # (DataProto.chunk asserts equal parts). Neither the step's multiple (the agent-loop
        # workers and the actor's ranks) nor a round's (the workers) counted them: a reward
        # model on 3 ranks beside 2 workers and an actor on 2 failed chunk's assert.
        ns = verl_upstream.load()
        from rollout_budget import verl as rollout_budget_verl

        for rounds in (1, 2):
            trainer = reward_model_trainer(self.url, rounds, seed=4)
            trainer.rm_wg = verl_trainer.RewardModelStandIn(PASS, dp=3)
            self.assertEqual(rollout_budget_verl.infer_multiple_of(trainer), 6)
            for _ in range(3):
                out = verl_trainer.patched_step(trainer, verl_trainer.dataset_batch(PROMPTS), PASS, ns.AdvantageEstimator.GRPO)
                self.assertEqual(len(out) % 6, 0)
                self.assertTrue(all(n % 3 == 0 for n in trainer.rm_wg.calls), trainer.rm_wg.calls)
                rows = rows_of(out)
                self.assertEqual([r["reward"] for r in rows], [verl_trainer.pass_of(r, PASS) for r in rows])
            self.assertEqual(len(trainer.rm_wg.calls), 3 * rounds, trainer.rm_wg.calls)  # scored once a round, by the rounds or by fit
            self.assertEqual(trainer.reward_fn.rows, 0)
            self.assertEqual(trainer._rollout_budget.each, 6 if rounds > 1 else 1)
            trainer._rollout_budget.client.close()


class VerlRewardLoopModelTest(support.ServiceCase):
    def test_a_reward_model_on_the_reward_loop_gives_its_extra_infos_with_its_scores(self):
        # reward_model.enable with the reward loop (verl's default) where generation does not
        # score: each round's RewardLoopManager scores came with reward_extra_keys ["acc"] but
        # not the "acc" column, which fit's extraction reads (ray_trainer.py:505–517).
        ns = verl_upstream.load()
        for rounds in (1, 2):
            trainer = reward_model_trainer(self.url, rounds, seed=5)
            trainer.use_reward_loop = True  # after generation's stand-in was made not to score
            trainer.async_rollout_manager.scores = False
            trainer.reward_loop_manager = verl_trainer.RewardLoopManagerStandIn(PASS, workers=2)
            out = verl_trainer.patched_step(trainer, verl_trainer.dataset_batch(PROMPTS), PASS, ns.AdvantageEstimator.GRPO)
            rows = rows_of(out)
            self.assertEqual(out.non_tensor_batch["acc"].tolist(), [verl_trainer.pass_of(r, PASS) for r in rows], rounds)
            self.assertEqual(trainer.reward_fn.rows, 0)
            trainer._rollout_budget.client.close()


class VerlRoundsColocatedRewardModelTest(support.ServiceCase):
    def test_a_reward_model_on_the_rollouts_gpus_is_refused_with_rounds_naming_the_setting(self):
        # fit scores after sleep_replicas() frees the rollout engine's memory; a round would
        # score while it is awake (the reward model colocated: verl's default pool).
        ns = verl_upstream.load()
        trainer = verl_trainer.TrainerStandIn(rollout_n=4, workers=2, dp_size=2, budget_settings={"url": self.url, "rounds": 2})
        trainer.use_rm = True
        trainer.rm_wg = verl_trainer.RewardModelStandIn(PASS, dp=2)
        with self.assertRaisesRegex(ValueError, r"rollout_budget.rounds with a reward model on the rollout's GPUs "
                                                r"\(reward_model.enable_resource_pool false\).*set reward_model.enable_resource_pool=True"):
            verl_trainer.patched_step(trainer, verl_trainer.dataset_batch(PROMPTS), PASS, ns.AdvantageEstimator.GRPO)
        self.assertEqual(trainer.rm_wg.calls, [])
        trainer._rollout_budget.client.close()
        # One round: fit scores as it always did, after the replicas sleep.
        trainer = verl_trainer.TrainerStandIn(rollout_n=4, workers=2, dp_size=2, budget_settings={"url": self.url})
        trainer.use_rm = True
        trainer.rm_wg = verl_trainer.RewardModelStandIn(PASS, dp=2)
        out = verl_trainer.patched_step(trainer, verl_trainer.dataset_batch(PROMPTS), PASS, ns.AdvantageEstimator.GRPO)
        self.assertEqual(trainer.rm_wg.calls, [len(out)])
        trainer._rollout_budget.client.close()


class VerlRoundsAsyncRewardTest(support.ServiceCase):
    def test_compute_reward_async_reads_the_rounds_scores_and_computes_nothing_again(self):
        # reward_model.launch_reward_fn_async: fit's compute_reward_async is compute_reward
        # (reward.py:179–216) on the reward manager, and verl's NaiveRewardManager.__call__
        # returns the batch's rm_scores first (naive.py:46–52, abstract.py:47–72). A warning said
        # each reward was computed twice. verl's own code, loaded from b178a3c, on fit's batch.
        support.require_torch()
        import os
        from collections import defaultdict

        import torch

        ns = verl_upstream.load()
        trainer = verl_trainer.TrainerStandIn(rollout_n=4, budget_settings={"url": self.url, "rounds": 2, "options": {"seed": 7}})
        trainer.config["reward_model"]["launch_reward_fn_async"] = True
        with self.assertLogs("rollout_budget", level="WARNING") as logs:  # the plans' own warnings (no length data yet)
            out = verl_trainer.patched_step(trainer, verl_trainer.dataset_batch(PROMPTS), PASS, ns.AdvantageEstimator.GRPO)
        self.assertNotIn("launch_reward_fn_async", "\n".join(logs.output))
        env = {"torch": torch, "defaultdict": defaultdict, "DataProto": ns.DataProto}
        folder = os.path.join(ns.root, "verl", "workers", "reward_manager")
        call = support.load_method(os.path.join(folder, "naive.py"), "NaiveRewardManager", "__call__", env)
        extract = support.load_method(os.path.join(folder, "abstract.py"), "AbstractRewardManager", "_extract_reward_from_rm_scores", dict(env))
        compute_reward = support.load_from_source(os.path.join(ns.root, "verl", "trainer", "ppo", "reward.py"), ["compute_reward"],
                                                  {"tqbridge": lambda **_: (lambda fn: fn)})["compute_reward"]
        manager = type("Naive", (), {"__call__": call, "_extract_reward_from_rm_scores": extract})()
        scored = []
        manager.tokenizer, manager.num_examine, manager.reward_fn_key = None, 0, "data_source"
        manager.compute_score = lambda **kw: scored.append(kw) or 0.0
        again, extra = compute_reward(out, manager)
        self.assertEqual(scored, [])
        self.assertTrue(bool((again == out.batch["token_level_scores"]).all()))
        self.assertEqual(sorted(extra), ["acc"])
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


class VerlPrefixGrouperTest(support.ServiceCase):
    """actor.use_prefix_grouper with trainer.balance_batch (verl's default): verl's _balance_batch
    (ray_trainer.py:1096, run as written with verl/utils/seqlen_balancing.py) balances whole uid
    groups and raises when the data-parallel size does not divide their count, which the plan's
    groups do not keep. The integration refuses the combination at the first step."""

    def balance(self, sizes):
        import copy
        import heapq
        import sys
        import types
        from itertools import chain

        import numpy as np
        import torch

        ns = verl_upstream.load()
        sb = {"torch": torch, "heapq": heapq, "copy": copy, "chain": chain, "np": np}
        support.load_from_source(os.path.join(ns.root, "verl", "utils", "seqlen_balancing.py"), [
            "calculate_workload", "karmarkar_karp", "greedy_partition", "get_seqlen_balanced_partitions",
            "log_seqlen_unbalance", "get_group_balanced_partitions"], sb)
        balance_batch = support.load_method(ns.trainer_path, "RayPPOTrainer", "_balance_batch", {
            "torch": torch, "calculate_workload": sb["calculate_workload"],
            "get_seqlen_balanced_partitions": sb["get_seqlen_balanced_partitions"], "log_seqlen_unbalance": sb["log_seqlen_unbalance"]})
        # The method imports get_group_balanced_partitions from verl.utils.seqlen_balancing.
        module = types.ModuleType("verl.utils.seqlen_balancing")
        module.get_group_balanced_partitions = sb["get_group_balanced_partitions"]
        names = {"verl": types.ModuleType("verl"), "verl.utils": types.ModuleType("verl.utils"), "verl.utils.seqlen_balancing": module}
        saved = {k: sys.modules.get(k) for k in names}
        sys.modules.update(names)
        self.addCleanup(lambda: [sys.modules.pop(k) if v is None else sys.modules.__setitem__(k, v) for k, v in saved.items()])
        uids = [u for k, n in enumerate(sizes) for u in ["1/p%d" % k] * n]
        mask = torch.ones(len(uids), 8, dtype=torch.long)
        batch = ns.DataProto.from_dict(tensors={"attention_mask": mask}, non_tensors={"uid": np.array(uids, dtype=object)})
        trainer = types.SimpleNamespace(use_prefix_grouper=True, actor_rollout_wg=None, _get_dp_size=lambda wg, role: 2)
        balance_batch(trainer, batch, metrics={})

    def test_verls_balance_refuses_a_plans_group_count_and_the_integration_refuses_the_setting(self):
        verl_upstream.load()  # skips without torch (locally; CI=true fails)
        self.balance([4, 4, 4, 4])  # verl's uniform n = 4: four groups over dp 2
        with self.assertRaisesRegex(ValueError, r"PrefixGrouper with balance_batch requires num_uid_groups \(3\) % dp_size \(2\) == 0"):
            self.balance([6, 6, 4])  # a plan that left a prompt out: 16 rollouts in 3 groups
        trainer = verl_trainer.TrainerStandIn(rollout_n=4, workers=2, dp_size=2, budget_settings={"url": self.url})
        trainer.config["actor_rollout_ref"]["actor"] = {"use_prefix_grouper": True}
        trainer.config["trainer"] = {"balance_batch": True}
        with self.assertRaises(ValueError) as caught:
            verl_trainer.patched_step(trainer, verl_trainer.dataset_batch(PROMPTS), PASS, verl_upstream.load().AdvantageEstimator.GRPO)
        self.assertIn("actor_rollout_ref.actor.use_prefix_grouper with trainer.balance_batch", str(caught.exception))
        self.assertIn("set trainer.balance_batch=False", str(caught.exception))
        trainer.config["trainer"] = {"balance_batch": False}
        out = verl_trainer.patched_step(trainer, verl_trainer.dataset_batch(PROMPTS), PASS, verl_upstream.load().AdvantageEstimator.GRPO)
        trainer._rollout_budget.client.close()
        self.assertEqual(len(out) % 2, 0)
