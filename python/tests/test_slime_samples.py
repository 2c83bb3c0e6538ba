"""rollout_budget.slime with what slime users run beyond one text Sample a rollout, against
slime's own code at 624b824 (tests/slime_upstream.py) and a real `rollout-budget serve`: a
generate function that fans a rollout out into several samples, image prompts behind one
question text, the reward normalisation it needs, and the last checkpoint of a run sized by
--num-epoch. Found in a review against slime's code (2026-11-29). Needs torch and httpx
(/usr/bin/python3 after .ci/setup-python.sh), PIL for the image prompts."""

import logging
import os
import shlex
import shutil
import tempfile
import unittest
from unittest import mock

from . import slime_sim, slime_upstream, support
from .slime_case import LABELS, _RolloutCase
from rollout_budget import group_advantages, stable_prompt_id
from rollout_budget.config import Settings


def images():
    try:
        from PIL import Image
    except ImportError:
        support.missing("PIL for slime's image prompts (Debian's python3-pil)")
    return Image


class FanOutTest(_RolloutCase):
    def manager(self, rollout_fn="tests.slime_sim.generate_fanout_rollout"):
        args = slime_upstream.args()
        dataset = [self.ns.Sample(prompt="Problem %s" % label, label=label, metadata={"index": i, "data_source": "math"})
                   for i, label in enumerate(LABELS)]
        return args, slime_upstream.ManagerStandIn(
            args, rollout_fn=self.ns.load_function(rollout_fn), data_source=slime_upstream.DataSourceStandIn(args, dataset),
            post_process=self.ns.load_function("rollout_budget.slime.post_process_rewards"))

    def test_a_rollout_fanned_out_is_one_rollout_and_its_samples_train_in_its_group(self):
        # Before: the step was generated, then failed on the first sample without our ids
        # (TypeError: 'NoneType' object is not subscriptable), nothing observed.
        _, manager = self.manager()
        logged = []
        handler = logging.Handler(logging.WARNING)
        handler.emit = lambda record: logged.append(record.getMessage())
        logging.getLogger("rollout_budget").addHandler(handler)
        self.addCleanup(logging.getLogger("rollout_budget").removeHandler, handler)
        samples, metrics = manager.get_rollout_data(0)  # slime's own call_rollout_fn and flattening
        plan = self.client.plans[-1]
        planned = {a["prompt_id"]: a["n"] for a in plan["allocations"]}
        observed = self.client.observed[-1]
        self.assertEqual(len(observed), sum(planned.values()), "one result a rollout")
        self.assertGreater(len(samples), len(observed), "some rollouts gave several samples")
        self.assertEqual(metrics["rollout_budget/rollouts"], len(observed))
        by_rollout = {}
        for s in samples:
            by_rollout.setdefault(s.metadata["rollout_budget"]["rollout_id"], []).append(s)
        self.assertEqual(sorted(by_rollout), sorted(r["rollout_id"] for r in observed))
        fanned = 0
        for r in observed:
            group = by_rollout[r["rollout_id"]]
            self.assertEqual({s.group_index for s in group}, {group[0].group_index})
            self.assertEqual({s.reward for s in group}, {r["reward"]})
            if len(group) > 1:
                fanned += 1
                # One rollout to slime's loss: its samples share Sample.rollout_id (set here for
                # the agent-style samples, which had none), and no other rollout's sample has it.
                ids = {s.rollout_id for s in group}
                self.assertEqual(len(ids), 1)
                self.assertIsNotNone(next(iter(ids)))
                self.assertFalse(any(s.rollout_id in ids for s in samples if s not in group))
        self.assertGreater(fanned, 0)
        # global_batch_size counts rollouts (build_dp_schedule groups samples by rollout_id): the
        # step's 48 rollouts are a multiple of 8 whatever its sample count (a warning said otherwise).
        self.assertEqual(len(observed) % 8, 0)
        self.assertNotEqual(len(samples) % 8, 0)
        self.assertEqual([m for m in logged if "not a multiple" in m], [])
        # Each prompt's samples, every rollout's, normalised as one group_index group.
        groups = [s.group_index for s in samples]
        self.assertEqual(len(set(groups)), len(planned))
        raw, rewards = manager.post_process_rewards(samples)
        expected = group_advantages(raw, groups, kind="grpo")
        for a, b in zip(rewards, expected):
            self.assertAlmostEqual(a, b, places=12)
        for pid, n in planned.items():
            self.assertEqual(self.http.prompt(pid)["rollouts"], n, pid)

    def test_fanned_out_rollouts_in_two_rounds(self):
        # Round 2 sees each rollout's one reward (the mean of its samples') as partial_rewards,
        # and numbers its rollouts after round 1's.
        slime_sim.SETTINGS = Settings(rounds=2, options={"min_n": 2, "max_n": 12, "seed": 4})
        _, manager = self.manager()
        samples, metrics = manager.get_rollout_data(0)
        self.assertEqual(metrics["rollout_budget/rounds"], 2)
        plans, observed = self.client.plans[-2:], self.client.observed[-1]
        self.assertEqual(len(observed), sum(a["n"] for p in plans for a in p["allocations"]))
        self.assertEqual(len({r["rollout_id"] for r in observed}), len(observed))
        first = {}
        for r in observed[: plans[0]["totals"]["rollouts"]]:
            first.setdefault(r["prompt_id"], []).append(r["reward"])
        partial = {c["id"]: c.get("partial_rewards") for c in self.client.asked[-1]["prompts"]}
        self.assertEqual({pid: partial[pid] for pid in first}, first)
        self.assertEqual(len({s.metadata["rollout_budget"]["rollout_id"] for s in samples}), len(observed))

    def test_results_that_do_not_match_the_samples_given_are_an_error_naming_them(self):
        from rollout_budget.slime import make_rollout_function

        async def fewer(args, samples):
            return (await slime_sim.simulated_generate(args, samples))[:-1]

        async def reversed_(args, samples):
            return list(reversed(await slime_sim.simulated_generate(args, samples)))

        args, _ = self.manager()
        for generate, message in ((fewer, r"generate returned \d+ results for \d+ samples"),
                                  (reversed_, r"generate returned rollout \S+ where rollout \S+ was \(step 0\)")):
            source = slime_upstream.DataSourceStandIn(args, [self.ns.Sample(prompt="P %s" % x, label=x, metadata={"index": i})
                                                             for i, x in enumerate(LABELS)])
            rollout = make_rollout_function(generate=generate, client=self.client, settings=slime_sim.SETTINGS)
            with self.assertRaisesRegex(ValueError, message):
                rollout(args, 0, source)


class RolloutOutcomeTest(unittest.TestCase):
    def test_a_sample_without_a_reward_is_an_error_naming_the_rollout(self):
        from rollout_budget.slime_samples import rollout_outcome

        ns = slime_upstream.load()
        row = {"rollout_id": "0/p#0"}
        samples = [ns.Sample(reward=1.0, response_length=3, metadata={"rollout_budget": row}),
                   ns.Sample(reward=None, response_length=5, metadata={"rollout_budget": row})]
        with self.assertRaisesRegex(ValueError, r"rollout 0/p#0: generate returned 1 of its 2 samples without a reward"):
            rollout_outcome(slime_upstream.args(), samples, Settings())
        samples[1].reward = 0.0
        self.assertEqual(rollout_outcome(slime_upstream.args(), samples, Settings()), {"reward": 0.5, "tokens": 5, "finish_reason": "stop"})


class ImagePromptTest(_RolloutCase):
    def sample(self, colour, prompt="<image>Find x.", **meta):
        Image = images()
        return self.ns.Sample(prompt=prompt, label="x", metadata=dict(meta),
                              multimodal_inputs={"images": [Image.new("RGB", (4, 4), colour)], "videos": None})

    def test_prompts_with_one_text_and_different_images_have_their_own_ids(self):
        from rollout_budget.slime_samples import prompt_id

        red, blue = self.sample("red"), self.sample("blue")
        self.assertNotEqual(prompt_id(red), prompt_id(blue))
        self.assertEqual(prompt_id(red), prompt_id(self.sample("red")), "the same image: the same id at every step")
        self.assertTrue(prompt_id(red).startswith("h:"))
        # A text-only prompt keeps stable_prompt_id's id (a run's state carries over), as does a
        # prompt with an index or an id of its own.
        text = self.ns.Sample(prompt="<image>Find x.", multimodal_inputs={"images": None, "videos": None})
        self.assertEqual(prompt_id(text), stable_prompt_id(prompt="<image>Find x."))
        self.assertEqual(prompt_id(self.sample("red", index=7, data_source="geo3k")), "geo3k/7")
        self.assertEqual(prompt_id(self.sample("red", prompt_id="q1")), "q1")
        # Paths and urls, as slime's Dataset gives them without a processor, count too.
        a = self.ns.Sample(prompt="Find x.", multimodal_inputs={"images": ["img/1.png"]})
        b = self.ns.Sample(prompt="Find x.", multimodal_inputs={"images": ["img/2.png"]})
        self.assertNotEqual(prompt_id(a), prompt_id(b))

    def test_arrays_tensors_and_paths_are_read_by_their_content(self):
        # Found in review: an array's or tensor's truth value raised ("ambiguous"), bfloat16 had
        # no numpy dtype, and a pathlib.Path was read by its type name alone (one id for all).
        import pathlib

        import numpy as np
        import torch

        from rollout_budget.slime_samples import prompt_id

        def ids(*inputs):
            return [prompt_id(self.ns.Sample(prompt="Find x.", multimodal_inputs=m)) for m in inputs]

        for a, b in (({"images": np.zeros((4, 4, 3), dtype=np.uint8)}, {"images": np.ones((4, 4, 3), dtype=np.uint8)}),
                     ({"videos": torch.zeros(2, 3, 4, 4)}, {"videos": torch.ones(2, 3, 4, 4)}),
                     ([torch.zeros(2, dtype=torch.bfloat16)], [torch.ones(2, dtype=torch.bfloat16)]),
                     ({"images": [pathlib.Path("img/1.png")]}, {"images": [pathlib.Path("img/2.png")]})):
            first, second, again = ids(a, b, a)
            self.assertNotEqual(first, second)
            self.assertEqual(first, again)
        # An empty array is no media: the text's id.
        self.assertEqual(ids({"images": np.zeros((0,)), "videos": None}), [stable_prompt_id(prompt="Find x.")])

    def test_every_image_prompt_of_a_step_is_planned_and_trained(self):
        # Before: all four had one id (a hash of the text); three were dropped from the step and
        # the fourth got their rollouts and one shared posterior.
        args = slime_upstream.args(rollout_batch_size=4, n_samples_per_prompt=4, global_batch_size=4)
        dataset = [self.sample(colour) for colour in ("red", "green", "blue", "white")]
        for s in dataset:
            s.label = LABELS[0]
        manager = slime_upstream.ManagerStandIn(args, rollout_fn=self.ns.load_function("tests.slime_sim.generate_rollout"),
                                                data_source=slime_upstream.DataSourceStandIn(args, dataset))
        samples, _ = manager.get_rollout_data(0)
        self.assertEqual(len(self.client.plans[-1]["allocations"]), 4)
        self.assertEqual(len({s.group_index for s in samples}), 4)
        self.assertEqual(len(samples), 16)


class NormalisationTest(unittest.TestCase):
    def test_grpo_without_a_per_group_post_process_is_refused_at_the_first_step(self):
        from rollout_budget.slime import check_args
        from rollout_budget.slime_args import _warned

        slime_upstream.load()
        for estimator in ("grpo", "gspo", "cispo", "reinforce_plus_plus_baseline"):
            with self.assertRaisesRegex(ValueError, "set --custom-reward-post-process-path rollout_budget.slime.post_process_rewards"):
                check_args(slime_upstream.args(advantage_estimator=estimator, custom_reward_post_process_path=None))
        # Without normalisation slime uses the raw rewards: nothing to refuse; ours is what it asks for.
        check_args(slime_upstream.args(custom_reward_post_process_path=None, rewards_normalization=False))
        check_args(slime_upstream.args(custom_reward_post_process_path=None, advantage_estimator="ppo"))
        check_args(slime_upstream.args())
        # Another post-process may group correctly: logged once, not refused.
        _warned.clear()
        with self.assertLogs("rollout_budget", level="WARNING") as logs:
            check_args(slime_upstream.args(custom_reward_post_process_path="my.post"))
            check_args(slime_upstream.args(custom_reward_post_process_path="my.post"))
        self.assertEqual(len(logs.output), 1)
        self.assertIn("--custom-reward-post-process-path my.post", logs.output[0])
        self.assertIn("per group_index", logs.output[0])


class NumEpochTest(_RolloutCase):
    def test_a_run_sized_by_num_epoch_copies_the_state_into_its_last_checkpoint(self):
        # slime sets args.num_rollout in its driver after the rollout actor got its args
        # (placement_group.py:240–243): in the actor it is None with --num-epoch, and the last
        # rollout's copy was skipped.
        from rollout_budget import slime as ours

        environ = mock.patch.dict(os.environ, {"ROLLOUT_BUDGET_CLI": " ".join(shlex.quote(a) for a in support.COMMAND)})
        environ.start()
        self.addCleanup(environ.stop)
        save = tempfile.mkdtemp(prefix="rb-slime-epoch-")
        self.addCleanup(shutil.rmtree, save, True)
        ours._progress.clear()
        self.addCleanup(ours._progress.clear)
        state = os.path.join(self.dir, "state.db")
        slime_sim.SETTINGS = Settings(options={"min_n": 2, "max_n": 12, "seed": 4}, backup_state=state)
        # 12 prompts, 6 a rollout: 2 rollouts an epoch, 2 epochs; a save every 3 rollouts (and the last).
        args = slime_upstream.args(rollout_batch_size=6, global_batch_size=4, num_rollout=None, num_epoch=2, save=save, save_interval=3)
        dataset = [self.ns.Sample(prompt="Problem %s" % label, label=label, metadata={"index": i}) for i, label in enumerate(LABELS)]
        manager = slime_upstream.ManagerStandIn(args, rollout_fn=self.ns.load_function("tests.slime_sim.generate_rollout"),
                                                post_process=self.ns.load_function("rollout_budget.slime.post_process_rewards"),
                                                data_source=slime_upstream.DataSourceStandIn(args, dataset))
        for rollout_id in range(4):
            manager.get_rollout_data(rollout_id)
        self.assertEqual(sorted(os.listdir(os.path.join(save, "rollout"))), ["rollout_budget_state_2.db", "rollout_budget_state_3.db"])


if __name__ == "__main__":
    unittest.main()
