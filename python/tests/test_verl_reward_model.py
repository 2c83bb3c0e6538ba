"""verl with a reward model, with rounds and without, through the patched step
(tests/verl_trainer.py) against a real `rollout-budget serve`: its ranks divide every batch it
scores, its extra infos come with its scores on the reward loop, one on the rollout's GPUs is
refused with rounds, and compute_reward_async computes nothing again."""

import unittest

from . import support, verl_trainer, verl_upstream
from .verl_steps import PASS, PROMPTS, rows_of


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


if __name__ == "__main__":
    unittest.main()
