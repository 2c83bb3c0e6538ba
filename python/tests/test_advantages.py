"""group_advantages on hand-worked uneven groups (verl equality: test_verl_upstream.py)."""

import math
import unittest

from rollout_budget import group_advantages


class GroupAdvantagesTest(unittest.TestCase):
    # Group "a" (positions 0, 2, 3): rewards 1, 0, 0 — n = 3, mean 1/3, unbiased variance
    # ((2/3)² + 2·(1/3)²)/2 = 1/3. Group "b" (1, 4, 5, 6, 8): 1, 1, 0, 1, 0 — n = 5, mean 3/5,
    # variance (3·0.16 + 2·0.36)/4 = 0.3. Group "c" (7): one rollout, reward 1.
    def setUp(self):
        self.rewards = [1, 1, 0, 0, 1, 0, 1, 1, 0]
        self.groups = ["a", "b", "a", "a", "b", "b", "b", "c", "b"]

    def test_grpo_divides_by_the_unbiased_std_plus_epsilon(self):
        eps = 1e-6
        out = group_advantages(self.rewards, self.groups, kind="grpo", epsilon=eps)
        sa = math.sqrt(1 / 3)
        sb = math.sqrt(0.3)
        expected = [(2 / 3) / (sa + eps), 0.4 / (sb + eps), (-1 / 3) / (sa + eps), (-1 / 3) / (sa + eps),
                    0.4 / (sb + eps), -0.6 / (sb + eps), 0.4 / (sb + eps), 1 / (1 + eps), -0.6 / (sb + eps)]
        for got, want in zip(out, expected):
            self.assertAlmostEqual(got, want, places=12)

    def test_drgrpo_subtracts_the_group_mean(self):
        out = group_advantages(self.rewards, self.groups, kind="drgrpo")
        expected = [2 / 3, 0.4, -1 / 3, -1 / 3, 0.4, -0.6, 0.4, 1.0, -0.6]
        for got, want in zip(out, expected):
            self.assertAlmostEqual(got, want, places=12)

    def test_rloo_subtracts_the_mean_of_the_others(self):
        out = group_advantages(self.rewards, self.groups, kind="rloo")
        # a: 1 − (0+0)/2 = 1, 0 − (1+0)/2 = −0.5; b: 1 − (1+0+1+0)/4 = 0.5, 0 − 3/4 = −0.75; c: alone.
        expected = [1.0, 0.5, -0.5, -0.5, 0.5, -0.75, 0.5, 1.0, -0.75]
        for got, want in zip(out, expected):
            self.assertAlmostEqual(got, want, places=12)

    def test_a_group_with_equal_rewards_gets_zero(self):
        out = group_advantages([1, 1, 1, 0, 0], ["x", "x", "x", "y", "y"], kind="grpo")
        self.assertEqual(out, [0.0] * 5)

    def test_bad_input_is_an_error(self):
        with self.assertRaisesRegex(ValueError, "kind must be one of grpo, drgrpo, rloo"):
            group_advantages([1], ["a"], kind="ppo")
        with self.assertRaisesRegex(ValueError, "2 rewards for 1 group ids"):
            group_advantages([1, 0], ["a"])
        with self.assertRaisesRegex(ValueError, "epsilon"):
            group_advantages([1], ["a"], epsilon=-1)
        # One NaN made its whole group NaN without a word; None was a bare TypeError from float().
        with self.assertRaisesRegex(ValueError, r"^rewards\[0\] is nan, not a finite number: every advantage of its group would be NaN$"):
            group_advantages([float("nan"), 1, 0, 1], ["a"] * 4)
        with self.assertRaisesRegex(ValueError, r"^rewards\[2\] is inf, not a finite number"):
            group_advantages([1, 0, float("inf")], ["a", "a", "b"])
        with self.assertRaisesRegex(ValueError, r"^rewards\[0\] is None, not a number$"):
            group_advantages([None, 1, 0, 1], ["a"] * 4)


if __name__ == "__main__":
    unittest.main()
