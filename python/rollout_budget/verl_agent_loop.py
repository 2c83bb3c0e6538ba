"""verl agent loops that sample each rollout with the plan's seed.

verl's `AgentLoopWorker.generate_sequences` (verl/experimental/agent_loop/agent_loop.py:428, b178a3c)
builds one ``sampling_params`` for the whole batch and passes each row's non-tensor fields to the
agent loop's ``run`` as keyword arguments (agent_loop.py:475). With python/patches/verl-b178a3c.patch
each row is one rollout, and its ``extra_info["rollout_budget"]`` holds the rollout's ids, its
``seed`` among them (rollout_budget.verl). The loops here are verl's own single-turn and tool
agent loops with one change: ``run`` gets a copy of ``sampling_params`` with that seed under the
key the rollout server reads, so each rollout samples with its own seed:

- ``rollout.name=vllm``: ``seed``, which verl's vLLM server passes to ``SamplingParams``
  (verl/workers/rollout/vllm_rollout/vllm_async_server.py:482): the rollout's tokens follow from
  its seed whatever else is in the batch;
- ``rollout.name=sglang``: ``sampling_seed``, which verl's SGLang server sends in the request's
  sampling params (verl/workers/rollout/sglang_rollout/async_sglang_server.py:439); SGLang samples
  with it only when launched with deterministic inference, otherwise it is sent and unused;
- any other rollout: the params as they were (logged once).

A row without the ids (validation, or a batch the patch did not expand) keeps the params as they
were. Used through verl's config (the names are this module's, registered by the file
``agent_loops.yaml`` beside it)::

    actor_rollout_ref.rollout.agent.agent_loop_config_path=$(python -m rollout_budget.verl_agent_loop)
    actor_rollout_ref.rollout.agent.default_agent_loop=rollout_budget_single_turn

(``rollout_budget_tool`` for verl's ``tool_agent``). The classes are made from verl's on first
use (``SeededSingleTurnAgentLoop``, ``SeededToolAgentLoop``), so this module imports without verl.
"""

from __future__ import annotations

import logging
import os

CONFIG_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "agent_loops.yaml")
"""The agent-loop config file for ``actor_rollout_ref.rollout.agent.agent_loop_config_path``."""

SEED_KEYS = {"vllm": "seed", "sglang": "sampling_seed"}
"""The sampling-params key of a request's seed, by ``actor_rollout_ref.rollout.name``."""

_log = logging.getLogger("rollout_budget")
_warned = set()

# verl's loops these wrap: (module, class) by the name of the class made here.
_BASES = {
    "SeededSingleTurnAgentLoop": ("verl.experimental.agent_loop.single_turn_agent_loop", "SingleTurnAgentLoop"),
    "SeededToolAgentLoop": ("verl.experimental.agent_loop.tool_agent_loop", "ToolAgentLoop"),
}
_made = {}


def rollout_seed(kwargs):
    """The plan's seed of the rollout whose row fields are ``kwargs`` (an agent loop's ``run``
    keyword arguments), or None when the row has no rollout-budget ids."""
    extra = kwargs.get("extra_info")
    ids = extra.get("rollout_budget") if isinstance(extra, dict) else None
    seed = ids.get("seed") if isinstance(ids, dict) else None
    if seed is None:
        return None
    if isinstance(seed, bool) or int(seed) != seed:
        raise ValueError("extra_info['rollout_budget']['seed'] is %r, not an integer" % (seed,))
    return int(seed)


def seeded_params(sampling_params, rollout_name, kwargs):
    """``sampling_params`` with the rollout's seed for the server ``rollout_name`` (a copy when
    a seed is added; the batch's dict is shared by all its rows)."""
    seed = rollout_seed(kwargs)
    if seed is None:
        return sampling_params
    key = SEED_KEYS.get(rollout_name)
    if key is None:
        if rollout_name not in _warned:
            _warned.add(rollout_name)
            _log.warning("rollout-budget: actor_rollout_ref.rollout.name=%s: the agent loop passes the plan's seeds to "
                         "vllm (seed) and sglang (sampling_seed) only; this rollout samples without them", rollout_name)
        return sampling_params
    params = dict(sampling_params)
    params[key] = seed
    return params


class SeedFromPlan:
    """Mixin for a verl agent loop (before the loop's class in the bases): ``run`` samples with
    the rollout's seed (`seeded_params`). Reads the rollout's name from ``self.config``, the
    trainer config verl gives every agent loop."""

    async def run(self, sampling_params, **kwargs):
        name = self.config.actor_rollout_ref.rollout.name
        return await super().run(seeded_params(sampling_params, name, kwargs), **kwargs)


def seeded_loop(base, name=None):
    """A class that is ``base`` (a verl agent loop class) with `SeedFromPlan`'s ``run``."""
    name = name or "Seeded" + base.__name__
    return type(name, (SeedFromPlan, base), {"__module__": __name__, "__qualname__": name})


def __getattr__(name):
    # The classes verl's config names (agent_loops.yaml), made from verl's on first use.
    if name not in _BASES:
        raise AttributeError("module %r has no attribute %r" % (__name__, name))
    if name not in _made:
        import importlib

        module, cls = _BASES[name]
        _made[name] = seeded_loop(getattr(importlib.import_module(module), cls), name)
    return _made[name]


if __name__ == "__main__":
    print(CONFIG_PATH)
