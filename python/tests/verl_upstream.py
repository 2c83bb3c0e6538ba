"""verl's own code (b178a3c, ../shared/upstream) loaded for the tests, without its package imports.

Run as written, from the unpacked snapshot (support.load_from_source / load_method):
- verl/protocol.py: `DataProto` (pop, union, repeat, sample_level_repeat, chunk, from_dict,
  check_consistency), `union_tensor_dict`, `union_numpy_dict`, `_deep_equal`, `_array_equal`;
  verl/utils/py_functional.py: `union_two_dict`;
- verl/trainer/ppo/core_algos.py: `AdvantageEstimator`, the estimator registry,
  `compute_grpo_outcome_advantage`, `compute_grpo_vectorized_outcome_advantage` (with
  verl/utils/groupwise.py's `as_torch_index` and `group_mean_std`, on CPU),
  `compute_rloo_outcome_advantage`, `compute_rloo_vectorized_outcome_advantage`;
- verl/trainer/ppo/ray_trainer.py: `compute_response_mask`, `compute_advantage`, and
  `RayPPOTrainer._get_gen_batch` (bound to a trainer stand-in with `async_rollout_mode`) and
  `RayPPOTrainer._compute_or_extract_reward` (with verl/trainer/ppo/reward.py's `compute_reward`).

The stand-ins are `TensorDictStandIn` for `tensordict.TensorDict` (not installable here): a
dict of torch tensors with one batch dimension, `batch_size`, `keys`/`items`/`pop`, item
access, `len`, `chunk(chunks, dim=0)` with torch.chunk's split sizes, and `torch.cat` over a list of
them (what DataProto.concat calls), and `tqbridge` (verl/utils/transferqueue_utils.py,
which decorates `compute_reward`) as it behaves without TransferQueue: the function as it is.
DataProto's behaviour on top of them is verl's own.
"""

import copy
import logging
import math
import os
import pickle
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from . import support


class TensorDictStandIn:
    """Stand-in for tensordict.TensorDict as verl/protocol.py uses it (see the module doc)."""

    def __init__(self, source=None, batch_size=None, device=None):
        import torch

        self._data = dict(source or {})
        self.batch_size = torch.Size(batch_size if batch_size is not None else [])
        self.device = device
        for key, value in self._data.items():
            assert value.shape[: len(self.batch_size)] == self.batch_size, (key, value.shape, self.batch_size)

    def __len__(self):
        return self.batch_size[0] if len(self.batch_size) else 0

    def keys(self):
        return self._data.keys()

    def items(self):
        return self._data.items()

    def values(self):
        return self._data.values()

    def __contains__(self, key):
        return key in self._data

    def __getitem__(self, key):
        if isinstance(key, str):
            return self._data[key]
        import torch

        picked = {k: v[key] for k, v in self._data.items()}
        size = next(iter(picked.values())).shape[:1] if picked else torch.Size([0])
        return TensorDictStandIn(picked, batch_size=size, device=self.device)

    def __setitem__(self, key, value):
        assert value.shape[: len(self.batch_size)] == self.batch_size, (key, value.shape, self.batch_size)
        self._data[key] = value

    def get(self, key, default=None):
        return self._data.get(key, default)

    def pop(self, key):
        return self._data.pop(key)

    def chunk(self, chunks, dim=0):
        import torch

        assert dim == 0
        pieces = {k: torch.chunk(v, chunks, dim=0) for k, v in self._data.items()}
        count = len(next(iter(pieces.values())))
        return [TensorDictStandIn({k: p[i] for k, p in pieces.items()}, batch_size=next(iter(pieces.values()))[i].shape[:1], device=self.device)
                for i in range(count)]

    @classmethod
    def __torch_function__(cls, func, types_, args=(), kwargs=None):
        import torch

        if func is torch.cat:
            parts = args[0]
            keys = list(parts[0].keys())
            data = {k: torch.cat([p[k] for p in parts], dim=0) for k in keys}
            size = next(iter(data.values())).shape[:1]
            return TensorDictStandIn(data, batch_size=size, device=parts[0].device)
        return NotImplemented


_loaded = None


def load():
    """A namespace with verl's functions and classes above (loaded once per process)."""
    global _loaded
    if _loaded is not None:
        return _loaded
    support.require_torch()
    import numpy as np
    import torch

    root = support.unpack("verl")
    ns = types.SimpleNamespace(root=root)
    proto = {
        "np": np, "torch": torch, "os": os, "math": math, "copy": copy, "pickle": pickle, "logging": logging,
        "dataclass": dataclass, "field": field, "Any": Any, "Callable": Callable, "Optional": Optional,
        "TensorDict": TensorDictStandIn,
    }
    support.load_from_source(os.path.join(root, "verl", "utils", "py_functional.py"), ["union_two_dict"], proto)
    support.load_from_source(os.path.join(root, "verl", "protocol.py"), [
        "_DataProtoConfigMeta", "DataProtoConfig", "union_tensor_dict", "_array_equal", "_deep_equal",
        "union_numpy_dict", "list_of_dict_to_dict_of_list", "DataProto",
    ], proto)
    ns.DataProto = proto["DataProto"]

    from collections import defaultdict
    from enum import Enum

    # verl/utils/groupwise.py for the vectorized GRPO; its device lookup (verl.utils.device) → CPU.
    groupwise = {"np": np, "torch": torch, "os": os, "Any": Any, "Optional": Optional, "get_device_name": lambda: "cpu"}
    support.load_from_source(os.path.join(root, "verl", "utils", "groupwise.py"), [
        "_resolve_device", "_to_1d_numpy_object_array", "as_torch_index", "group_mean_std",
    ], groupwise)
    algos = {"np": np, "torch": torch, "defaultdict": defaultdict, "Enum": Enum, "Any": Any, "Optional": Optional,
             "as_torch_index": groupwise["as_torch_index"], "group_mean_std": groupwise["group_mean_std"]}
    support.load_from_source(os.path.join(root, "verl", "trainer", "ppo", "core_algos.py"), [
        "AdvantageEstimator", "ADV_ESTIMATOR_REGISTRY", "register_adv_est", "get_adv_estimator_fn",
        "compute_grpo_outcome_advantage", "compute_grpo_vectorized_outcome_advantage",
        "compute_rloo_outcome_advantage", "compute_rloo_vectorized_outcome_advantage",
    ], algos)
    ns.core_algos = types.SimpleNamespace(**{k: v for k, v in algos.items() if not k.startswith("__")})
    ns.AdvantageEstimator = algos["AdvantageEstimator"]

    trainer_path = os.path.join(root, "verl", "trainer", "ppo", "ray_trainer.py")
    ns.trainer_path = trainer_path
    trainer = {"DataProto": ns.DataProto, "core_algos": ns.core_algos, "AdvantageEstimator": ns.AdvantageEstimator,
               "torch": torch, "np": np, "Optional": Optional}
    support.load_from_source(trainer_path, ["compute_response_mask", "compute_advantage"], trainer)
    ns.compute_advantage = trainer["compute_advantage"]
    ns.compute_response_mask = trainer["compute_response_mask"]
    ns._get_gen_batch = support.load_method(trainer_path, "RayPPOTrainer", "_get_gen_batch", {"DataProto": ns.DataProto})
    # reward.py decorates compute_reward with verl/utils/transferqueue_utils.py's `tqbridge`, which
    # calls the function as it is when its arguments hold no BatchMeta (no TransferQueue): so here.
    reward = support.load_from_source(os.path.join(root, "verl", "trainer", "ppo", "reward.py"), ["compute_reward"],
                                      {"tqbridge": lambda **_: (lambda fn: fn)})
    ns._compute_or_extract_reward = support.load_method(trainer_path, "RayPPOTrainer", "_compute_or_extract_reward",
                                                        {"compute_reward": reward["compute_reward"]})
    _loaded = ns
    return ns


class AlgoConfigStandIn(dict):
    """verl's AlgoConfig as compute_advantage reads it: `config.get(key, default)`."""


def scores_tensor(rewards, length=4):
    """token_level_rewards as verl builds them: the reward on a row's last response token."""
    import torch

    t = torch.zeros(len(rewards), length, dtype=torch.float32)
    t[:, -1] = torch.tensor(rewards, dtype=torch.float32)
    return t
