"""A verl training step as the patched `RayPPOTrainer.fit` runs it, for the tests.

Real verl code (tests/verl_upstream.py): DataProto and its operations, `_get_gen_batch`,
`compute_advantage` with core_algos' estimators. Stand-ins, each named after what it follows:
- `TrainerStandIn`: the RayPPOTrainer attributes the integration and `_get_gen_batch` read
  (config, global_steps, async_rollout_mode, async_rollout_manager.agent_loop_workers,
  `_get_dp_size`);
- `generate_sequences`: verl/experimental/agent_loop/agent_loop.py
  `AgentLoopManager.generate_sequences` — `prompts.chunk(len(self.agent_loop_workers))` (the
  divisibility assert is DataProto's own), one output row per input row, `DataProto.concat`;
  the model is simulated: rollout k of a prompt passes with the prompt's rate, drawn from the
  rollout's seed in extra_info (so the per-rollout seed reaches generation);
- `reward_tensor`: the reward manager's `token_level_scores`: the score on the last response
  token (verl/workers/reward_manager/naive.py writes it at `valid_response_length - 1`).
"""

import random
import types
import uuid

from . import verl_upstream

RESPONSE_LENGTH = 8


class Config(dict):
    """OmegaConf-like: attribute and `.get` access over nested dicts."""

    def __getattr__(self, key):
        try:
            value = self[key]
        except KeyError:
            raise AttributeError(key) from None
        return Config(value) if isinstance(value, dict) and not isinstance(value, Config) else value


class TrainerStandIn:
    def __init__(self, rollout_n, budget_settings, workers=4, dp_size=2):
        self.config = Config({
            "actor_rollout_ref": {"rollout": {"n": rollout_n, "response_length": RESPONSE_LENGTH}},
            "rollout_budget": budget_settings,
        })
        self.global_steps = 0
        self.async_rollout_mode = True
        self.async_rollout_manager = types.SimpleNamespace(agent_loop_workers=[object()] * workers)
        self.actor_rollout_wg = object()
        self.dp_size = dp_size

    def _get_dp_size(self, worker_group, role):
        return self.dp_size


def dataset_batch(prompts):
    """One dataloader batch as verl's RLHFDataset + collate produce it (verl/utils/dataset/rl_dataset.py
    __getitem__): a dummy tensor, and raw_prompt, data_source, reward_model, extra_info (with the
    dataset index), index, tools_kwargs, interaction_kwargs as object arrays."""
    import numpy as np
    import torch

    ns = verl_upstream.load()

    def obj(values):
        col = np.empty(len(values), dtype=object)
        col[:] = values
        return col

    return ns.DataProto.from_single_dict({
        "dummy_tensor": torch.zeros(len(prompts), 1, dtype=torch.uint8),
        "raw_prompt": obj([[{"role": "user", "content": p["text"]}] for p in prompts]),
        "data_source": obj([p["data_source"] for p in prompts]),
        "reward_model": obj([{"ground_truth": "x", "style": "rule"} for _ in prompts]),
        "extra_info": obj([{"index": p["index"], "split": "train"} for p in prompts]),
        "index": obj([p["index"] for p in prompts]),
        "tools_kwargs": obj([{} for _ in prompts]),
        "interaction_kwargs": obj([{} for _ in prompts]),
    })


def pass_of(row_info, pass_rates):
    rng = random.Random(row_info["seed"])
    return 1.0 if rng.random() < pass_rates[row_info["prompt_id"]] else 0.0


def generate_sequences(trainer, prompts, pass_rates):
    """Stand-in for AgentLoopManager.generate_sequences (see the module doc)."""
    import torch

    ns = verl_upstream.load()
    chunks = prompts.chunk(len(trainer.async_rollout_manager.agent_loop_workers))
    outputs = []
    for chunk in chunks:
        n = len(chunk)
        mask = torch.zeros(n, RESPONSE_LENGTH, dtype=torch.int64)
        for i, info in enumerate(chunk.non_tensor_batch["extra_info"]):
            length = 2 + random.Random(info["rollout_budget"]["seed"] * 7 + 1).randrange(RESPONSE_LENGTH - 1)
            mask[i, :length] = 1
        outputs.append(ns.DataProto.from_dict(tensors={
            "responses": torch.randint(5, 100, (n, RESPONSE_LENGTH)) * mask,
            "response_mask": mask,
        }))
    return ns.DataProto.concat(outputs)


def reward_tensor(batch, pass_rates):
    """Stand-in for the reward manager: each row's score on its last response token."""
    import torch

    mask = batch.batch["response_mask"]
    scores = torch.zeros(mask.shape, dtype=torch.float32)
    for i, info in enumerate(batch.non_tensor_batch["extra_info"]):
        last = int(mask[i].sum().item()) - 1
        scores[i, last] = pass_of(info["rollout_budget"], pass_rates)
    return scores


def patched_step(trainer, batch_dict_batch, pass_rates, estimator, norm_adv_by_std_in_grpo=True):
    """The patched fit's step, in its order (python/patches/verl-b178a3c.patch); returns the
    batch after compute_advantage."""
    import numpy as np

    from rollout_budget import verl as rollout_budget_verl

    ns = verl_upstream.load()
    trainer.global_steps += 1
    batch = batch_dict_batch
    batch.non_tensor_batch["uid"] = np.array([str(uuid.uuid4()) for _ in range(len(batch.batch))], dtype=object)
    batch = rollout_budget_verl.expand_batch(trainer, batch)
    gen_batch = ns._get_gen_batch(trainer, batch)
    gen_batch.meta_info["global_steps"] = trainer.global_steps
    gen_batch_output = gen_batch
    gen_batch_output = generate_sequences(trainer, gen_batch_output, pass_rates)
    batch = batch.union(gen_batch_output)
    batch.batch["token_level_scores"] = reward_tensor(batch, pass_rates)
    rollout_budget_verl.observe_batch(trainer, batch)
    batch.batch["token_level_rewards"] = batch.batch["token_level_scores"]
    return ns.compute_advantage(batch, adv_estimator=estimator, norm_adv_by_std_in_grpo=norm_adv_by_std_in_grpo,
                                config=verl_upstream.AlgoConfigStandIn())
