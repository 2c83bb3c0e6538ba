"""rollout_budget against verl's own code at b178a3c (../shared/upstream), run here with
Debian's python3-torch: the patch applies, `group_advantages` equals verl's estimators on
uneven groups, and the batch the integration builds survives `_get_gen_batch` and
`DataProto.chunk`. Needs torch and numpy (/usr/bin/python3 after .ci/setup-python.sh)."""

import ast
import os
import random
import re
import shutil
import subprocess
import tempfile
import types
import unittest

from . import support, verl_upstream
from rollout_budget import group_advantages
from rollout_budget.verl import VerlAdapter, infer_multiple_of

# verl computes in float32; ours in float64. |ours − verl| ≤ ATOL + RTOL·|verl|.
ATOL = 2e-6
RTOL = 2e-6
VEC_TOL = 1e-5
FRAC_TOL = 2e-3


def uneven_instance(seed):
    """Rows of groups of 1–16 rollouts, interleaved, binary or fractional rewards."""
    rng = random.Random(seed)
    rows = []
    for g in range(rng.randint(1, 9)):
        size = rng.choice([1, 2, 3, 5, 8, 13, 16, rng.randint(1, 16)])
        p = rng.random()
        frac = rng.random() < 0.3
        for _ in range(size):
            rows.append(("%d/q%d" % (seed, g), round(rng.random(), 3) if frac else float(rng.random() < p)))
    rng.shuffle(rows)
    return [g for g, _ in rows], [r for _, r in rows]


class AdvantageEqualityTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ns = verl_upstream.load()

    def compare(self, ours, theirs, label, atol=ATOL, rtol=RTOL):
        worst = 0.0
        for k, (a, b) in enumerate(zip(ours, theirs)):
            self.assertLessEqual(abs(a - b), atol + rtol * abs(b), "%s row %d: ours %r, verl %r" % (label, k, a, b))
            worst = max(worst, abs(a - b))
        return worst

    def test_grpo_drgrpo_rloo_equal_verls_on_uneven_groups(self):
        import numpy as np
        import torch

        algos = self.ns.core_algos
        worst = {"grpo": 0.0, "drgrpo": 0.0, "rloo": 0.0}
        sizes = set()
        singletons = 0
        for seed in range(200):
            groups, rewards = uneven_instance(seed)
            index = np.array(groups, dtype=object)
            scores = verl_upstream.scores_tensor(rewards)
            mask = torch.ones_like(scores)
            sizes.update(groups.count(g) for g in set(groups))
            label = "seed %d" % seed
            for kind, verl in (
                ("grpo", algos.compute_grpo_outcome_advantage(scores.clone(), mask, index, epsilon=1e-6, norm_adv_by_std_in_grpo=True)[0]),
                ("drgrpo", algos.compute_grpo_outcome_advantage(scores.clone(), mask, index, epsilon=1e-6, norm_adv_by_std_in_grpo=False)[0]),
                ("rloo", algos.compute_rloo_outcome_advantage(scores.clone(), mask, index, epsilon=1e-6)[0]),
            ):
                ours = group_advantages(rewards, groups, kind=kind, epsilon=1e-6)
                worst[kind] = max(worst[kind], self.compare(ours, verl[:, -1].tolist(), "%s %s" % (label, kind)))
                # The advantage is broadcast over the response tokens.
                self.assertTrue(torch.equal(verl, verl[:, -1:].expand_as(verl) * mask))
            gvec = algos.compute_grpo_vectorized_outcome_advantage(scores.clone(), mask, index, epsilon=1e-6)[0][:, -1].tolist()
            # Its variance is one float32 pass, Σr² − (Σr)²/n, floored at epsilon: on 0/1 rewards
            # within VEC_TOL; on fractional rewards the cancellation costs up to FRAC_TOL.
            binary = all(r in (0.0, 1.0) for r in rewards)
            tol = VEC_TOL if binary else FRAC_TOL
            key = "grpo_vectorized" if binary else "grpo_vectorized_fractional"
            worst[key] = max(worst.get(key, 0.0), self.compare(
                group_advantages(rewards, groups, kind="grpo"), gvec, label + " grpo_vectorized", tol, tol))
            # verl's vectorized RLOO agrees except on a group of one rollout, which it gives 0
            # (`* (c > 1)`) where compute_rloo_outcome_advantage (and ours) keep the reward.
            vec = algos.compute_rloo_vectorized_outcome_advantage(scores.clone(), mask, index)[0][:, -1].tolist()
            ours = group_advantages(rewards, groups, kind="rloo")
            for k, g in enumerate(groups):
                if groups.count(g) == 1:
                    self.assertEqual(vec[k], 0.0)
                    singletons += 1
                else:
                    self.assertLessEqual(abs(ours[k] - vec[k]), ATOL + RTOL * abs(vec[k]), "%s rloo_vectorized row %d" % (label, k))
        self.assertTrue({1, 2, 3, 5, 8, 13, 16} <= sizes, sizes)
        self.assertGreater(singletons, 10)
        print("\ngroup_advantages vs verl core_algos, 200 uneven instances: max |diff| grpo %.2e, drgrpo %.2e, rloo %.2e, grpo_vectorized %.2e (fractional rewards %.2e)"
              % (worst["grpo"], worst["drgrpo"], worst["rloo"], worst["grpo_vectorized"], worst["grpo_vectorized_fractional"]))

    def test_compute_advantage_groups_by_uid(self):
        """verl's own dispatch (ray_trainer.compute_advantage) on a DataProto whose uid is the plan's group id."""
        import numpy as np
        import torch

        groups, rewards = uneven_instance(7)
        data = self.ns.DataProto.from_dict(
            tensors={"token_level_rewards": verl_upstream.scores_tensor(rewards), "response_mask": torch.ones(len(rewards), 4)},
            non_tensors={"uid": np.array(groups, dtype=object)},
        )
        for estimator, kind, norm in (("GRPO", "grpo", True), ("GRPO", "drgrpo", False), ("RLOO", "rloo", True)):
            out = self.ns.compute_advantage(data, adv_estimator=getattr(self.ns.AdvantageEstimator, estimator),
                                            norm_adv_by_std_in_grpo=norm, config=verl_upstream.AlgoConfigStandIn())
            self.compare(group_advantages(rewards, groups, kind=kind), out.batch["advantages"][:, -1].tolist(), estimator)


class PatchTest(unittest.TestCase):
    def setUp(self):
        self.root = verl_upstream.load().root
        self.dir = tempfile.mkdtemp(prefix="rb-verl-patch-")
        shutil.copytree(os.path.join(self.root, "verl"), os.path.join(self.dir, "verl"))

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_the_patch_applies_to_b178a3c_and_changes_exactly_these_lines(self):
        check = subprocess.run(["git", "apply", "--check", "--verbose", support.PATCH], cwd=self.dir, capture_output=True, text=True)
        self.assertEqual(check.returncode, 0, check.stderr)
        stat = subprocess.run(["git", "apply", "--numstat", support.PATCH], cwd=self.dir, capture_output=True, text=True)
        self.assertEqual(stat.stdout.split(), ["10", "6", "verl/trainer/ppo/ray_trainer.py"])
        applied = subprocess.run(["git", "apply", support.PATCH], cwd=self.dir, capture_output=True, text=True)
        self.assertEqual(applied.returncode, 0, applied.stderr)
        path = os.path.join(self.dir, "verl", "trainer", "ppo", "ray_trainer.py")
        with open(path, encoding="utf-8") as f:
            text = f.read()
        compile(text, path, "exec")
        fit = next(n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.FunctionDef) and n.name == "fit")
        source = ast.get_source_segment(text, fit)
        # fit's metrics dict is made once a step, before our figures go into it.
        self.assertEqual(len(re.findall(r"(?<![\w.])metrics = ", source)), 1)
        order = [source.index(s) for s in (
            "metrics = {}",
            'batch.non_tensor_batch["uid"] = np.array(',
            "batch = rollout_budget_verl.expand_batch(self, batch)",
            "gen_batch = self._get_gen_batch(batch)",
            "gen_batch_output = gen_batch  # rollout-budget",
            # Every round generated before the replicas are put to sleep (they stay awake between rounds).
            "batch, gen_batch_output = rollout_budget_verl.generate_in_rounds(",
            "self, batch, gen_batch_output, self.async_rollout_manager.generate_sequences",
            "self.checkpoint_manager.sleep_replicas()",
            'timing_raw.update(gen_batch_output.meta_info["timing"])',
            "batch = batch.union(gen_batch_output)",
            # The rounds' reward, kept as rm_scores, is what fit's reward step extracts.
            "reward_tensor, reward_extra_infos_dict = self._compute_or_extract_reward(",
            'batch.batch["token_level_scores"] = reward_tensor',
            "rollout_budget_verl.observe_batch(self, batch)",
            # fit's metrics dict, which its logger logs at the end of the step.
            "metrics.update(rollout_budget_verl.step_metrics(self))",
            "batch = compute_advantage(",
            "logger.log(data=metrics, step=self.global_steps)",
        )]
        self.assertEqual(order, sorted(order))
        # No repeat by rollout.n is left on the training path, nor a generation call of its own
        # (the sync branch, unreachable at b178a3c, is left: rounds refuse a trainer without async mode).
        self.assertNotIn("repeat(repeat_times=self.config.actor_rollout_ref.rollout.n", source)
        self.assertNotIn("self.async_rollout_manager.generate_sequences(gen_batch_output)", source)
        self.assertIn("self.async_rollout_mode = True", text)
        self.assertIn("from rollout_budget import verl as rollout_budget_verl", text)


class RecordingClient:
    """Forwards to a real client and keeps the plans it returned."""

    def __init__(self, client):
        self.client = client
        self.plans = []

    def plan(self, *args, **kwargs):
        plan = self.client.plan(*args, **kwargs)
        self.plans.append(plan)
        return plan

    def observe(self, results):
        return self.client.observe(results)


PROMPTS = [{"text": "problem %d" % i, "index": 100 + i, "data_source": "math"} for i in range(10)]


class ExpandedBatchTest(support.ServiceCase):
    """The expanded batch through verl's own _get_gen_batch and DataProto.chunk."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        from rollout_budget import HttpClient

        # History for three prompts, so the plan's groups differ in size.
        with HttpClient(cls.url) as c:
            c.observe([{"prompt_id": "math/100", "step": 0, "rewards": [1] * 8},
                       {"prompt_id": "math/101", "step": 0, "rewards": [0] * 7 + [1]},
                       {"prompt_id": "math/102", "step": 0, "rewards": [1, 0] * 4}])

    def setUp(self):
        from rollout_budget import HttpClient
        from . import verl_trainer

        self.ns = verl_upstream.load()
        self.trainer = verl_trainer
        self.http = HttpClient(self.url)
        self.client = RecordingClient(self.http)

    def tearDown(self):
        self.http.close()

    def expand(self, multiple_of, skip=True, budget=40):
        from rollout_budget.config import Settings

        adapter = VerlAdapter(self.client, rollout_n=4, max_tokens=8, multiple_of=multiple_of,
                              settings=Settings(budget_rollouts=budget, options={"skip": skip, "min_n": 3, "max_n": 9}))
        batch = self.trainer.dataset_batch(PROMPTS)
        return adapter, adapter.expand(batch, step=1)

    def test_ids_survive_get_gen_batch_in_extra_info_and_the_old_keys_would_not(self):
        adapter, batch = self.expand(multiple_of=4)
        plan = self.client.plans[-1]
        n = {a["prompt_id"]: a["n"] for a in plan["allocations"]}
        self.assertEqual(len(batch), sum(n.values()))
        # The regression: a top-level key (the old adapter's prompt_id / rollout_seed) is moved
        # into the generation batch by verl's _get_gen_batch and is gone from `batch`.
        import numpy as np

        batch.non_tensor_batch["prompt_id"] = np.array(["x"] * len(batch), dtype=object)
        for async_mode in (False, True):
            kept = self.ns.DataProto.from_dict(tensors={k: v for k, v in batch.batch.items()},
                                               non_tensors={k: v.copy() for k, v in batch.non_tensor_batch.items()})
            gen = self.ns._get_gen_batch(types.SimpleNamespace(async_rollout_mode=async_mode), kept)
            self.assertNotIn("prompt_id", kept.non_tensor_batch)
            self.assertIn("prompt_id", gen.non_tensor_batch)
            self.assertEqual(sorted(kept.non_tensor_batch), ["data_source", "extra_info", "reward_model", "uid"])
            infos = [e["rollout_budget"] for e in kept.non_tensor_batch["extra_info"]]
            self.assertEqual([r["group_id"] for r in infos], list(kept.non_tensor_batch["uid"]))
            self.assertEqual(len({r["rollout_id"] for r in infos}), len(infos))
            self.assertTrue(all(e["index"] == int(r["prompt_id"].split("/")[1]) for e, r in zip(kept.non_tensor_batch["extra_info"], infos)))
        # One uid per group, each group's rows together, sizes as planned and uneven.
        uids = list(batch.non_tensor_batch["uid"])
        for a in plan["allocations"]:
            self.assertEqual(uids.count("%d/%s" % (plan["step"], a["prompt_id"])), a["n"])
        self.assertGreater(len(set(n.values())), 1, n)

    def test_prompts_left_out_are_dropped_not_a_keyerror(self):
        # Regression: the old adapter raised KeyError on a --skip plan.
        adapter, batch = self.expand(multiple_of=4, budget=12)
        plan = self.client.plans[-1]
        planned = {a["prompt_id"] for a in plan["allocations"]}
        self.assertLess(len(planned), len(PROMPTS))
        seen = {e["rollout_budget"]["prompt_id"] for e in batch.non_tensor_batch["extra_info"]}
        self.assertEqual(seen, planned)

    def test_sum_n_a_multiple_of_the_workers_so_chunk_does_not_assert(self):
        workers = 4
        with self.assertLogs("rollout_budget", level="WARNING") as logs:
            _, batch = self.expand(multiple_of=workers, budget=38)
        # The plan's warning is logged, as the CLI prints it: the trainer's budget wastes 2 rollouts.
        self.assertIn("rollout-budget: step 1 plan: budget_rollouts 38 is not a multiple of multiple_of 4: at most 36 are planned",
                      "\n".join(logs.output))
        self.assertEqual(len(batch) % workers, 0)
        self.assertEqual(len(batch.chunk(workers)), workers)
        _, plain = self.expand(multiple_of=1, budget=38)
        self.assertNotEqual(len(plain) % workers, 0)
        with self.assertRaisesRegex(AssertionError, "only support equal chunk"):
            plain.chunk(workers)

    def test_a_token_budget_keeps_the_uniform_rollout_budget_beside_it(self):
        # Before, budget_tokens alone dropped the rollouts' default (prompts × n): a batch of 10
        # prompts × n 4 grew to 69 rollouts under a loose token budget.
        from rollout_budget.config import Settings

        adapter = VerlAdapter(self.client, rollout_n=4, max_tokens=8, multiple_of=1,
                              settings=Settings(budget_tokens=10_000, options={"min_n": 3, "max_n": 9}))
        batch = adapter.expand(self.trainer.dataset_batch(PROMPTS), step=1)
        plan = self.client.plans[-1]
        self.assertEqual(plan["budget"], {"rollouts": 40, "tokens": 10_000})
        self.assertLessEqual(len(batch), 40)

    def test_two_prompts_with_one_id_are_an_error_naming_the_rows(self):
        # Two files each numbered from 0 under one data_source: the second prompt was dropped and
        # its results counted as the first's, with nothing said.
        from rollout_budget.config import Settings

        adapter = VerlAdapter(self.client, rollout_n=4, max_tokens=8, settings=Settings(budget_rollouts=16))
        shards = [{"text": "shard A problem 0", "index": 0, "data_source": "math"}, {"text": "shard B problem 0", "index": 0, "data_source": "math"}]
        with self.assertRaises(ValueError) as caught:
            adapter.expand(self.trainer.dataset_batch(shards), step=1)
        self.assertIn("batch rows 0 and 1 are different prompts with the same id 'math/0'", str(caught.exception))
        # The same prompt twice (a sampler with replacement) is one candidate, as before.
        same = [dict(shards[0]), dict(shards[0])]
        batch = adapter.expand(self.trainer.dataset_batch(same), step=2)
        self.assertEqual([a["prompt_id"] for a in self.client.plans[-1]["allocations"]], ["math/0"])
        self.assertEqual(len(batch), 16)

    def test_image_prompts_without_an_index_have_ids_of_their_images(self):
        # verl's RLHFDataset puts each image into raw_prompt as {"type": "image", "image": <PIL
        # image>} (rl_dataset.py:319–326). Without extra_info.index the id hashed the messages
        # with json.dumps: TypeError, Object of type Image is not JSON serializable.
        import numpy as np

        try:
            from PIL import Image
        except ImportError:
            support.missing("PIL for verl's image prompts (Debian's python3-pil)")
        batch = self.trainer.dataset_batch([dict(PROMPTS[0], index=None) for _ in range(3)])
        colours = ["red", "blue", "red"]  # rows 0 and 2: the same image, one prompt
        raw = np.empty(3, dtype=object)
        raw[:] = [[{"role": "user", "content": [{"type": "image", "image": Image.new("RGB", (4, 4), c)},
                                                {"type": "text", "text": "Find x."}]}] for c in colours]
        info = np.empty(3, dtype=object)
        info[:] = [{"split": "train"} for _ in colours]
        batch.non_tensor_batch["raw_prompt"], batch.non_tensor_batch["extra_info"] = raw, info
        adapter = VerlAdapter(self.client, rollout_n=4, max_tokens=8)
        out = adapter.expand(batch, step=1)
        ids = [a["prompt_id"] for a in self.client.plans[-1]["allocations"]]
        self.assertEqual(len(ids), 2)
        self.assertTrue(all(i.startswith("h:") for i in ids), ids)
        self.assertEqual(len(out), 12)

    def test_a_prompt_twice_in_the_batch_keeps_the_steps_uniform_budget(self):
        # Its second row's rollouts go to the step's prompts: the step stays train_batch_size × n,
        # the multiple verl's mini-batches divide. Before: 3 prompts × 4 = 12 of the batch's 16.
        adapter = VerlAdapter(self.client, rollout_n=4, max_tokens=8)
        rows = [dict(PROMPTS[0]), dict(PROMPTS[1]), dict(PROMPTS[0]), dict(PROMPTS[2])]
        batch = adapter.expand(self.trainer.dataset_batch(rows), step=1)
        self.assertEqual(len(self.client.plans[-1]["allocations"]), 3)
        self.assertEqual(self.client.plans[-1]["budget"]["rollouts"], 16)
        self.assertEqual(len(batch), 16)

    def test_the_ppo_mini_batch_divides_the_rollouts_with_every_worker_implementation(self):
        # verl's engine workers (trainer.use_legacy_worker_impl=disable) pass ppo_mini_batch_size
        # × n as mini_batch_size (ray_trainer.py:1246–1255), and tensordict_utils.make_iterator
        # asserts batch % mini_batch == 0 (tensordict_utils.py:525; tensordict is not installed
        # here, so the numbers are checked, not the assert). The legacy workers (verl's default,
        # "auto") need it too: Megatron asserts it (protocol.py:827), FSDP took a remainder as a
        # mini-batch of its own (dp_actor.py:541; VerlMiniBatchTest runs verl's split). Before,
        # only "disable" counted it.
        t = self.trainer.TrainerStandIn(rollout_n=4, budget_settings={}, workers=4, dp_size=2)
        t.config["actor_rollout_ref"]["actor"] = {"ppo_mini_batch_size": 6}
        for impl in ("auto", "enable", "disable"):
            t.use_legacy_worker_impl = impl
            self.assertEqual(infer_multiple_of(t), 24, impl)  # lcm(4 workers, dp 2, 6 × 4)
        t.use_critic, t.critic_wg = True, object()
        t.config["critic"] = {"ppo_mini_batch_size": 5}
        self.assertEqual(infer_multiple_of(t), 120)  # and the critic's 5 × 4

    def test_a_budget_below_the_steps_multiple_is_an_error_naming_where_it_comes_from(self):
        # Found in review: with ppo_mini_batch_size × n in the multiple, a budget below it made
        # every step fail with BUDGET_INFEASIBLE or "no rollouts", naming neither the mini-batch
        # nor the way out.
        from rollout_budget.verl import adapter_for

        t = self.trainer.TrainerStandIn(rollout_n=4, budget_settings={"url": "http://127.0.0.1:9", "budget_rollouts": 40},
                                        workers=2, dp_size=2)
        t.config["actor_rollout_ref"]["actor"] = {"ppo_mini_batch_size": 12}
        with self.assertRaises(ValueError) as caught:
            adapter_for(t)
        self.assertIn("rollout_budget.budget_rollouts 40 is below the step's multiple 48, the lcm of the actor's "
                      "ppo_mini_batch_size 12 × rollout.n 4 (48), the agent-loop workers (2), the actor's data-parallel size (2)",
                      str(caught.exception))
        self.assertIn("set rollout_budget.multiple_of", str(caught.exception))

    def test_infer_multiple_of_reads_the_trainers_workers(self):
        t = self.trainer.TrainerStandIn(rollout_n=4, budget_settings={}, workers=4, dp_size=6)
        self.assertEqual(infer_multiple_of(t), 12)
        t.use_critic, t.critic_wg = True, object()
        t._get_dp_size = lambda wg, role: 6 if role == "actor" else 5
        self.assertEqual(infer_multiple_of(t), 60)


if __name__ == "__main__":
    unittest.main()
