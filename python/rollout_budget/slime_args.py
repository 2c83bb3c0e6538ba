"""The slime flags rollout_budget.slime checks before its first step (`check_args`): those its
rollout function cannot honour, and reward normalisation that would mix the plan's uneven groups."""

from __future__ import annotations

import logging

from .slime_samples import get as _get

__all__ = ["check_args"]

_log = logging.getLogger("rollout_budget")

#: The advantage estimators slime normalises rewards for in groups; those that divide by the std.
_NORMALISED = ("grpo", "gspo", "cispo", "reinforce_plus_plus_baseline")
_STD = ("grpo", "gspo", "cispo")

#: slime flags the rollout function does not implement: (attribute, flag, why).
_NOT_COMBINABLE = (
    ("partial_rollout", "--partial-rollout", "aborted groups go back whole only (data_source.add_samples asserts it)"),
    ("dynamic_sampling_filter_path", "--dynamic-sampling-filter-path", "the plan already chooses the groups"),
    ("rollout_sample_filter_path", "--rollout-sample-filter-path", "not applied by this function"),
    ("rollout_all_samples_process_path", "--rollout-all-samples-process-path", "not applied by this function"),
    ("group_rm", "--group-rm", "rewards are computed per rollout"),
    ("log_passrate", "--log-passrate", "compute_pass_rate asserts rollout_batch_size × n_samples_per_prompt rewards in equal groups"),
)


def check_args(args):
    """Raises ValueError naming every slime flag set that this rollout function cannot honour
    (they were ignored, or failed later inside slime: --log-passrate's assertion)."""
    refused = ["%s (%s)" % (flag, why) for attr, flag, why in _NOT_COMBINABLE if _get(args, attr)]
    over = _get(args, "over_sampling_batch_size")
    if over is not None and over > _get(args, "rollout_batch_size", over):
        refused.append("--over-sampling-batch-size %s above --rollout-batch-size (the plan already chooses)" % over)
    if refused:
        raise ValueError("rollout_budget.slime: these slime flags cannot be combined with the rollout function; "
                         "leave them out: " + "; ".join(refused))
    _check_normalisation(args)


#: The post-process paths and converters this process has warned about (once each).
_warned = set()


def _check_normalisation(args):
    """slime normalises rewards in groups for grpo, gspo, cispo and reinforce_plus_plus_baseline
    while rewards normalisation is on (its default; off with --disable-rewards-normalization). Its own `_post_process_rewards` reshapes them into rows of
    n_samples_per_prompt (slime/ray/rollout.py:619–620), which on the plan's uneven groups mixes
    prompts (a step of rollout_batch_size × n_samples_per_prompt rollouts takes that branch,
    silently): without --custom-reward-post-process-path (or a converter of its own) that is a
    ValueError naming ours. Another post-process or a custom converter is logged once: it must
    group by group_index."""
    estimator = _get(args, "advantage_estimator")
    if estimator not in _NORMALISED or not _get(args, "rewards_normalization"):
        return
    post = _get(args, "custom_reward_post_process_path")
    convert = _get(args, "custom_convert_samples_to_train_data_path")
    if not post and not convert:
        raise ValueError("rollout_budget.slime: set --custom-reward-post-process-path rollout_budget.slime.post_process_rewards: "
                         "slime's own normalisation of %s rewards (on by default; off with --disable-rewards-normalization) reshapes "
                         "them into rows of n_samples_per_prompt, which mixes prompts once the plan's groups are uneven" % estimator)
    for flag, path in (("--custom-reward-post-process-path", post), ("--custom-convert-samples-to-train-data-path", convert)):
        if path and path != "rollout_budget.slime.post_process_rewards" and (flag, path) not in _warned:
            _warned.add((flag, path))
            _log.warning("rollout-budget: %s %s: with the plan's uneven groups, rewards must be normalised per group_index "
                         "(rollout_budget.slime.post_process_rewards does)", flag, path)
