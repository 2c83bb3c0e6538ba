"""slime adapter: turn a rollout-budget plan into slime sample groups (standard library only).

slime's rollout works on groups of `Sample`s (one group per prompt, `group_index` and
`index` set, `n_samples_per_prompt` copies). With a plan each prompt gets its own group size:
`plan_groups(samples_by_prompt, plan)` deep-copies each prompt's template sample n times and
sets `group_index`, `index`, and, in `metadata`, `rollout_seed` (group seed + j, slime's
seed rule), `max_tokens` and `group_id`. Use it in a custom rollout function
(`--rollout-function-path`) before generation. Works on slime `Sample` objects and on dicts.
"""
from __future__ import annotations

import copy
import os
import sys
from typing import Any, Mapping

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from rollout_budget_cli import StepPlan  # noqa: E402


def _set(sample: Any, key: str, value: Any) -> None:
    if isinstance(sample, dict):
        sample[key] = value
    else:
        setattr(sample, key, value)


def _metadata(sample: Any) -> dict:
    meta = sample.get("metadata") if isinstance(sample, dict) else getattr(sample, "metadata", None)
    if meta is None:
        meta = {}
        _set(sample, "metadata", meta)
    return meta


def plan_groups(samples_by_prompt: Mapping[str, Any], plan: StepPlan) -> list[list[Any]]:
    """One list of samples per planned group (n > 0), in plan order; indices run over all samples."""
    out: list[list[Any]] = []
    index = 0
    for group_index, g in enumerate(plan.groups):
        if g.prompt_id not in samples_by_prompt:
            raise KeyError(f"prompt {g.prompt_id!r} of the plan has no sample template")
        group = []
        for j in range(g.n):
            s = copy.deepcopy(samples_by_prompt[g.prompt_id])
            _set(s, "group_index", group_index)
            _set(s, "index", index)
            meta = _metadata(s)
            meta.update({"rollout_seed": g.seed + j, "max_tokens": g.max_tokens, "group_id": g.group_id})
            group.append(s)
            index += 1
        out.append(group)
    return out
