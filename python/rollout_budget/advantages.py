"""Per-rollout advantages for uneven groups, equal to verl's own estimators.

verl (verl/trainer/ppo/core_algos.py at b178a3c) groups rollouts by `index` (the batch's
`uid`) and never assumes equal group sizes: `compute_grpo_outcome_advantage` and
`compute_rloo_outcome_advantage` collect scores per id (`id2score[index[i]].append(...)`),
so with `uid` = the plan's group id they are right on the plan's uneven groups. This module
computes the same numbers without torch, for integrations that normalise rewards themselves
(slime's reward post-process) and for checking a trainer's output. The tests compare it with
verl's functions run on the same rows (python/tests/test_verl_upstream.py).
"""

from __future__ import annotations

import math

__all__ = ["group_advantages", "ADVANTAGE_KINDS"]

ADVANTAGE_KINDS = ("grpo", "drgrpo", "rloo")


def group_advantages(rewards, group_ids, kind="grpo", epsilon=1e-6):
    """Advantage of each rollout given its group, for groups of any sizes.

    With a group's rewards r_1..r_n, mean m and unbiased standard deviation
    s = sqrt(Σ (r_i − m)² / (n − 1)) (torch.std's default):
      - ``grpo``: (r_i − m) / (s + epsilon)   (verl GRPO, norm_adv_by_std_in_grpo=True)
      - ``drgrpo``: r_i − m                   (Dr. GRPO, arXiv:2503.20783; verl with
        norm_adv_by_std_in_grpo=False)
      - ``rloo``: n/(n − 1) · (r_i − m), i.e. r_i minus the mean of the others
        (arXiv:2402.14740; verl RLOO)
    A group of one rollout keeps its reward as is in all three (verl: mean 0 and std 1 for
    GRPO, so r / (1 + epsilon); no baseline for RLOO), as verl does.

    Domain: rewards finite numbers, group ids hashable, equal lengths; epsilon ≥ 0.
    Complexity: O(N) time and memory. Returns a list of floats in the input order.
    Source: verl/trainer/ppo/core_algos.py (b178a3c), compute_grpo_outcome_advantage and
    compute_rloo_outcome_advantage.
    """
    if kind not in ADVANTAGE_KINDS:
        raise ValueError("kind must be one of %s, got %r" % (", ".join(ADVANTAGE_KINDS), kind))
    rewards = [_reward(r, i) for i, r in enumerate(rewards.tolist() if hasattr(rewards, "tolist") else rewards)]
    group_ids = list(group_ids.tolist() if hasattr(group_ids, "tolist") else group_ids)
    if len(rewards) != len(group_ids):
        raise ValueError("%d rewards for %d group ids" % (len(rewards), len(group_ids)))
    if not (epsilon >= 0):
        raise ValueError("epsilon must be ≥ 0, got %r" % (epsilon,))
    members = {}
    for i, g in enumerate(group_ids):
        members.setdefault(g, []).append(i)
    out = [0.0] * len(rewards)
    for idx in members.values():
        n = len(idx)
        values = [rewards[i] for i in idx]
        if n == 1:
            r = values[0]
            out[idx[0]] = r / (1.0 + epsilon) if kind == "grpo" else r
            continue
        mean = math.fsum(values) / n
        if kind == "grpo":
            std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
            for i, v in zip(idx, values):
                out[i] = (v - mean) / (std + epsilon)
        elif kind == "drgrpo":
            for i, v in zip(idx, values):
                out[i] = v - mean
        else:
            for i, v in zip(idx, values):
                out[i] = (v - mean) * n / (n - 1)
    return out


def _reward(value, i):
    """Reward i as a finite float, or a ValueError naming it: one NaN made its whole group NaN,
    and None a bare TypeError."""
    try:
        r = float(value)
    except (TypeError, ValueError):
        raise ValueError("rewards[%d] is %r, not a number" % (i, value)) from None
    if not math.isfinite(r):
        raise ValueError("rewards[%d] is %r, not a finite number: every advantage of its group would be NaN" % (i, value))
    return r
