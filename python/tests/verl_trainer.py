"""A verl training step as the patched `RayPPOTrainer.fit` runs it, for the tests.

Real verl code (tests/verl_upstream.py): DataProto and its operations, `_get_gen_batch`,
`RayPPOTrainer._compute_or_extract_reward` with reward.py's `compute_reward`,
`compute_response_mask`, `compute_advantage` with core_algos' estimators. Stand-ins, each named
after what it follows:
- `TrainerStandIn`: the RayPPOTrainer attributes the integration, `_get_gen_batch` and fit's
  reward step read (config, global_steps, async_rollout_mode,
  async_rollout_manager.agent_loop_workers, `_get_dp_size`, use_rm, use_reward_loop, reward_fn);
- `generate_sequences`: verl/experimental/agent_loop/agent_loop.py
  `AgentLoopManager.generate_sequences` — `prompts.chunk(len(self.agent_loop_workers))` (the
  divisibility assert is DataProto's own), one output row per input row, `DataProto.concat`,
  ``meta_info = {"timing": ..., **outputs[0].meta_info}`` (`_performance_metrics`' keys); with
  the reward loop (`reward_loop=True`) each row's score as ``rm_scores`` on its last response
  token and ``reward_extra_keys`` in meta_info (`AgentLoopWorker._postprocess`, agent_loop.py:763–798);
  the model is simulated: rollout k of a prompt passes with the prompt's rate, drawn from the
  rollout's seed in extra_info (so the per-rollout seed reaches generation);
- `RewardManagerStandIn`: verl/workers/reward_manager/naive.py `NaiveRewardManager.__call__`:
  the score on the last response token (``valid_response_length - 1``), a dict score's keys as
  ``reward_extra_info``; it counts the rows it scored.
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
    def __init__(self, rollout_n, budget_settings, workers=4, dp_size=2, reward_loop=False, adv_estimator="grpo"):
        self.config = Config({
            "actor_rollout_ref": {"rollout": {"n": rollout_n, "response_length": RESPONSE_LENGTH}},
            "algorithm": {"adv_estimator": adv_estimator},
            "reward_model": {"launch_reward_fn_async": False, "use_reward_loop": reward_loop},
            "rollout_budget": budget_settings,
        })
        self.global_steps = 0
        self.async_rollout_mode = True
        self.async_rollout_manager = types.SimpleNamespace(agent_loop_workers=[object()] * workers)
        self.actor_rollout_wg = object()
        self.dp_size = dp_size
        self.use_rm = False
        self.use_reward_loop = reward_loop
        self.reward_fn = None  # set by patched_step, which knows the pass rates

    def _get_dp_size(self, worker_group, role):
        # The reward model's own mesh when it has one (RewardModelStandIn.dp), else the actor's.
        return getattr(worker_group, "dp", self.dp_size)

    def _compute_or_extract_reward(self, batch, reward_fn=None, reward_for_val=False, sum_reward=False):
        # verl's own method (ray_trainer.py:480–534), run on this stand-in.
        return verl_upstream.load()._compute_or_extract_reward(self, batch, reward_fn=reward_fn, reward_for_val=reward_for_val,
                                                                 sum_reward=sum_reward)


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
    import numpy as np
    import torch

    ns = verl_upstream.load()
    chunks = prompts.chunk(len(trainer.async_rollout_manager.agent_loop_workers))
    outputs, seconds = [], []
    for chunk in chunks:
        n = len(chunk)
        mask = torch.zeros(n, RESPONSE_LENGTH, dtype=torch.int64)
        for i, info in enumerate(chunk.non_tensor_batch["extra_info"]):
            length = 2 + random.Random(info["rollout_budget"]["seed"] * 7 + 1).randrange(RESPONSE_LENGTH - 1)
            mask[i, :length] = 1
            seconds.append(0.1 * length)
        tensors = {"responses": torch.randint(5, 100, (n, RESPONSE_LENGTH)) * mask, "response_mask": mask}
        non_tensors, meta = {"__num_turns__": np.array([2] * n, dtype=np.int32)}, {}
        if trainer.use_reward_loop and getattr(trainer.async_rollout_manager, "scores", True):
            scores = [pass_of(info["rollout_budget"], pass_rates) for info in chunk.non_tensor_batch["extra_info"]]
            rm = torch.zeros(n, RESPONSE_LENGTH, dtype=torch.float32)
            rm[torch.arange(n), mask.sum(dim=1) - 1] = torch.tensor(scores, dtype=torch.float32)
            tensors["rm_scores"] = rm
            non_tensors["acc"] = np.array(scores)
            meta = {"reward_extra_keys": ["acc"]}
        outputs.append(ns.DataProto.from_dict(tensors=tensors, non_tensors=non_tensors, meta_info=meta))
    output = ns.DataProto.concat(outputs)
    slowest = int(np.argmax(seconds))
    timing = {"agent_loop/generate_sequences/min": min(seconds), "agent_loop/generate_sequences/max": max(seconds),
              "agent_loop/generate_sequences/mean": float(np.mean(seconds)), "agent_loop/slowest/generate_sequences": seconds[slowest],
              "agent_loop/slowest/tool_calls": 0.0, "agent_loop/slowest/response_length": int(output.batch["response_mask"][slowest].sum())}
    output.meta_info = {"timing": timing, **outputs[0].meta_info}
    return output


class RewardModelStandIn:
    """Stand-in for a reward model's worker group, `rm_wg.compute_rm_score` as verl dispatches it
    (fsdp_workers.py:1926: make_nd_compute_dataproto_dispatch_fn over the reward mesh, whose
    split is verl's own `DataProto.chunk`, asserting equal parts), on `dp` data-parallel ranks:
    each row's rm_scores is `pass_of` the rollout on its last response token
    (fsdp_workers.py:1928–1982 returns DataProto.from_dict({"rm_scores": ...}))."""

    def __init__(self, pass_rates, dp):
        self.pass_rates = pass_rates
        self.dp = dp
        self.calls = []

    def compute_rm_score(self, data):
        import torch

        ns = verl_upstream.load()
        self.calls.append(len(data))
        parts = []
        for part in data.chunk(self.dp):
            mask = part.batch["response_mask"]
            rm = torch.zeros(mask.shape, dtype=torch.float32)
            scores = [pass_of(info["rollout_budget"], self.pass_rates) for info in part.non_tensor_batch["extra_info"]]
            rm[torch.arange(len(part)), mask.sum(dim=1) - 1] = torch.tensor(scores, dtype=torch.float32)
            parts.append(ns.DataProto.from_dict(tensors={"rm_scores": rm}))
        return ns.DataProto.concat(parts)


class RewardLoopManagerStandIn(RewardModelStandIn):
    """Stand-in for verl's RewardLoopManager.compute_rm_score (reward_loop.py:281–315): chunked
    over its workers (`reward_loop_workers`), rm_scores on the last token, and the reward
    manager's extra info ({"acc": score}, naive.py) as non-tensors with meta_info's
    reward_extra_keys."""

    def __init__(self, pass_rates, workers):
        super().__init__(pass_rates, dp=workers)
        self.reward_loop_workers = [object()] * workers

    def compute_rm_score(self, data):
        import numpy as np

        out = super().compute_rm_score(data)
        out.non_tensor_batch["acc"] = np.array([pass_of(info["rollout_budget"], self.pass_rates) for info in data.non_tensor_batch["extra_info"]])
        out.meta_info["reward_extra_keys"] = ["acc"]
        return out


class RewardManagerStandIn:
    """Stand-in for NaiveRewardManager (see the module doc): the score is `pass_of` the rollout."""

    def __init__(self, pass_rates):
        self.pass_rates = pass_rates
        self.rows = 0

    def __call__(self, data, return_dict=False):
        import torch

        mask = data.batch["response_mask"]
        scores = torch.zeros(mask.shape, dtype=torch.float32)
        acc = []
        for i, info in enumerate(data.non_tensor_batch["extra_info"]):
            acc.append(pass_of(info["rollout_budget"], self.pass_rates))
            scores[i, int(mask[i].sum().item()) - 1] = acc[-1]
        self.rows += len(data)
        return {"reward_tensor": scores, "reward_extra_info": {"acc": acc}} if return_dict else scores


def patched_step(trainer, batch_dict_batch, pass_rates, estimator, norm_adv_by_std_in_grpo=True):
    """The patched fit's step, in its order (python/patches/verl-b178a3c.patch; ray_trainer.py
    1375–1600 without REMAX, the log-prob and value passes, and the updates); returns the batch
    after compute_advantage. fit's timing_raw is kept as ``trainer.timing_raw``, its metrics as
    ``trainer.metrics``."""
    import numpy as np

    from rollout_budget import verl as rollout_budget_verl

    ns = verl_upstream.load()
    if trainer.reward_fn is None:
        trainer.reward_fn = RewardManagerStandIn(pass_rates)
    trainer.global_steps += 1
    trainer.timing_raw = timing_raw = {}
    trainer.metrics = metrics = {}
    batch = batch_dict_batch
    batch.non_tensor_batch["uid"] = np.array([str(uuid.uuid4()) for _ in range(len(batch.batch))], dtype=object)
    batch = rollout_budget_verl.expand_batch(trainer, batch)
    gen_batch = ns._get_gen_batch(trainer, batch)
    gen_batch.meta_info["global_steps"] = trainer.global_steps
    gen_batch_output = gen_batch
    batch, gen_batch_output = rollout_budget_verl.generate_in_rounds(
        trainer, batch, gen_batch_output, lambda prompts: generate_sequences(trainer, prompts, pass_rates))
    timing_raw.update(gen_batch_output.meta_info["timing"])
    gen_batch_output.meta_info.pop("timing", None)
    batch = batch.union(gen_batch_output)
    if "response_mask" not in batch.batch.keys():
        batch.batch["response_mask"] = ns.compute_response_mask(batch)
    # fit's reward step (ray_trainer.py:1468–1473): the reward model when use_rm (no rm_scores yet), then the reward.
    if trainer.use_rm and "rm_scores" not in batch.batch.keys():
        scorer = trainer.reward_loop_manager if trainer.use_reward_loop else trainer.rm_wg
        batch = batch.union(scorer.compute_rm_score(batch))
    reward_tensor, reward_extra_infos_dict = trainer._compute_or_extract_reward(batch, reward_fn=trainer.reward_fn, reward_for_val=False)
    batch.batch["token_level_scores"] = reward_tensor
    rollout_budget_verl.observe_batch(trainer, batch)
    metrics.update(rollout_budget_verl.step_metrics(trainer))
    if reward_extra_infos_dict:
        batch.non_tensor_batch.update({k: np.array(v) for k, v in reward_extra_infos_dict.items()})
    batch.batch["token_level_rewards"] = batch.batch["token_level_scores"]
    return ns.compute_advantage(batch, adv_estimator=estimator, norm_adv_by_std_in_grpo=norm_adv_by_std_in_grpo,
                                config=verl_upstream.AlgoConfigStandIn())
