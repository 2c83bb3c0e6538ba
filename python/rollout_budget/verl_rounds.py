"""verl: one step planned and generated in rounds (``rollout_budget.rounds`` > 1).

The patched `RayPPOTrainer.fit` generates through `rollout_budget.verl.generate_in_rounds`
(python/patches/verl-b178a3c.patch). With rounds, `expand_batch` leaves the batch one row per
prompt (`prompt_rows`) and `generate_rounds` runs the step's rounds there, inside fit's "gen"
timer and before its `sleep_replicas()` (the rollout replicas stay awake between rounds):

- the rule is `run_rounds`' (rounds.py): each round plans what is left of the step's budgets
  with ``rounds_left``, later rounds with each prompt's rewards so far as ``partial_rewards``;
  a round's rollouts join the prompt's group (same uid = group id, later rollout indices and
  seeds); the step's results are observed once, after its last round;
- a round: the prompt rows of its rollouts (`DataProto.select_idxs`, both the batch and fit's
  generation batch, each rollout's ids in ``extra_info["rollout_budget"]``), generated with the
  trainer's own call (`async_rollout_manager.generate_sequences`, as fit makes it), and its
  reward computed as fit computes the step's (`ray_trainer.py:1466–1484`: the reward model when
  ``use_rm``, then `self._compute_or_extract_reward` with `self.reward_fn`);
- the reward is computed once: each round's output keeps it as ``rm_scores`` (with
  ``reward_extra_keys`` in its meta_info), verl's own sign that a reward is already there
  (the reward loop's output, `agent_loop.py:763–798`): fit's reward step then skips the reward
  model and `_compute_or_extract_reward` extracts it (`ray_trainer.py:505–517`). With the
  reward loop (``reward_model.use_reward_loop``, verl's default) generation already gives
  ``rm_scores``, which is extracted, not computed again. With
  ``reward_model.launch_reward_fn_async`` too: `compute_reward_async` runs the reward manager,
  and verl's own (naive, dapo, batch, prime) return the batch's ``rm_scores`` first
  (`AbstractRewardManager._extract_reward_from_rm_scores`, `abstract.py:47–72`); a custom one
  that does not would compute it again;
- a reward model the rounds call themselves (``use_rm``, no ``rm_scores`` from generation) must
  not share the rollout's GPUs: fit scores only after `sleep_replicas()` has freed the rollout
  engine's memory, and a round scores while it is awake. Unless
  ``reward_model.enable_resource_pool`` (the reward model on its own GPUs), that is a
  ValueError at the first round, naming the setting;
- every round's Σ n is a multiple of the agent-loop workers (`AgentLoopManager.generate_sequences`
  chunks each call over them, `agent_loop.py:961`, and `DataProto.chunk` asserts equal parts)
  and of a reward model's parallelism (`verl_multiple.reward_model_multiple_of`: each round is scored apart),
  and the step's a multiple of the trainer's whole multiple (`infer_multiple_of` or the
  ``multiple_of`` setting): `rounds.StepTotal` with ``each``. Where the last round cannot
  bring the total to a multiple (every prompt at ``max_n``, or new prompts' ``min_n`` above the
  cut), rows are left out of training down to the multiple below, with a warning, as verl's
  DAPO recipe cuts its batch to size: the last ones whose group keeps two or more (no group left
  with one), else the last; their results are observed all the same;
- the rounds' batches are joined with `DataProto.concat` (their timing merged: the least of
  each ``/min``, the most of each ``/max``, ``/mean`` weighted by the rounds' rollouts, the
  slowest rollout's figures from its round), one row per rollout, and returned to fit, which
  goes on as before (union, balance, log-probs, advantages over the whole batch).

Not combinable, a ValueError at the first step: ``algorithm.adv_estimator=remax`` (fit
generates its greedy baseline from the generation batch, one row per prompt here, and joins it
to the batch of rollouts), a ``multiple_of`` that the agent-loop workers do not divide, and a
trainer without the async rollout mode (always on at b178a3c: the patch routes only that call).
"""

from __future__ import annotations

import logging

from .rounds import StepTotal, run_rounds
from .verl_multiple import _lcm, reward_model_multiple_of

__all__ = ["generation_multiple_of", "check_rounds", "prompt_rows", "generate_rounds"]

_log = logging.getLogger("rollout_budget")


def generation_multiple_of(trainer):
    """What each round's rows must divide into: the agent-loop workers its generation call is
    chunked over (1 without an agent-loop manager), and the reward model's parallelism, which
    scores each round apart (`reward_model_multiple_of`)."""
    workers = getattr(getattr(trainer, "async_rollout_manager", None), "agent_loop_workers", None)
    return _lcm([len(workers) if workers else 1, reward_model_multiple_of(trainer)])


def check_rounds(trainer, settings, multiple_of, config_get):
    """At the first step with rounds: ValueError for what rounds cannot run with (see the module
    doc); `config_get(*path)` reads the trainer config. Returns each round's multiple."""
    if not getattr(trainer, "async_rollout_mode", True):
        # Never so at b178a3c ("sync mode is deprecated", ray_trainer.py:897–898): the patch routes only the agent loop's call.
        raise ValueError("rollout_budget.rounds %d needs verl's async rollout mode (the agent loop), whose generation call the "
                         "patch routes through generate_in_rounds; set rounds to 1" % settings.rounds)
    estimator = config_get("algorithm", "adv_estimator")
    if str(getattr(estimator, "value", estimator)).lower() == "remax":
        raise ValueError("rollout_budget.rounds %d with algorithm.adv_estimator remax: fit generates REMAX's greedy baseline "
                         "from the generation batch in one call, which with rounds holds one row per prompt, not per rollout; "
                         "set rounds to 1 or use another estimator" % settings.rounds)
    each = generation_multiple_of(trainer)
    if multiple_of % each:
        scorer = reward_model_multiple_of(trainer)
        if scorer == 1:
            what = "the %d agent-loop workers each round's generation is split over" % each
        else:
            what = "%d, which each round must divide into (its generation split over the agent-loop workers, its reward over the " \
                   "reward model's %d)" % (each, scorer)
        raise ValueError("rollout_budget.multiple_of %d is not a multiple of %s (rounds %d): set multiple_of to a multiple of %d, "
                         "e.g. %d, or leave it out"
                         % (multiple_of, what, settings.rounds, each, _lcm([multiple_of, each])))
    return each


def prompt_rows(adapter, batch, step):
    """`expand_batch` with rounds: `batch` one row per prompt (a prompt's second row dropped),
    uid = the plan's group id; the step's prompts kept on `adapter` for `generate_rounds`."""
    import numpy as np

    ids, first, candidates = adapter.candidates(batch)
    rows = sorted(first.values())
    out = batch.select_idxs(np.array(rows, dtype=np.int64))
    out.non_tensor_batch["uid"] = np.array(["%d/%s" % (step, ids[i]) for i in rows], dtype=object)
    adapter.step_prompts = (step, [ids[i] for i in rows], candidates, len(batch))
    return out


def generate_rounds(adapter, trainer, batch, gen_batch, generate_sequences):
    """The step's rounds (see the module doc) on `batch` and `gen_batch` from `prompt_rows` and
    fit's `_get_gen_batch`; returns (batch, generation output), one row per rollout each."""
    import numpy as np

    step, ids, candidates, batch_rows = adapter.step_prompts
    row_of = {pid: i for i, pid in enumerate(ids)}
    infos = list(batch.non_tensor_batch["extra_info"]) if "extra_info" in batch.non_tensor_batch else [None] * len(batch)
    sides, outs, timings = [], [], []

    def generate_rows(rows):
        # int64: select_idxs makes a list an int32 tensor, which torch before 2.0 cannot index with.
        idx = np.array([row_of[r["prompt_id"]] for r in rows], dtype=np.int64)
        extra = np.empty(len(rows), dtype=object)
        extra[:] = [dict(infos[i], **{adapter.info_key: r}) if isinstance(infos[i], dict) else {adapter.info_key: r} for i, r in zip(idx, rows)]
        uids = np.array([r["group_id"] for r in rows], dtype=object)
        side, gen, full = batch.select_idxs(idx), gen_batch.select_idxs(idx), batch.select_idxs(idx)
        # select_idxs shares the batch's meta_info, and union writes into it: `full` gets its own.
        full.meta_info = dict(full.meta_info)
        for part in (side, gen, full):
            if part is not gen or "extra_info" in part.non_tensor_batch:
                part.non_tensor_batch["extra_info"] = extra
            if part is not gen or "uid" in part.non_tensor_batch:
                part.non_tensor_batch["uid"] = uids
        out = generate_sequences(gen)
        timing = out.meta_info.pop("timing", None)
        if timing is not None:
            timings.append((len(rows), timing))
        scores, mask = _round_reward(trainer, full.union(out), out)
        sides.append(side)
        outs.append(out)
        return [{"reward": adapter.settings.reward_of(s, "rollout %s" % r["rollout_id"]), "tokens": int(t)}
                for r, s, t in zip(rows, scores.sum(dim=-1).tolist(), mask.sum(dim=-1).tolist())]

    s = adapter.settings
    options = dict(s.options)
    options["step"] = step
    budget_r = adapter.budget_of(batch_rows)
    k = adapter.multiple_of
    client = StepTotal(adapter.client, k if k > 1 else None, budget_r, each=adapter.each if adapter.each > 1 else None)
    done = run_rounds(client, candidates, generate_rows, budget_rollouts=budget_r, budget_tokens=s.budget_tokens,
                      rounds=s.rounds, **options)
    adapter.last_rounds, adapter.last_candidates = done, len(candidates)
    adapter.last_plan = done.plans[-1]
    if not outs:
        raise RuntimeError("rollout_budget: the plans for step %d give this batch no rollouts in %d rounds (budget %s)"
                           % (step, s.rounds, done.plans[0]["budget"]))
    side, out = type(batch).concat(sides), type(batch).concat(_aligned(outs))
    if timings:
        out.meta_info["timing"] = _merged_timing(timings)
    total = len(out)
    if k > 1 and total % k:
        keep = total - total % k
        if keep == 0:
            raise RuntimeError("rollout_budget: step %d generated %d rollouts in %d rounds, fewer than multiple_of %d (%s), which "
                               "verl needs to split the batch: raise the budget or max_n, or set rounds to 1"
                               % (step, total, s.rounds, k, adapter.multiple_why))
        _log.warning("rollout-budget: step %d: %d rollouts in %d rounds, not a multiple of multiple_of %d: %d are left "
                     "out of training (their results are observed)", step, total, s.rounds, k, total - keep)
        kept = _rows_kept(list(side.non_tensor_batch["uid"]), total - keep)
        side, out = side.select_idxs(kept), out.select_idxs(kept)
    return side, out


def _rows_kept(uids, drop):
    """The rows kept (indices, in order) when `drop` rows are left out: the last ones whose group
    keeps two or more, so no group is left with one (GRPO gives a group of one its raw score as
    its advantage, and grpo_passk refuses it); where that cannot make up `drop`, the last rows."""
    import numpy as np

    left = {}
    for u in uids:
        left[u] = left.get(u, 0) + 1
    dropped = set()
    for i in range(len(uids) - 1, -1, -1):
        if len(dropped) == drop:
            break
        if left[uids[i]] > 2:
            left[uids[i]] -= 1
            dropped.add(i)
    for i in range(len(uids) - 1, -1, -1):
        if len(dropped) == drop:
            break
        dropped.add(i)
    return np.array([i for i in range(len(uids)) if i not in dropped], dtype=np.int64)


def _round_reward(trainer, full, out):
    """One round's reward as fit computes the step's (`ray_trainer.py:1466–1484`), on `full`
    (the round's batch joined with its output `out`), kept in `out` as ``rm_scores`` (with the
    reward's extra infos and ``reward_extra_keys``) unless it is there already (the reward
    loop's or the reward model's). Returns (token-level scores, response mask)."""
    import numpy as np

    if "response_mask" not in full.batch.keys():
        from verl.trainer.ppo.ray_trainer import compute_response_mask  # fit's own (ray_trainer.py:1449)

        full.batch["response_mask"] = compute_response_mask(full)
    if getattr(trainer, "use_rm", False) and "rm_scores" not in full.batch.keys():
        from .verl_multiple import _get

        if not _get(trainer.config, "reward_model", "enable_resource_pool"):
            raise ValueError("rollout_budget.rounds with a reward model on the rollout's GPUs (reward_model.enable_resource_pool "
                             "false): each round would run it while the rollout engine still holds its memory (fit runs it "
                             "only after sleep_replicas()); set reward_model.enable_resource_pool=True to give it GPUs of its "
                             "own, or set rounds to 1")
        scorer = trainer.reward_loop_manager if getattr(trainer, "use_reward_loop", False) else trainer.rm_wg
        rm = scorer.compute_rm_score(full)
        full = full.union(rm)
        for key in rm.batch.keys():
            out.batch[key] = rm.batch[key]
        # The reward loop's extra infos (RewardLoopManager.compute_rm_score: non-tensors and
        # reward_extra_keys) go with its rm_scores: fit extracts them by those keys.
        for key, values in rm.non_tensor_batch.items():
            out.non_tensor_batch[key] = values
        if "reward_extra_keys" in rm.meta_info:
            out.meta_info["reward_extra_keys"] = list(rm.meta_info["reward_extra_keys"])
    scores, extra = trainer._compute_or_extract_reward(full, reward_fn=trainer.reward_fn, reward_for_val=False)
    if "rm_scores" not in out.batch.keys():
        out.batch["rm_scores"] = scores
        for key, values in extra.items():
            out.non_tensor_batch[key] = np.array(values)
        out.meta_info["reward_extra_keys"] = list(extra)
    return scores, full.batch["response_mask"]


def _aligned(outs):
    """The rounds' outputs, made joinable by `DataProto.concat`, which takes the first one's
    non-tensor keys and asserts the others' are among them, and asserts equal meta_info values:
    a round's generation has a column only for the extra fields its own rows have (a tool
    agent's ``turn_scores``: `AgentLoopWorker._postprocess`, `agent_loop.py:786–791`), and
    its reward's extra keys are its own. A column a round lacks is None for its rows, as verl
    fills a row that lacks a field; ``reward_extra_keys`` is the union, in order."""
    import numpy as np

    present = {}
    for out in outs:
        for key, values in out.non_tensor_batch.items():
            present.setdefault(key, values)
    extra = list(dict.fromkeys(k for out in outs for k in out.meta_info.get("reward_extra_keys", ())))
    for out in outs:
        for key, like in present.items():
            if key not in out.non_tensor_batch:
                # As many dimensions as the rounds that have it (numpy makes equal-length lists 2-D).
                column = np.empty((len(out),) + like.shape[1:], dtype=object)
                column[...] = None
                out.non_tensor_batch[key] = column
        if extra:
            out.meta_info["reward_extra_keys"] = list(extra)
    return outs


def _merged_timing(timings):
    """The step's generation timing from its rounds' (`AgentLoopManager._performance_metrics`,
    `agent_loop.py:979–1003`), each given as (rollouts, timing): see the module doc."""
    slowest = max(timings, key=lambda t: t[1].get("agent_loop/slowest/generate_sequences", 0) + t[1].get("agent_loop/slowest/tool_calls", 0))[1]
    out = {}
    for key in dict.fromkeys(k for _, t in timings for k in t):
        values = [(n, t[key]) for n, t in timings if key in t]
        if key.endswith("/min"):
            out[key] = min(v for _, v in values)
        elif key.endswith("/max"):
            out[key] = max(v for _, v in values)
        elif key.endswith("/mean"):
            out[key] = sum(n * v for n, v in values) / max(1, sum(n for n, _ in values))
        else:
            out[key] = slowest.get(key, values[-1][1])
    return out
