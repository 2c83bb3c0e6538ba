"""verl integration: per-prompt rollouts from a rollout-budget plan in `RayPPOTrainer.fit`.

python/patches/verl-b178a3c.patch makes the smallest change to verl's
`verl/trainer/ppo/ray_trainer.py` (b178a3c): after `fit` gives the batch its uids it calls
`expand_batch(self, batch)`, takes the expanded batch as the generation batch instead of
`gen_batch.repeat(n)`, drops the second `batch.repeat(n)`, and calls `observe_batch(self, batch)`
once the reward is in `token_level_scores`. What `expand_batch` does to the batch:

- each row's prompt gets a stable id (`stable_prompt_id`: ``extra_info["index"]`` with the
  row's ``data_source``, else a hash of ``raw_prompt``), never verl's per-step ``uid``;
- one plan for the batch (budget: the batch's prompts × ``rollout.n`` unless set), with Σ n a
  multiple of the trainer's workers (agent-loop workers and actor data-parallel ranks: verl's
  `DataProto.chunk` asserts ``len(self) % chunks == 0``, `_balance_batch` splits equal parts);
- ``uid`` = the plan's group id, so GRPO and RLOO (which group by ``uid``) see the plan's
  groups; row i repeated n_i times with `DataProto.sample_level_repeat` (n = 0 drops it, as
  does a prompt the plan leaves out or a repeat of a prompt already in the batch);
- each rollout's ids in ``extra_info["rollout_budget"]`` (prompt_id, group_id, rollout_index,
  rollout_id, seed, step, group): `_get_gen_batch` keeps ``extra_info`` (with
  ``data_source``, ``reward_model`` and ``uid``) in the batch and moves every other
  non-tensor key into the generation batch, so that is where the ids survive generation.
`observe_batch` posts one result per row (reward = the row's summed ``token_level_scores``,
tokens = its ``response_mask`` sum), keyed by rollout id (idempotent), with the prompt's group.

Checkpoints: with a SQLite state file known (``backup_state``, by default ``url`` when that is
a state path), the state is copied into each checkpoint folder verl saves, as
``<default_local_dir>/global_step_<N>/rollout-budget.db``, holding the results up to step N:
after the observe of a step `fit` will save (``save_freq``, the last step), and at the next
step's plan for a folder saved otherwise (an ESI expiration). A run resumed from a checkpoint
with a copy puts the copy back before its first plan when it runs the state itself (``url`` is
the state path) and nothing else has it open, else logs how to (see `resume_state`).

Rounds (``rounds`` above 1; default 1): the patch also routes fit's generation call through
`generate_in_rounds(self, batch, gen_batch_output, <fit's generate_sequences>)`, which returns
``(batch, gen_batch_output)``. With one round it is fit's call as it was (the batch expanded by
`expand_batch`, one plan). With rounds, `expand_batch` leaves one row per prompt (uid = the
plan's group id) and `generate_in_rounds` plans, generates and rewards each round with the
trainer's own generation and reward, later rounds seeing the rewards so far as
``partial_rewards``, and returns every round's rollouts in one batch, each prompt's rollouts of
all rounds under one uid; their results are observed after the last round, and `observe_batch`
then only copies the state for a checkpoint. Details, and what rounds cannot run with:
rollout_budget.verl_rounds.

Settings: rollout_budget.config (the trainer config's ``rollout_budget`` section, else
ROLLOUT_BUDGET_* variables). numpy is imported only when a batch is expanded (verl has it).
"""

from __future__ import annotations

import os
import time

from .checkpoint import CHECKPOINT_COPY, check_copies, copy_state, resume_from_copy
from .client_common import RolloutBudgetError
from .config import settings_from
from .metrics import TimedClient
from .metrics import step_metrics as _step_metrics
from .plan import check_repeat, expand_plan, note_observed, note_planned, stable_prompt_id
from .verl_multiple import _get, _lcm, infer_multiple_of, multiple_parts, reward_model_multiple_of
from .verl_rounds import check_rounds, generate_rounds, prompt_rows

__all__ = ["expand_batch", "generate_in_rounds", "observe_batch", "step_metrics", "adapter_for", "infer_multiple_of",
           "multiple_parts", "VerlAdapter", "INFO_KEY", "CHECKPOINT_COPY", "copy_into_checkpoint", "resume_state"]

#: The key of each row's rollout ids inside ``extra_info``.
INFO_KEY = "rollout_budget"


def adapter_for(trainer):
    """The trainer's adapter, built once from its config and kept on it (a resumed run's state
    put back first: resume_state)."""
    adapter = getattr(trainer, "_rollout_budget", None)
    if adapter is None:
        settings = settings_from(_get(trainer.config, "rollout_budget"))
        if _get(trainer.config, "actor_rollout_ref", "actor", "use_prefix_grouper") and _get(trainer.config, "trainer", "balance_batch"):
            # ray_trainer.py:1120–1127 raises on a group count that dp does not divide, which the
            # plan's groups (skip, a repeated prompt) do not keep, at any step.
            raise ValueError("rollout_budget: actor_rollout_ref.actor.use_prefix_grouper with trainer.balance_batch: verl's "
                             "_balance_batch then needs the step's uid groups to be a multiple of the data-parallel size and "
                             "balances equal numbers of groups, which the plan's uneven groups do not keep (a ValueError at any "
                             "step); set trainer.balance_batch=False (a group split over ranks then has its prompt computed "
                             "once a part: prefix_grouper_utils.build_pg_from_micro_batch groups a uid's consecutive rows)")
        if settings.multiple_of is not None:
            multiple_of, why = settings.multiple_of, "rollout_budget.multiple_of"
        else:
            parts = multiple_parts(trainer)
            multiple_of, why = _lcm(v for _, v in parts), "the lcm of %s" % ", ".join("%s (%d)" % p for p in parts)
        if settings.budget_rollouts is not None and multiple_of > 1 and settings.budget_rollouts < multiple_of:
            raise ValueError("rollout_budget.budget_rollouts %d is below the step's multiple %d, %s: no step fits; raise it, or "
                             "set rollout_budget.multiple_of (what a smaller step does to verl's training: docs/trainers.md, "
                             "\"verl (b178a3c)\")" % (settings.budget_rollouts, multiple_of, why))
        each = check_rounds(trainer, settings, multiple_of, lambda *path: _get(trainer.config, *path)) if settings.rounds > 1 else 1
        check_copies(settings)
        resume_state(trainer, settings)
        adapter = VerlAdapter(
            settings.client(),
            rollout_n=int(_get(trainer.config, "actor_rollout_ref", "rollout", "n") or 1),
            max_tokens=_get(trainer.config, "actor_rollout_ref", "rollout", "response_length"),
            multiple_of=multiple_of,
            settings=settings,
        )
        adapter.each = each
        adapter.multiple_why = why
        trainer._rollout_budget = adapter
    return adapter


def expand_batch(trainer, batch):
    """Called by the patched `fit` right after the uids are set: the batch, one row per rollout
    (with rounds: one row per prompt, which `generate_in_rounds` expands round by round)."""
    adapter = adapter_for(trainer)
    step = int(trainer.global_steps)
    adapter.new_step()
    if adapter.observed_step == step - 1:
        # A checkpoint of the last step saved without our copy (an ESI expiration, which we do
        # not foresee): the state holds exactly the results up to it, observed by this run. A
        # folder of that name older than that observe is an earlier run's: left alone.
        copy_into_checkpoint(trainer, adapter.settings, step - 1, only_if_saved=True, since=adapter.observed_at)
    if adapter.settings.rounds > 1:
        return prompt_rows(adapter, batch, step)
    return adapter.expand(batch, step=step)


def generate_in_rounds(trainer, batch, gen_batch, generate_sequences):
    """Called by the patched `fit` in place of its generation call `generate_sequences(gen_batch)`
    (`batch` from `expand_batch`, `gen_batch` from `_get_gen_batch`): returns ``(batch, output)``,
    one row each per rollout. One round: ``(batch, generate_sequences(gen_batch))``, fit's call as
    it was. With rounds: the step's rounds (rollout_budget.verl_rounds)."""
    adapter = adapter_for(trainer)
    if adapter.settings.rounds == 1:
        return batch, generate_sequences(gen_batch)
    return generate_rounds(adapter, trainer, batch, gen_batch, generate_sequences)


def observe_batch(trainer, batch):
    """Called by the patched `fit` once ``token_level_scores`` is set: posts the step's results
    (with rounds, `generate_in_rounds` posted them after the last round), then copies the state
    for the checkpoint `fit` saves at the end of this step, if any."""
    adapter = adapter_for(trainer)
    summary = adapter.observe(batch) if adapter.settings.rounds == 1 else adapter.last_rounds.summary
    adapter.observed_step = int(trainer.global_steps)
    adapter.observed_at = time.time()
    if _saves_checkpoint(trainer):
        copy_into_checkpoint(trainer, adapter.settings, int(trainer.global_steps))
    return summary


def step_metrics(trainer):
    """Called by the patched `fit` right after `observe_batch`: the step's ``rollout_budget/*``
    figures (rollout_budget.metrics: rollouts a prompt got, informative groups, effective ratio,
    what the plan and observe calls took) for fit's ``metrics``, which its logger logs with
    verl's own. With rounds, over every round's rollouts."""
    adapter = adapter_for(trainer)
    if adapter.settings.rounds > 1:
        done = adapter.last_rounds
        plans, results, summary = (done.plans, done.results, done.summary) if done is not None else ([], [], None)
    else:
        plans = [adapter.last_plan] if adapter.last_plan is not None else []
        results, summary = adapter.last_results or [], adapter.last_summary
    return _step_metrics(plans, results, summary, adapter.timer.seconds, candidates=adapter.last_candidates)


def _saves_checkpoint(trainer):
    """Whether `fit` saves a checkpoint at the end of the current step (`ray_trainer.py:1645–1646`:
    ``save_freq > 0`` and the last step or a multiple of ``save_freq``; an ESI expiration is
    caught at the next step's plan)."""
    freq = _get(trainer.config, "trainer", "save_freq") or 0
    if int(freq) <= 0:
        return False
    step = int(trainer.global_steps)
    last = getattr(trainer, "total_training_steps", None)
    return step % int(freq) == 0 or (last is not None and step >= int(last))


def _checkpoint_folder(trainer, step):
    """verl's folder of the checkpoint at `step` (`_save_checkpoint`: ``default_local_dir`` made
    absolute from the working directory by `_load_checkpoint`)."""
    root = _get(trainer.config, "trainer", "default_local_dir")
    if not root:
        return None
    return os.path.join(os.path.abspath(str(root)), "global_step_%d" % step)


def copy_into_checkpoint(trainer, settings, step, only_if_saved=False, since=None):
    """Copies the state (``settings.backup_state``) to `step`'s checkpoint folder as
    CHECKPOINT_COPY (checkpoint.copy_state); with `only_if_saved`, only into a folder verl has
    saved that has no copy yet (and, with `since`, changed since that time). Returns the
    backup's summary, or None when nothing was copied."""
    folder = _checkpoint_folder(trainer, step) if step >= 1 else None
    if settings.backup_state is None or folder is None:
        return None
    out = os.path.join(folder, CHECKPOINT_COPY)
    if only_if_saved and (not os.path.isdir(folder) or os.path.exists(out)):
        return None
    if since is not None and os.path.getmtime(folder) < since - 1:
        return None
    return copy_state(settings, out, "step %d" % step)


def _resumed_folder(trainer):
    """The checkpoint folder `fit` resumed from (`_load_checkpoint`), or None for a new run."""
    if int(getattr(trainer, "global_steps", 0) or 0) <= 1:
        return None
    given = _get(trainer.config, "trainer", "resume_from_path")
    if _get(trainer.config, "trainer", "resume_mode") == "resume_path" and given:
        return os.path.abspath(str(given))
    return _checkpoint_folder(trainer, int(trainer.global_steps) - 1)


def resume_state(trainer, settings):
    """At the first plan of a run resumed from a checkpoint folder that holds a copy of the
    state: checkpoint.resume_from_copy. Returns what was done (None: a new run, or no copy)."""
    folder = _resumed_folder(trainer)
    if folder is None:
        return None
    return resume_from_copy(settings, os.path.join(folder, CHECKPOINT_COPY), folder)


#: How to get past a multiple the budget cannot reach (the errors of VerlAdapter.expand).
_MULTIPLE_HINT = (": raise budget_tokens or budget_rollouts, or set rollout_budget.multiple_of to the workers' multiple "
                  "(a step below one PPO mini-batch then trains as a shorter one with the FSDP workers; Megatron and the "
                  "engine workers assert whole mini-batches: docs/trainers.md, \"verl (b178a3c)\")")


def _column(batch, key):
    col = batch.non_tensor_batch.get(key)
    return [None] * len(batch) if col is None else list(col)


class VerlAdapter:
    """Plans a verl batch and reads its results back (see the module doc)."""

    #: The key of each row's rollout ids inside ``extra_info``.
    info_key = INFO_KEY

    def __init__(self, client, rollout_n=1, max_tokens=None, multiple_of=1, settings=None):
        #: The client, its plan and observe calls timed (``timer.seconds``) for step_metrics.
        self.timer = TimedClient(client)
        self.client = self.timer
        self.rollout_n = rollout_n
        self.max_tokens = max_tokens
        self.multiple_of = multiple_of
        self.settings = settings if settings is not None else settings_from({}, environ={})
        #: With rounds: each round's Σ n a multiple of this (the agent-loop workers; adapter_for sets it).
        self.each = 1
        #: Where multiple_of comes from, for the errors (adapter_for sets it).
        self.multiple_why = "multiple_of"
        #: The step's last plan (with rounds, its last round's), and with rounds the step's RoundsResult.
        self.last_plan = None
        self.last_rounds = None
        #: With one round: the results the step observed and observe's summary; the step's candidates (how many).
        self.last_candidates = None
        self.last_results = None
        self.last_summary = None
        #: The step whose results this run observed last (observe_batch), or None, and when.
        self.observed_step = None
        self.observed_at = None

    def new_step(self):
        """Forgets the last step's plans, results and timings (expand_batch, as a step starts)."""
        self.last_plan = self.last_rounds = self.last_results = self.last_summary = self.last_candidates = None
        self.timer.reset()

    def prompt_ids(self, batch):
        """Each row's stable prompt id (extra_info["index"] with data_source, else a hash of raw_prompt)."""
        infos = _column(batch, "extra_info")
        sources = _column(batch, "data_source")
        prompts = _column(batch, "raw_prompt")
        ids = []
        for i in range(len(batch)):
            try:
                ids.append(stable_prompt_id(prompt=prompts[i], data_source=sources[i], extra_info=infos[i]))
            except ValueError:
                raise ValueError("batch row %d has neither extra_info['index'] nor raw_prompt to identify its prompt" % i) from None
        return ids

    def candidates(self, batch):
        """(each row's prompt id, prompt id → its first row, the plan's candidates: one per prompt)."""
        ids = self.prompt_ids(batch)
        sources = _column(batch, "data_source")
        prompts = _column(batch, "raw_prompt")
        first = {}
        candidates = []
        for i, pid in enumerate(ids):
            if pid in first:
                check_repeat(pid, prompts[first[pid]], prompts[i], "batch rows %d and %d" % (first[pid], i))
                continue
            first[pid] = i
            c = {"id": pid}
            if self.max_tokens is not None:
                c["max_tokens"] = int(self.max_tokens)
            if sources[i] is not None:
                c["group"] = str(sources[i])
            candidates.append(c)
        return ids, first, candidates

    def budget_of(self, rows):
        """The step's rollouts: ``budget_rollouts``, else the uniform budget, the batch's `rows`
        (its prompt rows, train_batch_size) × rollout.n, also beside a token budget: the trainer's
        batch never grows past it. A prompt in the batch twice is one candidate, and its second
        row's rollouts go to the step's other prompts: the step stays verl's size, a multiple of
        its mini-batch (infer_multiple_of), where prompts × n was cut to the multiple below."""
        return self.settings.budget_rollouts if self.settings.budget_rollouts is not None else rows * self.rollout_n

    def expand(self, batch, step):
        """Plans `batch` (one row per prompt) and returns it with one row per planned rollout."""
        import numpy as np

        ids, first, candidates = self.candidates(batch)
        s = self.settings
        budget_r = self.budget_of(len(batch))
        options = dict(s.options)
        options["step"] = step
        try:
            plan = note_planned(self.client.plan(candidates, budget_rollouts=budget_r, budget_tokens=s.budget_tokens,
                                                 multiple_of=self.multiple_of if self.multiple_of > 1 else None, **options))
        except RolloutBudgetError as error:
            if error.code != "BUDGET_INFEASIBLE" or self.multiple_of <= 1:
                raise
            raise RuntimeError("rollout_budget: step %d cannot be planned: %s; the step's Σ n is a multiple of %d, %s%s"
                               % (step, error, self.multiple_of, self.multiple_why, _MULTIPLE_HINT)) from error
        self.last_plan, self.last_candidates = plan, len(candidates)
        n = {a["prompt_id"]: a["n"] for a in plan["allocations"]}
        repeats = [n.get(pid, 0) if first[pid] == i else 0 for i, pid in enumerate(ids)]
        if sum(repeats) == 0:
            why = ("; the step's Σ n is a multiple of %d, %s, which the budget does not reach%s"
                   % (self.multiple_of, self.multiple_why, _MULTIPLE_HINT)) if self.multiple_of > 1 else ""
            raise RuntimeError("rollout_budget: the plan for step %d gives this batch no rollouts (budget %s)%s" % (step, plan["budget"], why))
        rows = {}
        for row in expand_plan(plan, candidates):
            rows.setdefault(row["prompt_id"], []).append(row)
        # uid = the plan's group id, set per prompt row, then repeated with it.
        batch.non_tensor_batch["uid"] = np.array(["%d/%s" % (plan["step"], pid) for pid in ids], dtype=object)
        out = batch.sample_level_repeat(repeats)
        # np.repeat copies references: give every rollout its own extra_info dict.
        infos = _column(batch, "extra_info")
        expanded = []
        for i, pid in enumerate(ids):
            for row in rows.get(pid, [])[: repeats[i]]:
                info = dict(infos[i]) if isinstance(infos[i], dict) else {}
                info[INFO_KEY] = row
                expanded.append(info)
        col = np.empty(len(expanded), dtype=object)
        col[:] = expanded
        out.non_tensor_batch["extra_info"] = col
        return out

    def results(self, batch):
        """The results `observe` takes, one per row of the generated and rewarded batch."""
        scores = batch.batch["token_level_scores"].sum(dim=-1).tolist()
        mask = batch.batch["response_mask"] if "response_mask" in batch.batch.keys() else None
        tokens = mask.sum(dim=-1).tolist() if mask is not None else [None] * len(scores)
        out = []
        for i, info in enumerate(batch.non_tensor_batch["extra_info"]):
            row = info.get(INFO_KEY) if isinstance(info, dict) else None
            if row is None:
                raise ValueError("batch row %d has no extra_info['%s']: was the batch expanded by expand_batch?" % (i, INFO_KEY))
            result = {"prompt_id": row["prompt_id"], "step": row["step"], "rollout_id": row["rollout_id"],
                      "reward": self.settings.reward_of(scores[i], "rollout %s" % row["rollout_id"])}
            if tokens[i] is not None:
                result["tokens"] = int(tokens[i])
            if row.get("group") is not None:
                result["group"] = row["group"]
            out.append(result)
        return out

    def observe(self, batch):
        results = self.results(batch)
        self.last_results = results
        self.last_summary = note_observed(self.client.observe(results), results)
        return self.last_summary
