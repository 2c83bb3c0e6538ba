"""verl's step through the patched step (tests/verl_trainer.py) against a real `rollout-budget
serve`: the batch a plan gives divides as verl's ranks need it. Whole PPO mini-batches on every
data-parallel rank under a token budget, and PrefixGrouper with balance_batch refused by name."""

import os
import unittest

from . import support, verl_trainer, verl_upstream
from .verl_steps import PASS, PROMPTS


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


if __name__ == "__main__":
    unittest.main()
