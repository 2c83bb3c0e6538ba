"""slime's own code (624b824, ../shared/upstream) for the tests.

Imported as modules from the unpacked snapshot (they need only torch and httpx):
`slime.utils.types.Sample`, `slime.rollout.base_types` (RolloutFnTrainOutput, call_rollout_fn),
`slime.utils.misc.load_function` (how slime loads --rollout-function-path and
--custom-reward-post-process-path), `slime.utils.async_utils.run`,
`slime.utils.dp_schedule.build_dp_schedule`.
Run from source without their modules (which import Ray and SGLang):
`RolloutManager._post_process_rewards` and `RolloutManager._get_rollout_data`'s flattening
(slime/ray/rollout.py), `RolloutDataSource.get_samples` and
`RolloutDataSourceWithBuffer.add_samples` (slime/rollout/data_source.py).
Stand-ins: `ManagerStandIn` (the RolloutManager attributes those methods read), `DatasetStandIn`
(slime.utils.data.Dataset: a list of Samples), `DataSourceStandIn` (the attributes
RolloutDataSource.__init__ sets).
"""

import copy
import itertools
import os
import sys
import types

from . import support

_loaded = None


def load():
    global _loaded
    if _loaded is not None:
        return _loaded
    support.require_torch()
    try:
        import httpx  # noqa: F401  (slime.utils.http_utils imports it)
    except ImportError:
        support.missing("httpx for slime's Sample type (Debian's python3-httpx)")
    import torch

    root = support.unpack("slime")
    if root not in sys.path:
        sys.path.insert(0, root)
    from slime.rollout.base_types import RolloutFnTrainOutput, call_rollout_fn
    from slime.utils.dp_schedule import build_dp_schedule
    from slime.utils.misc import load_function
    from slime.utils.types import Sample

    ns = types.SimpleNamespace(root=root, Sample=Sample, RolloutFnTrainOutput=RolloutFnTrainOutput,
                               call_rollout_fn=call_rollout_fn, load_function=load_function,
                               build_dp_schedule=build_dp_schedule)
    rollout_py = os.path.join(root, "slime", "ray", "rollout.py")
    ns.post_process_rewards = support.load_method(rollout_py, "RolloutManager", "_post_process_rewards", {"torch": torch, "Sample": Sample})
    # slime/observability/rollout_data_utils.py's check of fanned-out rollouts' ids, run as written.
    validate = support.load_from_source(os.path.join(root, "slime", "observability", "rollout_data_utils.py"),
                                        ["validate_rollout_id_annotated"], {"Sample": Sample})["validate_rollout_id_annotated"]
    ns.get_rollout_data = support.load_method(rollout_py, "RolloutManager", "_get_rollout_data", {
        "call_rollout_fn": call_rollout_fn, "itertools": itertools,
        "validate_rollout_id_annotated": validate,
        "load_debug_rollout_data": None,
    })
    source_py = os.path.join(root, "slime", "rollout", "data_source.py")
    ns.get_samples = support.load_method(source_py, "RolloutDataSource", "get_samples", {"copy": copy, "Sample": Sample})
    ns.add_samples = support.load_method(source_py, "RolloutDataSourceWithBuffer", "add_samples", {})
    _loaded = ns
    return ns


class DatasetStandIn:
    """slime.utils.data.Dataset as get_samples reads it: `.samples` and len()."""

    def __init__(self, samples):
        self.samples = samples

    def __len__(self):
        return len(self.samples)

    def shuffle(self, epoch):
        pass


class DataSourceStandIn:
    """RolloutDataSource's state (slime/rollout/data_source.py __init__) with its real get_samples."""

    def __init__(self, args, samples):
        self.args = args
        self.epoch_id = 0
        self.sample_group_index = 0
        self.sample_index = 0
        self.sample_offset = 0
        self.dataset = DatasetStandIn(samples)

    def get_samples(self, num_samples):
        return load().get_samples(self, num_samples)

    def __len__(self):
        # RolloutDataSource.__len__ (data_source.py:162–165).
        return len(self.dataset)


class ManagerStandIn:
    """The RolloutManager attributes _post_process_rewards and _get_rollout_data read."""

    def __init__(self, args, rollout_fn=None, post_process=None, data_source=None):
        self.args = args
        self.generate_rollout = rollout_fn
        self.custom_reward_post_process_func = post_process
        self.data_source = data_source

    def post_process_rewards(self, samples):
        return load().post_process_rewards(self, samples)

    def get_rollout_data(self, rollout_id):
        return load().get_rollout_data(self, rollout_id)


def args(**overrides):
    """slime's args as the integration and the loaded methods read them (slime/utils/arguments.py defaults)."""
    base = dict(
        rollout_batch_size=12, n_samples_per_prompt=4, global_batch_size=8, rollout_max_response_len=64,
        rollout_shuffle=False, advantage_estimator="grpo", rewards_normalization=True, grpo_std_normalization=True,
        reward_key=None, load_debug_rollout_data=None, partial_rollout=False, micro_batch_size=1,
        use_dynamic_batch_size=False, max_tokens_per_gpu=None, balance_data=False, balance_by_flops=False,
        custom_reward_post_process_path="rollout_budget.slime.post_process_rewards",
    )
    base.update(overrides)
    return types.SimpleNamespace(**base)
