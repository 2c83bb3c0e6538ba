"""What a verl trainer's Σ n must divide into (rollout_budget.verl's ``multiple_of``): its workers,
data-parallel ranks, PPO mini-batch and reward model, read from the trainer and its config."""

from __future__ import annotations

import math

__all__ = ["infer_multiple_of", "multiple_parts", "reward_model_multiple_of"]


def _lcm(values):
    out = 1
    for v in values:
        if v and v > 0:
            out = out * int(v) // math.gcd(out, int(v))
    return out


def infer_multiple_of(trainer):
    """What Σ n must divide into for this trainer: lcm of its agent-loop workers (async mode:
    `AgentLoopManager.generate_sequences` chunks the batch over them) and the data-parallel
    sizes of the actor and, with a critic, the critic (dispatch chunks, `_balance_batch`), and
    with a reward model its parallelism (`reward_model_multiple_of`), and the PPO mini-batch in
    rollouts, ``ppo_mini_batch_size × rollout.n`` of the actor (and critic), with every worker
    implementation. verl's uniform batch (train_batch_size × n) is always a multiple of it; a
    plan's Σ n need not be:
    - the legacy workers (verl's default, ``use_legacy_worker_impl=auto``) scale it to rows per
      data-parallel rank (`fsdp_workers.py:241–242`, `megatron_workers.py:354–355`). Megatron's
      `make_minibatch_iterator` asserts the rank's rows divide into it (`protocol.py:827`:
      ``AssertionError: 9 % 8 != 0``); FSDP's `update_policy` splits them
      (`dp_actor.py:541`), so a remainder took an optimizer step of its own, and a short
      micro-batch's rollouts a larger loss weight (`dp_actor.py:577–578`);
    - the engine workers (``disable``) pass it as `mini_batch_size` (`ray_trainer.py:1246–1255`),
      and `tensordict_utils.make_iterator` asserts the same (`tensordict_utils.py:525`)."""
    return _lcm(v for _, v in multiple_parts(trainer))


def multiple_parts(trainer):
    """What `infer_multiple_of` takes the lcm of, as (what, how many) pairs: the error messages
    say where a step's multiple comes from."""
    parts = []
    n = _get(trainer.config, "actor_rollout_ref", "rollout", "n") or 1
    roles = [("actor", ("actor_rollout_ref", "actor"))] + ([("critic", ("critic",))] if getattr(trainer, "use_critic", False) else [])
    for role, path in roles:
        mini = _get(trainer.config, *path, "ppo_mini_batch_size")
        if mini:
            parts.append(("the %s's ppo_mini_batch_size %d × rollout.n %d" % (role, int(mini), int(n)), int(mini) * int(n)))
    manager = getattr(trainer, "async_rollout_manager", None)
    workers = getattr(manager, "agent_loop_workers", None)
    if workers is not None:
        parts.append(("the agent-loop workers", len(workers)))
    get_dp = getattr(trainer, "_get_dp_size", None)
    if get_dp is not None:
        if getattr(trainer, "actor_rollout_wg", None) is not None:
            parts.append(("the actor's data-parallel size", get_dp(trainer.actor_rollout_wg, "actor")))
        if getattr(trainer, "use_critic", False) and getattr(trainer, "critic_wg", None) is not None:
            parts.append(("the critic's data-parallel size", get_dp(trainer.critic_wg, "critic")))
    parts.append(("the reward model's parallelism", reward_model_multiple_of(trainer)))
    return [(what, v) for what, v in parts if v and v > 1]


def reward_model_multiple_of(trainer):
    """What a batch scored by the trainer's reward model must divide into (1 without one): fit's
    reward step (`ray_trainer.py:1468–1473`) sends it to `rm_wg.compute_rm_score`, dispatched
    over the reward mesh's data-parallel ranks (`fsdp_workers.py:1926`, `DataProto.chunk`
    asserts equal parts), or with the reward loop to `RewardLoopManager.compute_rm_score`, which
    chunks it over its workers (`reward_loop.py:285`)."""
    if not getattr(trainer, "use_rm", False):
        return 1
    if getattr(trainer, "use_reward_loop", False):
        workers = getattr(getattr(trainer, "reward_loop_manager", None), "reward_loop_workers", None)
        return len(workers) if workers else 1
    get_dp = getattr(trainer, "_get_dp_size", None)
    if get_dp is None or getattr(trainer, "rm_wg", None) is None:
        return 1
    return get_dp(trainer.rm_wg, "reward")


def _get(config, *path):
    for key in path:
        if config is None:
            return None
        config = config.get(key) if hasattr(config, "get") else getattr(config, key, None)
    return config
