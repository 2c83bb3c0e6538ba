"""slime integration: a rollout function that generates the plan's groups, and a reward
post-process that normalises by group, so uneven groups get the right advantages.

    --rollout-function-path rollout_budget.slime.generate_rollout
    --custom-reward-post-process-path rollout_budget.slime.post_process_rewards

`generate_rollout(args, rollout_id, data_source, evaluation=False)` (slime's signature,
slime/rollout/sglang_rollout.py at 624b824) takes the step's `rollout_batch_size` prompts from
the data source, plans them in ``rounds`` rounds (`run_rounds`; default 1, one plan; budget:
rollout_batch_size × n_samples_per_prompt rollouts unless set; the step's Σ n, all rounds
together, a multiple of `global_batch_size`, since slime's `build_dp_schedule` trains on
⌊rollouts / global_batch_size⌋ full steps and drops the rest: `rounds.StepTotal`), and generates each
planned rollout as its own request (n = 1) with its own seed (`sampling_seed` = the plan's
group seed + rollout index) and `max_new_tokens`, through slime's own `generate_and_rm` (so
custom generate functions and reward models still apply). With rounds, round 1 plans its share
and each later round what is left, with each prompt's rewards so far as ``partial_rewards``;
its rollouts join the prompt's group with later indices and seeds. A group is the prompt's
samples from every round, with one `group_index`; each sample's ids are in
``metadata["rollout_budget"]``. After the last round the results are posted to the service
(once, idempotent by rollout id), then the groups returned. Aborted samples (SGLang's
finish_reason abort: no reward) are observed as aborted and left out of the groups, as slime's
own rollout leaves them without --partial-rollout. Evaluation (`evaluation=True`) is delegated
to slime's own rollout function.

`post_process_rewards(args, samples)` (slime's `--custom-reward-post-process-path` signature:
returns raw rewards and the rewards to train on) normalises each `group_index` group on its
own, with slime's formula: minus the group mean for grpo, gspo, cispo and
reinforce_plus_plus_baseline when `rewards_normalization` is on, divided by (std + 1e-6) for
grpo, gspo and cispo when `grpo_std_normalization` is on. slime's default reshapes to
(-1, n_samples_per_prompt), which on uneven groups mixes prompts (slime/ray/rollout.py,
`_post_process_rewards`). A group of one sample gets 0 (slime turns std normalisation off when
n_samples_per_prompt is 1, and the mean of one reward is itself).

Checkpoints: with a SQLite state file known (``backup_state``, by default ``url`` when that is a
state path), the state as of each rollout after which slime saves a checkpoint (``--save`` with
``--save-interval``: every interval and the last rollout, as `should_run_periodic_action` in
slime/utils/misc.py; an epoch's end once the data source's state file is there) is copied beside
the data source's state, ``<--save>/rollout/rollout_budget_state_<rollout id>.db``, at the next
rollout's start (the last rollout's at its end). A run resumed with ``--load`` puts the copy of
the rollout before its first one back when it runs the state itself and nothing else has it
open, else logs how to (rollout_budget.checkpoint).

Not combinable (the function does not implement them; documented in docs/trainers.md), and
refused with a ValueError at the first step: --partial-rollout (aborted groups go back through
`add_samples`, which asserts full groups), --dynamic-sampling-filter-path and an
--over-sampling-batch-size above --rollout-batch-size (the plan already chooses),
--rollout-sample-filter-path, --rollout-all-samples-process-path, --group-rm, and
--log-passrate (slime's `compute_pass_rate` asserts rollout_batch_size × n_samples_per_prompt
rewards, and reshapes them into equal groups); and a normalised estimator (grpo, gspo, cispo,
reinforce_plus_plus_baseline with rewards normalisation on, slime's default) without
--custom-reward-post-process-path, whose slime default mixes prompts on uneven groups. What
generate returns for a sample may be a list of samples (a rollout fanned out), and image
prompts have ids of their own: rollout_budget.slime_samples.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import os
import uuid

from .advantages import group_advantages
from .checkpoint import check_copies, copy_state, resume_from_copy
from .config import settings_from
from .metrics import TimedClient, step_metrics
from .plan import check_repeat
from .rounds import StepTotal, run_rounds
from .slime_args import _NORMALISED, _STD, check_args
from .slime_samples import INFO_KEY, rollout_outcome, rollout_samples
from .slime_samples import finish_reason as _finish_reason
from .slime_samples import get as _get
from .slime_samples import prompt_id as _prompt_id
from .slime_samples import put as _set
from .slime_samples import raw_reward as _raw_reward

__all__ = ["generate_rollout", "make_rollout_function", "post_process_rewards", "check_args", "state_copy", "INFO_KEY"]

_log = logging.getLogger("rollout_budget")

#: Rounds a step adds to plan again what its aborted samples left of the budget (run_rounds'
#: refill_aborted): slime trains whole global batches, and an aborted sample has no reward.
REFILL_ABORTED = 3


async def _sglang_generate(args, samples):
    """slime's own per-sample path (slime/rollout/sglang_rollout.py generate_and_rm), one request
    per sample with its plan seed as `sampling_seed` and its max_tokens as `max_new_tokens`."""
    from slime.rollout.sglang_rollout import GenerateState, generate_and_rm

    state = GenerateState(args)

    async def one(sample):
        if _get(sample, "session_id", None) is None:
            # As slime's generate_and_rm_group: generate sends it as the routing key
            # (--router-policy consistent_hashing keeps a sample's turns on one engine).
            _set(sample, "session_id", str(uuid.uuid4()))
        params = state.sampling_params.copy()
        row = sample.metadata[INFO_KEY]
        params["sampling_seed"] = row["seed"]
        if row.get("max_tokens") is not None:
            params["max_new_tokens"] = min(params["max_new_tokens"], row["max_tokens"])
        return await generate_and_rm(args, sample, params, evaluation=False)

    return await asyncio.gather(*(one(s) for s in samples))


def _run(coro):
    try:
        from slime.utils.async_utils import run  # slime's event loop (rollout actors keep one)
    except ImportError:
        return asyncio.run(coro)
    return run(coro)


def _output(groups, metrics):
    try:
        from slime.rollout.base_types import RolloutFnTrainOutput
    except ImportError:
        return groups
    return RolloutFnTrainOutput(samples=groups, metrics=metrics)


def make_rollout_function(generate=None, client=None, settings=None):
    """A slime rollout function. `generate(args, samples)` is a coroutine function returning
    the samples generated and rewarded (default: slime's generate_and_rm per sample); `client`
    and `settings` default to rollout_budget.config's (ROLLOUT_BUDGET_* variables)."""
    generate = generate if generate is not None else _sglang_generate

    def rollout(args, rollout_id, data_source, evaluation=False):
        # Checked at evaluation too: slime evaluates before the first training rollout
        # (--eval-interval), so a refused flag or a missing url stops the run there, not after it.
        check_args(args)
        s = settings if settings is not None else settings_from()
        if not s.url and client is None:
            s.client()  # the ValueError saying where to set it
        if evaluation:
            from slime.rollout.sglang_rollout import generate_rollout as slime_rollout

            return slime_rollout(args, rollout_id, data_source, evaluation=True)
        last = _last_rollout(args, data_source)
        progress = _before_rollout(args, rollout_id, s, last)
        svc = client if client is not None else _client_of(s)
        out = _train_rollout(args, rollout_id, data_source, generate, svc, s)
        progress["observed"] = rollout_id
        if _get(args, "save") and (_get(args, "save_interval") or _get(args, "release_train")) and rollout_id == last:
            copy_state(s, state_copy(args.save, rollout_id), "rollout %d" % rollout_id)
        return out

    return rollout


#: Per state (url, backup_state) in this process: the last rollout id whose results were observed.
_progress = {}


def state_copy(root, rollout_id):
    """The state's copy in slime's checkpoint folder `root` (``--save``, ``--load``) as of
    `rollout_id`, beside the data source's ``rollout/global_dataset_state_dict_<id>.pt``
    (`RolloutDataSource.save`, slime/rollout/data_source.py:134)."""
    return os.path.join(str(root), "rollout", "rollout_budget_state_%d.db" % rollout_id)


def _last_rollout(args, data_source):
    """The run's last rollout id: ``--num-rollout`` − 1, else with ``--num-epoch`` what slime's
    driver sets it to after the rollout actor got its args (placement_group.py:240–243: the
    epochs × `RolloutManager.get_num_rollout_per_epoch`, len(data source) // rollout_batch_size),
    so the actor's ``args.num_rollout`` is None; None when neither can be told."""
    num = _get(args, "num_rollout")
    if num is None:
        epochs, size = _get(args, "num_epoch"), _get(args, "rollout_batch_size")
        try:
            num = int(epochs) * (len(data_source) // int(size)) if epochs and size else None
        except TypeError:  # a data source without a length
            num = None
    return None if not num else int(num) - 1


def _saves_after(args, rollout_id, last):
    """Whether slime saves a checkpoint after training `rollout_id`: after every rollout with
    ``--release-train`` (train.py:71, 624b824), else `should_run_periodic_action`
    (slime/utils/misc.py:107) with ``--save-interval``: every interval and the last rollout; an
    epoch's end (its other trigger) is seen by the data source's state file being there."""
    save, interval = _get(args, "save"), _get(args, "save_interval")
    if save and _get(args, "release_train"):
        return True
    if not save or not interval:
        return False
    if rollout_id == last or (rollout_id + 1) % int(interval) == 0:
        return True
    return os.path.exists(os.path.join(str(save), "rollout", "global_dataset_state_dict_%d.pt" % rollout_id))


def _before_rollout(args, rollout_id, settings, last):
    """The first rollout of a run resumed with ``--load`` puts the state's copy back (or logs how
    to); a rollout after one this process observed, when slime saved a checkpoint after that one,
    copies the state there. Returns this state's progress (see _progress)."""
    key = (settings.url, settings.backup_state)
    progress = _progress.get(key)
    if progress is None:
        check_copies(settings)
        progress = _progress[key] = {"observed": None}
        load = _get(args, "load")
        if load and rollout_id > 0:
            # slime resumes at start_rollout_id = the loaded rollout + 1 (megatron_utils/actor.py:114).
            resume_from_copy(settings, state_copy(load, rollout_id - 1), str(load))
    if progress["observed"] == rollout_id - 1 and _saves_after(args, rollout_id - 1, last):
        out = state_copy(args.save, rollout_id - 1)
        if not os.path.exists(out):
            copy_state(settings, out, "rollout %d" % (rollout_id - 1))
    return progress


_clients = {}


def _client_of(settings):
    key = (settings.url, settings.token)
    if key not in _clients:
        _clients[key] = settings.client()
    return _clients[key]


def _train_rollout(args, rollout_id, data_source, generate, client, settings):
    prompt_groups = data_source.get_samples(args.rollout_batch_size)
    templates = [g[0] if isinstance(g, list) else g for g in prompt_groups]
    indices = [_get(s, "index") for g in prompt_groups for s in (g if isinstance(g, list) else [g])]
    by_id, first, candidates = {}, {}, []
    for k, t in enumerate(templates):
        pid = _prompt_id(t)
        if pid in by_id:
            check_repeat(pid, _get(by_id[pid], "prompt"), _get(t, "prompt"), "prompts %d and %d of the step" % (first[pid], k))
            continue
        by_id[pid] = t
        first[pid] = k
        c = {"id": pid}
        max_tokens = getattr(args, "rollout_max_response_len", None)
        if max_tokens is not None:
            c["max_tokens"] = int(max_tokens)
        source = (_get(t, "metadata") or {}).get("data_source")
        if source is not None:
            c["group"] = str(source)
        candidates.append(c)
    budget_r = settings.budget_rollouts
    if budget_r is None:
        # The uniform budget, also beside a token budget: the step never grows past it.
        budget_r = args.rollout_batch_size * args.n_samples_per_prompt
    multiple_of = settings.multiple_of if settings.multiple_of is not None else getattr(args, "global_batch_size", None)
    options = dict(settings.options)
    options["step"] = int(rollout_id)
    # Sample indices: the data source reserved rollout_batch_size × n_samples_per_prompt of them;
    # later rounds go on from where the earlier ones stopped, so none repeats within the step.
    next_index = [min((i for i in indices if i is not None), default=0)]
    generated = []

    def generate_rows(rows):
        """One round: a sample per row (the prompt's template, its group_index kept), generated
        through `generate`; returns run_rounds' outcome per row, in order."""
        flat = []
        for row in rows:
            sample = copy.deepcopy(by_id[row["prompt_id"]])
            _set(sample, "index", next_index[0])
            next_index[0] += 1
            meta = dict(_get(sample, "metadata") or {})
            meta[INFO_KEY] = row
            _set(sample, "metadata", meta)
            flat.append(sample)
        # One result a sample, in order (asyncio.gather's): the sample, or the samples of a
        # rollout generate fanned out (a custom generate function's list[Sample]).
        results = list(_run(generate(args, flat)))
        if len(results) != len(rows):
            raise ValueError("rollout_budget.slime: generate returned %d results for %d samples (one a sample, in order: a Sample, "
                             "or a list of Samples for a rollout fanned out)" % (len(results), len(rows)))
        done = [(row, rollout_samples(result, row, sent, "step %d" % rollout_id)) for row, result, sent in zip(rows, results, flat)]
        generated.extend(done)
        return [rollout_outcome(args, samples, settings) for _, samples in done]

    timed = TimedClient(client)
    # Aborted samples have no reward to train on, and slime trains whole global batches: what
    # they left of the step's budget is planned again, up to REFILL_ABORTED more rounds.
    step = run_rounds(StepTotal(timed, multiple_of if multiple_of and multiple_of > 1 else None, budget_r), candidates, generate_rows,
                      budget_rollouts=budget_r, budget_tokens=settings.budget_tokens, rounds=settings.rounds,
                      refill_aborted=REFILL_ABORTED, **options)
    _past_indices(data_source, next_index[0])
    # A prompt's samples from every round in one group, in candidate order; aborted ones have no
    # reward to train on (generate_and_rm returns them before the reward model), as slime's own
    # rollout drops them without --partial-rollout.
    kept, aborted, total = {}, 0, 0
    for row, samples in generated:
        if any(_finish_reason(sample) == "abort" for sample in samples):
            aborted += len(samples)
        else:
            kept.setdefault(row["prompt_id"], []).extend(samples)
            total += 1
    out = [kept[c["id"]] for c in candidates if c["id"] in kept]
    if aborted:
        _log.warning("rollout-budget: step %d: %d aborted samples (finish_reason abort) left out of the rollout: they have "
                     "no reward (their results are observed as aborted)", rollout_id, aborted)
    # slime's build_dp_schedule counts rollouts (a fanned-out rollout's samples share a rollout_id).
    if (multiple_of and multiple_of > 1 and total < multiple_of) or not out:
        # slime would fail on it: build_dp_schedule's assert, or an IndexError on an empty rollout.
        raise ValueError(
            "rollout_budget.slime: step %d has %d rollouts to train on%s, fewer than one global_batch_size (%s), which slime "
            "cannot train: %s" % (rollout_id, total, " (%d aborted samples left out)" % aborted if aborted else "", multiple_of,
                                  _short_step_advice(settings, args, multiple_of, aborted)))
    if multiple_of and multiple_of > 1 and total % multiple_of:
        _log.warning("rollout-budget: step %d: %d rollouts, not a multiple of global_batch_size %d: slime trains on %d and drops "
                     "the rest", rollout_id, total, multiple_of, multiple_of * (total // multiple_of))
    # The figures count rollouts (a fanned-out rollout's samples are one); a figure without a
    # value is left out, not None, which slime's TensorBoard writer cannot log.
    return _output(out, step_metrics(step.plans, step.results, step.summary, timed.seconds, candidates=len(candidates)))


def _short_step_advice(settings, args, multiple_of, aborted):
    """What lets a step reach one global batch, for the error above."""
    advice = []
    if aborted:
        advice.append("samples SGLang aborted (finish_reason abort) were planned again %d times and aborted again: see why "
                      "SGLang aborts them" % REFILL_ABORTED)
    options = settings.options or {}
    max_n = options.get("max_n")
    if max_n is not None and multiple_of and max_n * args.rollout_batch_size < multiple_of:
        advice.append("max_n %s × rollout_batch_size %d is below it: raise max_n" % (max_n, args.rollout_batch_size))
    if options.get("skip"):
        advice.append("skip may leave prompts out: turn it off")
    if settings.budget_tokens is not None:
        advice.append("budget_tokens %s may not pay for it: raise it" % settings.budget_tokens)
    advice.append("or lower --global-batch-size (set --num-steps-per-rollout for several optimizer steps a rollout)")
    return "; ".join(advice)


def _past_indices(data_source, end):
    """Moves slime's data source's next sample index (`RolloutDataSource.sample_index`, saved with
    its state) to `end` when the step used indices past the rollout_batch_size × n_samples_per_prompt
    it reserved (a budget above that, or aborted samples, which the step does not charge): the next
    step's samples then start after this step's, so no two samples of a run share an index (slime's
    traces and train-data dumps key on it). A data source without that counter is left alone."""
    current = getattr(data_source, "sample_index", None)
    if isinstance(current, int) and not isinstance(current, bool) and current < end:
        data_source.sample_index = end


def generate_rollout(args, rollout_id, data_source, evaluation=False):
    """The `--rollout-function-path` entry (see the module doc)."""
    return make_rollout_function()(args, rollout_id, data_source, evaluation=evaluation)


def post_process_rewards(args, samples):
    """The `--custom-reward-post-process-path` entry: (raw rewards, rewards normalised per group_index)."""
    raw = [_raw_reward(args, s) for s in samples]
    estimator = getattr(args, "advantage_estimator", None)
    if estimator not in _NORMALISED or not getattr(args, "rewards_normalization", False):
        return raw, raw
    groups = [_get(s, "group_index") for s in samples]
    if any(g is None for g in groups):
        raise ValueError("post_process_rewards: every sample needs a group_index (set by the rollout function)")
    kind = "grpo" if estimator in _STD and getattr(args, "grpo_std_normalization", False) else "drgrpo"
    rewards = group_advantages(raw, groups, kind=kind, epsilon=1e-6)
    sizes = {}
    for g in groups:
        sizes[g] = sizes.get(g, 0) + 1
    return raw, [0.0 if sizes[g] == 1 else r for g, r in zip(groups, rewards)]
