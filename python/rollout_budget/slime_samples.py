"""slime's samples as the rollout function reads them (rollout_budget.slime): a prompt's id, a
sample's reward and finish reason, and one rollout's outcome when slime's generate returns a
Sample or, for a rollout it fans out (a custom generate function's turn-level samples, slime's
`compact_generate`), a list of Samples (slime/rollout/sglang_rollout.py `generate_and_rm`:
``Sample | list[Sample]``).
"""

from __future__ import annotations

import hashlib

from .media import digest, holds
from .plan import _prompt_text, stable_prompt_id

__all__ = ["INFO_KEY", "get", "put", "prompt_id", "media_digest", "raw_reward", "finish_reason", "rollout_samples",
           "rollout_outcome"]

#: The key of each sample's rollout ids inside ``metadata``.
INFO_KEY = "rollout_budget"


def get(obj, key, default=None):
    return obj.get(key, default) if isinstance(obj, dict) else getattr(obj, key, default)


def put(obj, key, value):
    if isinstance(obj, dict):
        obj[key] = value
    else:
        setattr(obj, key, value)


def media_digest(sample):
    """A digest of a sample's images and videos (slime's ``multimodal_inputs``: what
    `process_vision_info` gives, PIL images, or paths and urls), or None for a sample without
    any. O(bytes of its media)."""
    media = get(sample, "multimodal_inputs")
    if not holds(media) or (isinstance(media, dict) and not any(holds(v) for v in media.values())):
        return None
    return digest(media)


def prompt_id(sample):
    """A template sample's prompt id: ``metadata["prompt_id"]``, else `stable_prompt_id` of
    ``metadata["index"]`` (with its data_source) or of the prompt text. Without an id or an
    index, a prompt with images or videos is hashed with them: slime's Dataset puts no index in
    the metadata, and two images behind one question ("Find x.") are two prompts. A text-only
    prompt's id is `stable_prompt_id`'s, unchanged."""
    meta = get(sample, "metadata") or {}
    if meta.get("prompt_id") is not None:
        return str(meta["prompt_id"])
    if meta.get("index") is None:
        media = media_digest(sample)
        if media is not None:
            text = "%s\x00media:%s" % (_prompt_text(get(sample, "prompt")), media)
            return "h:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    return stable_prompt_id(prompt=get(sample, "prompt"), index=meta.get("index"), data_source=meta.get("data_source"))


def raw_reward(args, sample):
    """A sample's reward as slime reads it (`Sample.get_reward_value`, which picks --reward-key), or its `reward`."""
    return sample.get_reward_value(args) if hasattr(sample, "get_reward_value") else get(sample, "reward")


def finish_reason(sample):
    """observe's finish_reason of a sample, from its status: truncated → length, aborted → abort, else stop."""
    status = get(sample, "status")
    return {"truncated": "length", "aborted": "abort"}.get(getattr(status, "value", status), "stop")


def rollout_samples(result, row, sent, where):
    """The samples of one rollout from what generate returned for it (a Sample or a list of
    them), each given the rollout's ids (``metadata[INFO_KEY]`` = `row`: a custom generate
    function may build new Samples that do not carry them) and, where it has none, the
    ``group_index`` of `sent` (the sample generate was given). A rollout fanned out into several
    samples is one rollout to slime's loss (slime/utils/types.py `Sample.rollout_id`: siblings
    share it, `_convert_samples_to_train_data` averages within it): a sibling without one gets
    the others' or `sent`'s index. Raises ValueError for an empty list, and for a sample that
    carries another rollout's ids (results out of order)."""
    samples = list(result) if isinstance(result, (list, tuple)) else [result]
    if not samples or any(s is None for s in samples):
        raise ValueError("rollout_budget.slime: generate returned no sample for rollout %s (%s)" % (row["rollout_id"], where))
    shared = next((get(s, "rollout_id") for s in samples if get(s, "rollout_id") is not None), get(sent, "index"))
    for s in samples:
        meta = dict(get(s, "metadata") or {})
        theirs = meta.get(INFO_KEY)
        if isinstance(theirs, dict) and theirs.get("rollout_id") not in (None, row["rollout_id"]):
            raise ValueError("rollout_budget.slime: generate returned rollout %s where rollout %s was (%s): return one "
                             "result a sample, in the order given" % (theirs["rollout_id"], row["rollout_id"], where))
        meta[INFO_KEY] = row
        put(s, "metadata", meta)
        if get(s, "group_index") is None:
            put(s, "group_index", get(sent, "group_index"))
        if len(samples) > 1 and get(s, "rollout_id") is None:
            put(s, "rollout_id", shared)
    return samples


def rollout_outcome(args, samples, settings):
    """run_rounds' outcome of one rollout from its samples: aborted when any is (slime's
    generate_and_rm returns them before the reward model: no reward); else the mean of their
    rewards (observe's, in [0, 1]; one sample: its reward), the largest response_length (a
    fanned-out rollout's samples share their prefix: the last holds every turn) and the last
    sample's finish_reason."""
    if any(finish_reason(s) == "abort" for s in samples):
        return {"reward": 0.0, "tokens": max(int(get(s, "response_length") or 0) for s in samples), "finish_reason": "abort"}
    rid = get(samples[0], "metadata")[INFO_KEY]["rollout_id"]
    raw = [raw_reward(args, s) for s in samples]
    if any(r is None for r in raw):
        raise ValueError("rollout_budget.slime: rollout %s: generate returned %s without a reward (None): give every sample "
                         "its reward (slime's generate_and_rm does, unless --group-rm)"
                         % (rid, "a sample" if len(raw) == 1 else "%d of its %d samples" % (sum(r is None for r in raw), len(raw))))
    rewards = [settings.reward_of(r, "rollout %s" % rid) for r in raw]
    return {"reward": sum(rewards) / len(rewards), "tokens": max(int(get(s, "response_length") or 0) for s in samples),
            "finish_reason": finish_reason(samples[-1])}
