"""verl end to end: three steps of plan → expand → (simulated) generate → advantages → observe
through the patched step (tests/verl_trainer.py: verl's own DataProto, _get_gen_batch and
compute_advantage; the model and reward are simulated) against a real `rollout-budget serve`.
Step 3's plan uses what steps 1–2 observed. Also a step replayed after a resume, and the step's
figures. Rounds are in test_verl_rounds.py, reward models in test_verl_reward_model.py, the
batch's division over verl's ranks in test_verl_batch_shape.py."""

import unittest

from . import support, verl_trainer, verl_upstream
from .verl_steps import PASS, PROMPTS, check_metrics
from rollout_budget import HttpClient, group_advantages


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


if __name__ == "__main__":
    unittest.main()
