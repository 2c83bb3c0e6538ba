"""A step's figures for a trainer's logger (wandb, TensorBoard, the console): what was planned, what
it bought, and what the allocator cost, under ``rollout_budget/`` names.

The group figures are the replay's (src/replay/metrics.ts), on one step: a group is a prompt's
rollouts in the step (every round's), an *informative* group one whose rewards are not all equal
(GRPO and RLOO give every rollout of any other group a zero advantage), and the *effective
ratio* the share of the step's rollouts in informative groups (Knapsack RL's sample-weighted
ratio). A group without variance is *all correct* when its mean reward is ≥ 0.5, else *all
wrong*. Aborted rollouts (``finish_reason`` "abort") have no reward and count only as aborted.

======================================  ==============================================================
name (each under ``rollout_budget/``)   what it holds
======================================  ==============================================================
``candidates``                          prompts offered to the step (given by the caller)
``prompts``                             prompts with at least one rollout that is not aborted
``rollouts``                            rollouts with a reward (not aborted)
``aborted``                             aborted rollouts (no reward; resumed at a later step)
``rounds``                              plans that gave rollouts (a round that planned none is not one)
``n_min`` / ``n_mean`` / ``n_max``      rollouts a prompt got, over ``prompts``
``informative_groups``                  groups whose rewards are not all equal
``informative_group_ratio``             ``informative_groups`` / ``prompts``
``effective_ratio``                     rollouts in informative groups / ``rollouts``
``all_correct_ratio``                   groups without variance with mean reward ≥ 0.5, / ``prompts``
``all_wrong_ratio``                     groups without variance with mean reward < 0.5, / ``prompts``
``applied``                             results the step's observe applied (its summary's)
``duplicates``                          results observed before, not applied again (a resumed run)
``plan_s`` / ``observe_s``              seconds the step's plan calls / its observe took
======================================  ==============================================================

A ratio over no groups or rollouts is left out (it has no value), as are ``applied`` and
``duplicates`` when the step observed nothing, the seconds when they were not timed, and
``candidates`` when not given (a plan's allocations list only the prompts it gives rollouts).
"""

from __future__ import annotations

import time

__all__ = ["step_metrics", "TimedClient", "PREFIX"]

#: The prefix of every name `step_metrics` returns.
PREFIX = "rollout_budget/"


def _varies(rewards):
    return any(r != rewards[0] for r in rewards)


def step_metrics(plans, results, summary=None, seconds=None, candidates=None):
    """The step's figures (the module doc's table) as ``{"rollout_budget/<name>": number}``.

    `plans`: the step's plans, one a round, in order. `results`: what the step observed, one
    per rollout (``prompt_id``, ``reward`` in [0, 1], optional ``finish_reason``), as
    `results_rows` makes them. `summary`: observe's answer (``applied``, ``duplicates``), or
    None. `seconds`: ``{"plan": s, "observe": s}`` (TimedClient.seconds), or None.
    `candidates`: how many prompts the step was offered, or None. O(rollouts)."""
    groups = {}
    aborted = 0
    for r in results:
        if r.get("finish_reason") == "abort":
            aborted += 1
        else:
            groups.setdefault(r["prompt_id"], []).append(float(r["reward"]))
    sizes = [len(g) for g in groups.values()]
    rollouts = sum(sizes)
    out = {} if candidates is None else {"candidates": int(candidates)}
    out.update({
        "prompts": len(groups),
        "rollouts": rollouts,
        "aborted": aborted,
        "rounds": sum(1 for p in plans if p["totals"]["rollouts"] > 0),
    })
    if groups:
        informative = [g for g in groups.values() if _varies(g)]
        flat = [g for g in groups.values() if not _varies(g)]
        out.update({
            "n_min": min(sizes), "n_mean": rollouts / len(groups), "n_max": max(sizes),
            "informative_groups": len(informative),
            "informative_group_ratio": len(informative) / len(groups),
            "effective_ratio": sum(len(g) for g in informative) / rollouts,
            "all_correct_ratio": sum(1 for g in flat if g[0] >= 0.5) / len(groups),
            "all_wrong_ratio": sum(1 for g in flat if g[0] < 0.5) / len(groups),
        })
    else:
        out["informative_groups"] = 0
    if isinstance(summary, dict):
        for key in ("applied", "duplicates"):
            if isinstance(summary.get(key), int):
                out[key] = summary[key]
    if seconds is not None:
        out["plan_s"] = seconds.get("plan", 0.0)
        out["observe_s"] = seconds.get("observe", 0.0)
    return {PREFIX + k: v for k, v in out.items()}


class TimedClient:
    """A service client (HttpClient, StdioClient, Cli) whose ``plan`` and ``observe`` calls add
    their wall-clock seconds to ``seconds``; every other attribute is the client's. `reset()`
    starts a new step's count."""

    def __init__(self, client):
        self.client = client
        self.seconds = {"plan": 0.0, "observe": 0.0}

    def reset(self):
        self.seconds = {"plan": 0.0, "observe": 0.0}

    def _timed(self, kind, call, args, kwargs):
        start = time.perf_counter()
        try:
            return call(*args, **kwargs)
        finally:
            self.seconds[kind] += time.perf_counter() - start

    def plan(self, *args, **kwargs):
        return self._timed("plan", self.client.plan, args, kwargs)

    def observe(self, *args, **kwargs):
        return self._timed("observe", self.client.observe, args, kwargs)

    def __getattr__(self, name):
        if name == "client":  # not set yet (a copy being made): no recursion
            raise AttributeError(name)
        return getattr(self.client, name)
