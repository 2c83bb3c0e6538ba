"""Framework-neutral helpers every integration uses: a plan's rollouts as rows, the seed and id
rules of the executor, the stable prompt id, and the results rows `observe` takes.

A plan is the JSON object `rollout-budget plan` writes and `POST /v1/plan` answers (version 1):
`allocations` list the prompts with n > 0 in candidate order. Rows follow the executor's rules
(src/plan/exports.ts, src/executor): group id "<step>/<prompt id>", group seed = FNV-1a of
"<plan seed>/<step>/<prompt id>" masked to 30 bits, rollout j of a group seeded group seed + j
and identified "<step>/<prompt id>#<j>", numbered from the allocation's `first_rollout` in a
later round. So a trainer, `vllm run-batch` and `rollout-budget execute` draw the same samples,
and `observe` counts a rollout once whoever reports it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import sys

from .media import digest

__all__ = ["expand_plan", "group_seed", "group_id", "rollout_id", "stable_prompt_id", "check_repeat", "results_rows", "note_observed"]

_log = logging.getLogger("rollout_budget")

_SEED_MASK = 0x3FFFFFFF


def _fnv1a(text):
    """FNV-1a, 32 bits, over the UTF-16 code units of `text` (JavaScript's charCodeAt)."""
    h = 0x811C9DC5
    data = text.encode("utf-16-le")
    for k in range(0, len(data), 2):
        h ^= data[k] | (data[k + 1] << 8)
        h = (h * 0x01000193) & 0xFFFFFFFF
    return h


def group_seed(run_seed, step, prompt_id):
    """The seed of a prompt's group: FNV-1a of "run_seed/step/prompt_id", 30 bits (the executor's rule)."""
    return _fnv1a("%d/%d/%s" % (run_seed, step, prompt_id)) & _SEED_MASK


def group_id(step, prompt_id):
    """The id a trainer keys a group by (verl's `uid`): "<step>/<prompt id>"."""
    return "%d/%s" % (step, prompt_id)


def rollout_id(step, prompt_id, index):
    """Rollout `index` of a prompt's group at `step`: "<step>/<prompt id>#<index>" (the executor's rule)."""
    return "%d/%s#%d" % (step, prompt_id, index)


def _plan_field(plan, key, check, expected):
    if not isinstance(plan, dict) or key not in plan:
        raise ValueError("plan: %r is required (a plan object of version 1, as `plan` writes)" % key)
    value = plan[key]
    if not check(value):
        raise ValueError("plan.%s must be %s, got %r" % (key, expected, value))
    return value


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


_META = ("group", "prior_pass_rate", "prior_samples")


def _meta_of(prompts):
    """prompt id → the fields a results line repeats so the state learns them: ``group`` and the
    offline hint ``prior_pass_rate`` (with ``prior_samples``), from a list of candidates or a
    mapping id → candidate."""
    if prompts is None:
        return {}
    items = prompts.values() if isinstance(prompts, dict) else prompts
    out = {}
    for c in items:
        if not isinstance(c, dict):
            continue
        meta = {k: c[k] for k in _META if c.get(k) is not None}
        if "prior_pass_rate" not in meta:
            meta.pop("prior_samples", None)
        if meta:
            out[str(c["id"])] = meta
    return out


def expand_plan(plan, prompts=None, next_rollout=None):
    """One row per rollout of `plan`, in candidate order (a group's rollouts together).

    Each row: ``prompt_id``, ``group_id``, ``rollout_index`` (from the allocation's
    ``first_rollout``, 0 in a first round), ``rollout_id``, ``seed`` (group seed + rollout
    index), ``max_tokens`` (None when the prompt has none), ``step``, and ``group``,
    ``prior_pass_rate`` and ``prior_samples`` when `prompts` (the candidates, a list or a mapping
    id → candidate) gives the prompt them. `next_rollout` (a mapping prompt id → index): where
    earlier rounds of the step launched rollouts past ``first_rollout`` (which counts only the
    rewards they gave: aborted ones give none), a group's rows start at that index instead, so
    no rollout id or seed repeats (as the executor's ``nextRollout``).
    Prompts the plan leaves out (n = 0) are simply absent. Raises ValueError naming the field
    of a malformed plan. O(Σ n).
    """
    version = _plan_field(plan, "version", lambda v: v == 1, "1")
    del version
    step = _plan_field(plan, "step", lambda v: _is_int(v) and v >= 0, "an integer ≥ 0")
    seed = _plan_field(plan, "seed", lambda v: _is_int(v) and v >= 0, "an integer ≥ 0")
    allocations = _plan_field(plan, "allocations", lambda v: isinstance(v, list), "a list")
    meta = _meta_of(prompts)
    rows = []
    seen = set()
    for k, a in enumerate(allocations):
        where = "plan.allocations[%d]" % k
        if not isinstance(a, dict) or not isinstance(a.get("prompt_id"), str) or a["prompt_id"] == "":
            raise ValueError('%s: "prompt_id" must be a non-empty string, got %r' % (where, a))
        if a["prompt_id"] in seen:
            # As the executor refuses it (src/executor/planfile.ts): the rows' rollout ids would
            # repeat, and observe would count the second group as duplicates of the first.
            raise ValueError('%s: "prompt_id" %r repeats (a plan gives a prompt one allocation)' % (where, a["prompt_id"]))
        seen.add(a["prompt_id"])
        n = a.get("n")
        if not _is_int(n) or n < 0:
            raise ValueError('%s: "n" must be an integer ≥ 0, got %r' % (where, n))
        first = a.get("first_rollout", 0)
        if not _is_int(first) or first < 0:
            raise ValueError('%s: "first_rollout" must be an integer ≥ 0, got %r' % (where, first))
        pid = a["prompt_id"]
        if next_rollout is not None:
            first = max(first, next_rollout.get(pid, 0))
        base = group_seed(seed, step, pid)
        gid = group_id(step, pid)
        for j in range(first, first + n):
            row = {
                "prompt_id": pid,
                "group_id": gid,
                "rollout_index": j,
                "rollout_id": rollout_id(step, pid, j),
                # JavaScript's (seed + j) | 0: an int32, which a 30-bit seed plus a group index is.
                "seed": base + j,
                "max_tokens": a.get("max_tokens"),
                "step": step,
            }
            row.update(meta.get(pid, {}))
            rows.append(row)
    return rows


def plain(value):
    """A numpy or torch number as the Python number it holds, an array or a tensor as the list it
    holds (tolist: a 0-d one as its number); any other value as it is."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "item"):
        return value.item()
    return value


def _as_plain(value):
    """Lists and dicts as JSON takes them (numpy arrays and scalars through `plain`), all the
    way down: an object array's dicts (pandas' Parquet cells) keep numpy values otherwise."""
    if hasattr(value, "tolist") or hasattr(value, "item"):
        return _as_plain(plain(value))
    if isinstance(value, dict):
        return {str(k): _as_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_as_plain(v) for v in value]
    return value


def _is_missing(value):
    """Whether `value` is pandas' mark for a missing value: a float NaN, or pandas' own `NA` (its
    nullable dtypes: `Int64`, `string`) and `NaT` when pandas is loaded (it is never imported
    here: a caller holding its values has loaded it)."""
    if isinstance(value, float):
        return value != value
    pandas = sys.modules.get("pandas")
    return pandas is not None and (value is getattr(pandas, "NA", None) or value is getattr(pandas, "NaT", None))


def _no_nan(value):
    """`value` with NaN for a missing value as None (lists and dicts walked): pandas' NaN in a
    column with nulls (a null `data_source` in a string column; an integer `index` column made
    float by a row without one), and pandas' `NA` in its nullable columns, the None verl reads
    for it. "nan" was taken for a group, and for an id's index or source (every such row one id
    "<source>/nan", one posterior for all; with `NA`, "<NA>/<NA>")."""
    if _is_missing(value):
        return None
    if isinstance(value, dict):
        return {k: _no_nan(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_no_nan(v) for v in value]
    return value


def stable_prompt_id(prompt=None, index=None, data_source=None, extra_info=None):
    """An id for a prompt that is the same at every step, so its posterior carries over.

    The rule, in order:
      1. a dataset index when given — `index`, else ``extra_info["index"]`` (verl's datasets
         carry one): "<data_source>/<index>" with a data source, else "<index>";
      2. else a hash of the prompt: "h:" + the first 16 hex digits of the sha256 of its text
         (a string as is; chat messages as compact JSON with sorted keys, an image in them as
         the digest of its content).
    Never a per-step id such as verl's ``uid`` (a fresh uuid4 for every row at every step).
    NaN (float or numpy) and pandas' `NA` and `NaT` (pandas' missing values) count as missing, as
    None does, for the index and the data source. Raises ValueError when neither an index nor a prompt is given.
    """
    index = _no_nan(_as_plain(index))
    data_source = _no_nan(_as_plain(data_source))
    if index is None and extra_info is not None:
        info = _as_plain(extra_info)
        if isinstance(info, dict):
            index = _no_nan(info.get("index"))
    if index is not None:
        if isinstance(index, float) and index.is_integer():
            index = int(index)
        return "%s/%s" % (data_source, index) if data_source is not None else str(index)
    if prompt is None:
        raise ValueError("stable_prompt_id needs a dataset index (index= or extra_info['index']) or the prompt")
    return "h:" + hashlib.sha256(_prompt_text(prompt).encode("utf-8")).hexdigest()[:16]


def _prompt_text(prompt):
    """A prompt as one string: a string as is; chat messages as compact JSON with sorted keys, a
    value JSON cannot hold (an image in verl's messages: ``{"type": "image", "image": <PIL
    image>}``; bytes) as ``"media:<sha256 of its content>"`` (rollout_budget.media), so two
    images behind one text are two prompts (it was a TypeError)."""
    prompt = _as_plain(prompt)
    if isinstance(prompt, str):
        return prompt
    return json.dumps(prompt, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=_opaque)


def _opaque(value):
    return "media:" + digest(value)


def check_repeat(prompt_id, first, again, where):
    """Raises ValueError when two rows of one batch share `prompt_id` but hold different prompts
    (`first` and `again`; None: not known). Two datasets each numbering their rows from 0 give
    such ids: the second prompt would be dropped from the batch and its results counted as the
    first's. `where` names the two rows."""
    if first is None or again is None or _prompt_text(first) == _prompt_text(again):
        return
    raise ValueError(
        "rollout_budget: %s are different prompts with the same id %r (from their data source and dataset index): "
        "give every prompt its own index (two files each numbered from 0?), or set a distinct data_source per file"
        % (where, prompt_id))


def _one(value):
    """A one-element list (a ``(1,)`` array or tensor, as `_as_plain` gives it) as its element;
    any other value as it is (a longer list is then refused as not a number, showing it)."""
    if isinstance(value, list) and len(value) == 1 and not isinstance(value[0], list):
        return value[0]
    return value


_FINISH = ("stop", "length", "abort")
#: How far outside [0, 1] a reward may be and still be taken, clamped: float32 sums of shaped
#: rewards (ten 0.1s sum to 1.0000001).
REWARD_SLACK = 1e-6


def results_rows(rows, rewards, tokens=None, finish_reasons=None, pass_threshold=None):
    """The results `observe` takes, one per rollout of `rows` (from expand_plan), in order.

    `rewards[k]` is rollout k's reward in [0, 1] (or a bool; within REWARD_SLACK of [0, 1] it is
    clamped); with `pass_threshold` (a finite number) any reward but NaN, 1 above the threshold
    and 0 at or below it (shaped rewards: DAPO's ±1 with 0; a score on 0–10 with 5), as the verl
    and slime integrations' ``pass_threshold`` do. `tokens[k]` its generated tokens (optional; an
    integral float is taken); `finish_reasons[k]` "stop", "length" or "abort" (optional; aborted
    rollouts do not update pass rates). A reward or token count held in a one-element list,
    array or tensor (OpenRLHF's per-sample ``(1,)`` tensors) is taken as its number. Each result
    keeps the row's ``rollout_id`` (observe is idempotent), ``step``, and ``group``,
    ``prior_pass_rate``, ``prior_samples`` when the row has them (so the state learns the
    prompt's group and hint). Raises ValueError naming the rollout.
    """
    if pass_threshold is not None:
        if isinstance(pass_threshold, bool) or not isinstance(_as_plain(pass_threshold), (int, float)) \
                or not math.isfinite(_as_plain(pass_threshold)):
            raise ValueError("results_rows: pass_threshold must be a finite number (rewards above it pass), got %r" % (pass_threshold,))
        pass_threshold = float(_as_plain(pass_threshold))
    rows = list(rows)
    rewards = [_one(r) for r in _as_plain(rewards)]
    if len(rewards) != len(rows):
        raise ValueError("results_rows: %d rewards for %d rollouts" % (len(rewards), len(rows)))
    tokens = None if tokens is None else [_one(t) for t in _as_plain(tokens)]
    finish_reasons = None if finish_reasons is None else list(finish_reasons)
    for name, column in (("tokens", tokens), ("finish_reasons", finish_reasons)):
        if column is not None and len(column) != len(rows):
            raise ValueError("results_rows: %d %s for %d rollouts" % (len(column), name, len(rows)))
    out = []
    for k, row in enumerate(rows):
        r = rewards[k]
        if isinstance(r, bool):
            r = 1.0 if r else 0.0
        if pass_threshold is not None and isinstance(r, (int, float)) and not math.isnan(r):
            r = 1.0 if r > pass_threshold else 0.0  # ±inf too, as the integrations' Config.reward_of counts them
        if not isinstance(r, (int, float)) or not (-REWARD_SLACK <= r <= 1.0 + REWARD_SLACK) or math.isnan(r):
            if pass_threshold is not None:
                raise ValueError("results_rows: reward of rollout %s must be a number (not NaN), got %r" % (row.get("rollout_id", k), rewards[k]))
            raise ValueError("results_rows: reward of rollout %s must be a number in [0, 1], got %r; a shaped reward (DAPO's ±1, "
                             "a penalty below 0): set pass_threshold to count rewards above it as a pass"
                             % (row.get("rollout_id", k), rewards[k]))
        result = {"prompt_id": row["prompt_id"], "step": row["step"], "reward": min(1.0, max(0.0, float(r))), "rollout_id": row["rollout_id"]}
        if tokens is not None and tokens[k] is not None:
            t = tokens[k]
            if isinstance(t, float) and t.is_integer():
                t = int(t)  # as the service takes 10.0
            if not _is_int(t) or t < 0:
                raise ValueError("results_rows: tokens of rollout %s must be an integer ≥ 0, got %r" % (row["rollout_id"], t))
            result["tokens"] = t
        if finish_reasons is not None and finish_reasons[k] is not None:
            f = finish_reasons[k]
            if f not in _FINISH:
                raise ValueError('results_rows: finish_reason of rollout %s must be "stop", "length" or "abort", got %r' % (row["rollout_id"], f))
            result["finish_reason"] = f
        for key in _META:
            if row.get(key) is not None:
                result[key] = row[key]
        out.append(result)
    return out


def note_planned(plan):
    """Logs each of a plan's ``warnings`` (the ``rollout_budget`` logger), as the CLI prints them on
    stderr: a trainer's integration dropped them (a budget that is not a multiple of the trainer's
    workers, one larger than max_n lets the prompts use, prompts without length data planned at
    an assumed length). Returns ``plan``."""
    if isinstance(plan, dict):
        for warning in plan.get("warnings") or []:
            _log.warning("rollout-budget: step %s plan: %s", plan.get("step", "?"), warning)
    return plan


def note_observed(summary, sent):
    """Logs (the ``rollout_budget`` logger) what an observe's summary says a trainer should know:
    each of its ``warnings`` (results far behind the state's last step: most often a new run on
    an old run's state), and its ``duplicates``, rollouts whose ids were observed before, so not
    applied again: a step replayed after a resume from a checkpoint (verl and slime resume at the
    checkpoint's step, and the ids repeat: the state keeps the first run's results,
    docs/trainers.md "Resuming a run from a checkpoint"), or an observe sent again. ``sent``: the
    results sent, each with its ``step``. Returns ``summary``."""
    if not isinstance(summary, dict):
        return summary
    for warning in summary.get("warnings") or []:
        _log.warning("rollout-budget: %s", warning)
    duplicates = summary.get("duplicates")
    if isinstance(duplicates, int) and duplicates > 0:
        steps = sorted({r.get("step") for r in sent if r.get("step") is not None})
        _log.warning("rollout-budget: step %s: %d of %d rollouts were observed before (the same rollout ids) and were not "
                     "applied again, as when a run resumed from a checkpoint replays its steps (the state keeps the first "
                     "run's results; docs/trainers.md, \"Resuming a run from a checkpoint\"), or an observe is sent again",
                     ", ".join(str(s) for s in steps) or "?", duplicates, len(sent))
    return summary
