"""verl adapter: apply a rollout-budget plan to a verl batch (standard library only).

In verl's PPO/GRPO trainer the step does, per batch of prompts:

    batch.non_tensor_batch["uid"] = [uuid4() ...]          # one uid per prompt
    gen_batch = gen_batch.repeat(repeat_times=n, interleave=True)

With a plan, each prompt gets its own n (0 drops it): call `expand_batch(batch, plan)` instead.
It sets `uid` to the plan's group id (so GRPO's advantage groups are the plan's groups),
repeats row i n_i times with `DataProto.sample_level_repeat`, and adds per-row
`rollout_seed` (group seed + j) and `max_tokens` columns for a rollout worker that honours
them. After scoring, `results_from_batch` builds the rows `observe` takes.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Sequence

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from rollout_budget_cli import StepPlan  # noqa: E402


def _column(like: Any, values: list) -> Any:
    """A column shaped like verl's: a numpy object array when the batch uses numpy, else a list."""
    if type(like).__module__.startswith("numpy"):
        import numpy as np  # present wherever verl runs

        return np.array(values, dtype=object)
    return list(values)


def expand_batch(batch: Any, plan: StepPlan, prompt_id_key: str = "prompt_id") -> Any:
    """Repeats each prompt row of `batch` by its planned n (rows the plan gives 0 are dropped).

    `batch` is a verl DataProto (or anything with `non_tensor_batch` and
    `sample_level_repeat(repeat_times)`); `batch.non_tensor_batch[prompt_id_key]` holds the
    prompt ids the plan was made for. Raises KeyError for a row whose prompt is not planned.
    """
    ids = [str(x) for x in batch.non_tensor_batch[prompt_id_key]]
    groups = plan.by_prompt()
    missing = [i for i in ids if i not in groups]
    if missing:
        raise KeyError(f"prompts not in the plan for step {plan.step}: {missing[:5]}")
    repeats = [groups[i].n for i in ids]
    batch.non_tensor_batch["uid"] = _column(batch.non_tensor_batch[prompt_id_key], [groups[i].group_id for i in ids])
    out = batch.sample_level_repeat(repeats)
    seeds: list = []
    max_tokens: list = []
    for i in ids:
        g = groups[i]
        seeds.extend(g.seed + j for j in range(g.n))
        max_tokens.extend([g.max_tokens] * g.n)
    like = out.non_tensor_batch["uid"]
    out.non_tensor_batch["rollout_seed"] = _column(like, seeds)
    out.non_tensor_batch["max_tokens"] = _column(like, max_tokens)
    return out


def results_from_batch(batch: Any, rewards: Sequence[float], lengths: Sequence[int], step: int, prompt_id_key: str = "prompt_id") -> list[dict]:
    """The rows `observe` takes, one per rollout, keyed by group id and seed (idempotent)."""
    nt = batch.non_tensor_batch
    return [
        {
            "prompt_id": str(pid),
            "step": step,
            "reward": float(r),
            "tokens": int(t),
            "rollout_id": f"{uid}@{seed}",
        }
        for pid, uid, seed, r, t in zip(nt[prompt_id_key], nt["uid"], nt["rollout_seed"], rewards, lengths)
    ]
