"""rollout_budget.slime's reward post-process against slime's own code at 624b824
(tests/slime_upstream.py): uneven groups, each normalised as slime normalises an even batch of it;
the estimators slime leaves alone; partial rollouts, which it cannot combine with.
Needs torch and httpx (/usr/bin/python3 after .ci/setup-python.sh)."""

import random
import types
import unittest

from . import slime_upstream
from rollout_budget import group_advantages


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


if __name__ == "__main__":
    unittest.main()
