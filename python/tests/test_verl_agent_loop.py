"""verl's agent loops with the plan's seeds (rollout_budget.verl_agent_loop), on verl's own code.

Run as written from the verl snapshot (b178a3c, ../shared/upstream), loaded from source
(support.load_from_source / load_method) because its modules import Ray, hydra, pydantic and
transformers:
- verl/experimental/agent_loop/agent_loop.py: `AgentLoopWorker.generate_sequences` and
  `_run_agent_loop` (the batch's sampling params, one task a row with the row's fields as
  keyword arguments, the agent loop made from the registry's config), `get_trajectory_info`,
  `DictConfigWrap`, `AgentLoopBase`;
- single_turn_agent_loop.py: `SingleTurnAgentLoop`; tool_agent_loop.py: `ToolAgentLoop`,
  `AgentData`, `AgentState` (its state machine, without tools);
- utils.py: `resolve_config_path`; verl/utils/chat_template.py: `initialize_system_prompt`;
  verl/utils/ray_utils.py: `get_event_loop`.
The file `agent_loop_config_path` names is read with OmegaConf (Debian's python3-omegaconf) and
registered by the lines of `AgentLoopWorker.__init__` (agent_loop.py:375–380), repeated in
`register_config` below: that constructor starts Ray actors. The batch is the patched step's
(`expand_batch`, then verl's `_get_gen_batch`) against a real `rollout-budget serve`.

Stand-ins, each for what cannot run here:
- `instantiate`: hydra.utils.instantiate on a config with `_target_`: the target located as
  hydra's `_locate` does (import the longest module prefix, then attributes), called with the
  config's other keys and the call's keyword arguments;
- `ServerManagerStandIn`: `AsyncLLMServerManager.generate` (agent_loop.py:95–122); it records
  each request's sampling params and answers a few tokens, as the rollout server's TokenOutput;
- `TokenizerStandIn`: a chat template that tokenizes a message list to one id a character;
- `AgentLoopOutput`: a record of its fields (verl's is a pydantic model; pydantic is not
  installable here); `simple_timer`, `rollout_trace_attr`, `rollout_trace_op`: no-ops (timing
  and tracing); `RolloutTraceConfig`: no trace sampling; `_agent_loop_postprocess` and
  `_postprocess`: the outputs as they are (their padding is not what is checked);
- ToolAgentLoop's tool parser: finds no tool call (no tools are configured).
"""

import asyncio
import contextlib
import enum
import importlib
import importlib.util
import logging
import os
import sys
import types
import unittest
import uuid
from dataclasses import dataclass
from typing import Any, Optional

from . import support, verl_trainer, verl_upstream

PROMPTS = [{"text": "problem %d" % i, "index": i, "data_source": "math"} for i in range(6)]


def instantiate(config, **kwargs):
    """Stand-in for hydra.utils.instantiate (see the module doc)."""
    parts = config["_target_"].split(".")
    obj, at = None, 0
    for k in range(len(parts), 0, -1):  # the longest importable module prefix
        try:
            obj, at = importlib.import_module(".".join(parts[:k])), k
            break
        except ImportError:
            continue
    for part in parts[at:]:
        obj = getattr(obj, part)
    args = {k: v for k, v in config.items() if k != "_target_"}
    args.update(kwargs)
    return obj(**args)


class ServerManagerStandIn:
    """Stand-in for AsyncLLMServerManager.generate (see the module doc)."""

    def __init__(self):
        self.requests = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, image_data=None, video_data=None):
        self.requests.append({"prompt_ids": list(prompt_ids), "sampling_params": sampling_params})
        return types.SimpleNamespace(token_ids=[7, 8, 9], log_probs=None, routed_experts=None, num_preempted=None)


class TokenizerStandIn:
    eos_token_id = 0

    def apply_chat_template(self, messages, tools=None, add_generation_prompt=False, tokenize=True, **kwargs):
        text = "".join("<%s>%s" % (m["role"], m["content"]) for m in messages) + ("<assistant>" if add_generation_prompt else "")
        return [ord(c) for c in text] if tokenize else text

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(i) for i in ids)


class AgentLoopOutputStandIn:
    def __init__(self, **fields):
        self.__dict__.update(fields)


@contextlib.contextmanager
def no_op(*args, **kwargs):
    yield


class ToolParserStandIn:
    @classmethod
    def get_tool_parser(cls, name, tokenizer):
        return cls()

    async def extract_tool_calls(self, response_ids, tools=None):
        return "", []


_verl = None


def load_verl():
    """verl's agent-loop code (the module doc), loaded once."""
    global _verl
    if _verl is not None:
        return _verl
    import numpy as np

    root = support.unpack("verl")
    loop_dir = os.path.join(root, "verl", "experimental", "agent_loop")
    ns = types.SimpleNamespace()
    common = {"Any": Any, "Optional": Optional, "os": os, "logging": logging, "asyncio": asyncio, "np": np,
              "uuid4": uuid.uuid4, "AgentLoopOutput": AgentLoopOutputStandIn, "simple_timer": no_op,
              "rollout_trace_attr": no_op, "rollout_trace_op": lambda fn: fn, "logger": logging.getLogger("verl-test")}
    support.load_from_source(os.path.join(root, "verl", "utils", "ray_utils.py"), ["get_event_loop"], common)
    support.load_from_source(os.path.join(root, "verl", "utils", "chat_template.py"), ["initialize_system_prompt"], common)
    from abc import ABC, abstractmethod

    base = dict(common, ABC=ABC, abstractmethod=abstractmethod)
    support.load_from_source(os.path.join(loop_dir, "agent_loop.py"), [
        "DictConfigWrap", "AgentLoopBase", "_agent_loop_registry", "register", "get_trajectory_info"], base)
    for name in ("DictConfigWrap", "AgentLoopBase", "_agent_loop_registry", "register", "get_trajectory_info"):
        setattr(ns, name, base[name])
    single = dict(base, initialize_tools_from_config=lambda path: [])
    support.load_from_source(os.path.join(loop_dir, "single_turn_agent_loop.py"), ["SingleTurnAgentLoop"], single)
    ns.SingleTurnAgentLoop = single["SingleTurnAgentLoop"]
    tool = dict(base, initialize_tools_from_config=lambda path: [], ToolParser=ToolParserStandIn, Enum=enum.Enum,
                dataclass=dataclass, json=__import__("json"))
    support.load_from_source(os.path.join(loop_dir, "tool_agent_loop.py"), ["AgentState", "AgentData", "ToolAgentLoop"], tool)
    ns.ToolAgentLoop = tool["ToolAgentLoop"]
    utils = {"os": os, "Any": Any}
    support.load_from_source(os.path.join(loop_dir, "utils.py"), ["resolve_config_path"], utils)
    ns.resolve_config_path = utils["resolve_config_path"]
    path = os.path.join(loop_dir, "agent_loop.py")
    worker = {"np": np, "asyncio": asyncio, "Any": Any, "DataProto": verl_upstream.load().DataProto,
              "RolloutTraceConfig": types.SimpleNamespace(get_instance=lambda: types.SimpleNamespace(max_samples_per_step_per_worker=None)),
              "get_trajectory_info": ns.get_trajectory_info, "rollout_trace_attr": no_op,
              "_agent_loop_registry": ns._agent_loop_registry, "DictConfigWrap": ns.DictConfigWrap,
              "hydra": types.SimpleNamespace(utils=types.SimpleNamespace(instantiate=instantiate))}
    ns.generate_sequences = support.load_method(path, "AgentLoopWorker", "generate_sequences", worker)
    ns._run_agent_loop = support.load_method(path, "AgentLoopWorker", "_run_agent_loop", worker)
    _verl = ns
    return ns


@contextlib.contextmanager
def verl_modules(ns):
    """verl's module names, holding the classes loaded from its source, for the time of a test
    (the seeded classes import verl's by these names)."""
    names = {
        "verl": types.ModuleType("verl"),
        "verl.experimental": types.ModuleType("verl.experimental"),
        "verl.experimental.agent_loop": types.ModuleType("verl.experimental.agent_loop"),
        "verl.experimental.agent_loop.single_turn_agent_loop": types.ModuleType("single_turn_agent_loop"),
        "verl.experimental.agent_loop.tool_agent_loop": types.ModuleType("tool_agent_loop"),
    }
    names["verl.experimental.agent_loop.single_turn_agent_loop"].SingleTurnAgentLoop = ns.SingleTurnAgentLoop
    names["verl.experimental.agent_loop.tool_agent_loop"].ToolAgentLoop = ns.ToolAgentLoop
    saved = {k: sys.modules.get(k) for k in names}
    sys.modules.update(names)
    from rollout_budget import verl_agent_loop

    made = dict(verl_agent_loop._made)
    verl_agent_loop._made.clear()
    try:
        yield
    finally:
        verl_agent_loop._made.clear()
        verl_agent_loop._made.update(made)
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


class Worker:
    """The AgentLoopWorker attributes generate_sequences and _run_agent_loop read."""

    def __init__(self, ns, config):
        self.config = config
        self.server_manager = ServerManagerStandIn()
        self.tokenizer = TokenizerStandIn()
        self.processor = None
        self.dataset_cls = object
        self._ns = ns

    async def _run_agent_loop(self, sampling_params, trajectory, **kwargs):
        return await self._ns._run_agent_loop(self, sampling_params, trajectory, **kwargs)

    async def _agent_loop_postprocess(self, output, **kwargs):
        return output

    def _postprocess(self, outputs):
        return outputs


def register_config(ns, path):
    """agent_loop.py:375–380, AgentLoopWorker.__init__'s registration of agent_loop_config_path."""
    from omegaconf import OmegaConf

    resolved_path = ns.resolve_config_path(path)
    agent_loop_configs = OmegaConf.load(resolved_path)
    for agent_loop_config in agent_loop_configs:
        ns._agent_loop_registry[agent_loop_config.name] = agent_loop_config


def trainer_config(rollout_name, agent_loop):
    from omegaconf import OmegaConf

    from rollout_budget import verl_agent_loop

    return OmegaConf.create({
        "actor_rollout_ref": {"rollout": {
            "name": rollout_name, "temperature": 1.0, "top_p": 1.0, "top_k": -1, "calculate_log_probs": False,
            "prompt_length": 512, "response_length": 8,
            "val_kwargs": {"temperature": 0.0, "top_p": 1.0, "top_k": -1},
            "agent": {"default_agent_loop": agent_loop, "agent_loop_config_path": verl_agent_loop.CONFIG_PATH},
            "multi_turn": {"max_user_turns": 2, "max_assistant_turns": 2, "max_parallel_calls": 1,
                           "max_tool_response_length": 64, "tool_response_truncate_side": "middle",
                           "tool_config_path": None, "format": "hermes", "interaction_config_path": None},
        }},
        "data": {"tool_config_path": None},
    })


class SeededAgentLoopTest(support.ServiceCase):
    def setUp(self):
        support.require_torch()
        if importlib.util.find_spec("omegaconf") is None:
            support.missing("omegaconf (python3-omegaconf)")
        self.ns = load_verl()
        self.ns._agent_loop_registry.clear()

    def step_batch(self):
        """A step's generation batch as the patched fit makes it: expand_batch, _get_gen_batch."""
        import numpy as np

        from rollout_budget import verl as rollout_budget_verl

        trainer = verl_trainer.TrainerStandIn(rollout_n=4, workers=1, dp_size=1, budget_settings={
            "url": self.url, "options": {"min_n": 2, "max_n": 8, "seed": 3}})
        self.addCleanup(lambda: trainer._rollout_budget.client.close())
        trainer.global_steps = 1
        batch = verl_trainer.dataset_batch(PROMPTS)
        batch.non_tensor_batch["uid"] = np.array([str(uuid.uuid4()) for _ in range(len(batch))], dtype=object)
        batch = rollout_budget_verl.expand_batch(trainer, batch)
        gen_batch = verl_upstream.load()._get_gen_batch(trainer, batch)
        gen_batch.meta_info["global_steps"] = trainer.global_steps
        return gen_batch

    def generate(self, rollout_name, agent_loop, gen_batch):
        register_config(self.ns, trainer_config(rollout_name, agent_loop).actor_rollout_ref.rollout.agent.agent_loop_config_path)
        worker = Worker(self.ns, trainer_config(rollout_name, agent_loop))
        with verl_modules(self.ns):
            outputs = asyncio.run(self.ns.generate_sequences(worker, gen_batch))
        self.assertEqual(len(outputs), len(gen_batch))
        return worker.server_manager.requests

    def plan_seeds(self, gen_batch):
        return [info["rollout_budget"]["seed"] for info in gen_batch.non_tensor_batch["extra_info"]]

    def assert_seeds(self, requests, gen_batch, key):
        """Each row's request (its prompt) carries the row's plan seed under `key`. The rows' tasks
        run concurrently (tokenizing in an executor), so requests come in any order."""
        tok = TokenizerStandIn()
        rows = gen_batch.non_tensor_batch
        want = sorted((tuple(tok.apply_chat_template(list(m), add_generation_prompt=True)), info["rollout_budget"]["seed"])
                      for m, info in zip(rows["raw_prompt"], rows["extra_info"]))
        got = sorted((tuple(r["prompt_ids"]), r["sampling_params"].get(key)) for r in requests)
        self.assertEqual(got, want)

    def test_the_config_file_registers_both_loops_and_their_targets_resolve(self):
        from rollout_budget import verl_agent_loop

        register_config(self.ns, verl_agent_loop.CONFIG_PATH)
        registry = self.ns._agent_loop_registry
        self.assertEqual(sorted(registry), ["rollout_budget_single_turn", "rollout_budget_tool"])
        with verl_modules(self.ns):
            single = instantiate(registry["rollout_budget_single_turn"], **self.loop_kwargs())
            tool = instantiate(registry["rollout_budget_tool"], **self.loop_kwargs())
        self.assertIsInstance(single, self.ns.SingleTurnAgentLoop)
        self.assertIsInstance(tool, self.ns.ToolAgentLoop)
        self.assertEqual(type(single).__module__, "rollout_budget.verl_agent_loop")

    def loop_kwargs(self):
        config = trainer_config("vllm", "rollout_budget_single_turn")
        return {"trainer_config": self.ns.DictConfigWrap(config=config), "server_manager": ServerManagerStandIn(),
                "tokenizer": TokenizerStandIn(), "processor": None, "dataset_cls": object,
                "dataset_config": self.ns.DictConfigWrap(config.data)}

    def test_on_vllm_each_rollout_samples_with_its_plan_seed(self):
        gen_batch = self.step_batch()
        requests = self.generate("vllm", "rollout_budget_single_turn", gen_batch)
        seeds = self.plan_seeds(gen_batch)
        self.assertEqual(len(set(seeds)), len(seeds), "one seed a rollout")
        self.assert_seeds(requests, gen_batch, "seed")
        for r in requests:
            params = dict(r["sampling_params"])
            params.pop("seed")
            # The rest is the batch's sampling params as verl's generate_sequences makes them.
            self.assertEqual(params, {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0,
                                      "logprobs": False})
            self.assertNotIn("sampling_seed", r["sampling_params"])
        print("\nverl agent loop: %d rollouts, seeds %s…" % (len(seeds), seeds[:4]))

    def test_on_sglang_the_seed_is_sampling_seed(self):
        gen_batch = self.step_batch()
        requests = self.generate("sglang", "rollout_budget_single_turn", gen_batch)
        self.assert_seeds(requests, gen_batch, "sampling_seed")
        self.assertFalse(any("seed" in r["sampling_params"] for r in requests))

    def test_the_tool_loop_samples_with_the_rollout_seed(self):
        gen_batch = self.step_batch()
        requests = self.generate("vllm", "rollout_budget_tool", gen_batch)
        self.assert_seeds(requests, gen_batch, "seed")

    def test_verl_own_loop_sends_no_seed(self):
        # The control: verl's single_turn_agent with the same batch sends the batch's params only.
        gen_batch = self.step_batch()
        self.ns._agent_loop_registry["single_turn_agent"] = {"_target_": "verl.experimental.agent_loop.single_turn_agent_loop.SingleTurnAgentLoop"}
        requests = self.generate("vllm", "single_turn_agent", gen_batch)
        self.assertEqual(len(requests), len(gen_batch))
        self.assertFalse(any("seed" in r["sampling_params"] for r in requests))

    def test_rows_without_the_plan_ids_keep_the_batch_params(self):
        # Validation batches are not planned: their rows carry no rollout_budget ids.
        batch = verl_trainer.dataset_batch(PROMPTS)
        batch.meta_info["validate"] = True
        requests = self.generate("vllm", "rollout_budget_single_turn", batch)
        self.assertEqual(len(requests), len(PROMPTS))
        for r in requests:
            self.assertEqual(r["sampling_params"], {"temperature": 0.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0,
                                                    "logprobs": False})

    def test_another_rollout_is_left_as_it_was_and_logged_once(self):
        from rollout_budget import verl_agent_loop

        verl_agent_loop._warned.discard("trtllm")
        gen_batch = self.step_batch()
        with self.assertLogs("rollout_budget", level="WARNING") as logs:
            requests = self.generate("trtllm", "rollout_budget_single_turn", gen_batch)
        self.assertEqual(len(logs.records), 1, logs.output)
        self.assertIn("rollout.name=trtllm", logs.output[0])
        self.assertFalse(any("seed" in r["sampling_params"] or "sampling_seed" in r["sampling_params"] for r in requests))


class SeededParamsTest(unittest.TestCase):
    def test_a_copy_with_the_seed_and_errors_for_a_seed_that_is_not_an_integer(self):
        from rollout_budget.verl_agent_loop import seeded_params

        shared = {"temperature": 1.0}
        out = seeded_params(shared, "vllm", {"extra_info": {"rollout_budget": {"seed": 12}}})
        self.assertEqual(out, {"temperature": 1.0, "seed": 12})
        self.assertEqual(shared, {"temperature": 1.0}, "the batch's dict is shared by its rows: never changed")
        self.assertIs(seeded_params(shared, "vllm", {"extra_info": {"index": 3}}), shared)
        self.assertIs(seeded_params(shared, "vllm", {}), shared)
        with self.assertRaisesRegex(ValueError, r"extra_info\['rollout_budget'\]\['seed'\] is 1.5, not an integer"):
            seeded_params(shared, "vllm", {"extra_info": {"rollout_budget": {"seed": 1.5}}})

    def test_the_module_imports_without_verl_and_says_so_when_a_class_is_asked_for(self):
        from rollout_budget import verl_agent_loop

        self.assertTrue(os.path.isfile(verl_agent_loop.CONFIG_PATH))
        if "verl" not in sys.modules:
            with self.assertRaises(ImportError):
                verl_agent_loop.SeededSingleTurnAgentLoop  # noqa: B018
        with self.assertRaises(AttributeError):
            verl_agent_loop.NoSuchLoop  # noqa: B018


if __name__ == "__main__":
    unittest.main()
