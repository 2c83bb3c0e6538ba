"""expand_plan, results_rows and stable_prompt_id against plans the real CLI writes."""

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import unittest

from . import support
from rollout_budget import expand_plan, group_seed, results_rows, stable_prompt_id

# Non-ASCII ids check the seed hash over UTF-16 code units (JavaScript's charCodeAt), surrogate
# pairs included.
PROMPTS = [
    {"id": "easy", "max_tokens": 512, "group": "gsm8k"},
    {"id": "hard", "group": "aime"},
    {"id": "题目-7", "max_tokens": 1024},
    {"id": "emoji-\U0001F600"},
    {"id": "left-out", "max_tokens": 64},
]


def cli(*args, stdin=None):
    done = subprocess.run(support.COMMAND + list(args), input=stdin, capture_output=True, text=True, encoding="utf-8")
    if done.returncode != 0:
        raise AssertionError("CLI %s failed: %s" % (args[0], done.stderr))
    return done.stdout


class ExpandPlanTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="rb-py-plan-")
        state = os.path.join(cls.dir, "s.db")
        results = os.path.join(cls.dir, "r.jsonl")
        with open(results, "w", encoding="utf-8") as f:
            f.write(json.dumps({"prompt_id": "easy", "step": 0, "rewards": [1] * 8}) + "\n")
            f.write(json.dumps({"prompt_id": "hard", "step": 0, "rewards": [0] * 7 + [1]}) + "\n")
            f.write(json.dumps({"prompt_id": "left-out", "step": 0, "rewards": [1] * 16}) + "\n")
        cli("observe", "--results", results, "--state", state)
        prompts = os.path.join(cls.dir, "p.jsonl")
        with open(prompts, "w", encoding="utf-8") as f:
            f.write("".join(json.dumps(p) + "\n" for p in PROMPTS))
        common = ["plan", "--prompts", prompts, "--state", state, "--budget-rollouts", "14", "--skip", "--seed", "9", "--min-n", "2"]
        cls.plan = json.loads(cli(*common))
        # The CLI's own export of the same plan: group ids and seeds computed by the TypeScript code.
        cls.jsonl = [json.loads(line) for line in cli(*common, "--format", "jsonl").splitlines() if line.strip()]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_rows_follow_the_cli_export_group_ids_and_seeds(self):
        rows = expand_plan(self.plan, PROMPTS)
        groups = self.jsonl[1:]
        self.assertTrue(groups)
        self.assertEqual(len(rows), sum(g["n"] for g in groups))
        k = 0
        for g in groups:
            for j in range(g["n"]):
                row = rows[k]
                self.assertEqual(row["group_id"], g["group_id"])
                self.assertEqual(row["prompt_id"], g["prompt_id"])
                self.assertEqual(row["seed"], g["seed"] + j)
                self.assertEqual(row["rollout_index"], j)
                self.assertEqual(row["rollout_id"], "%d/%s#%d" % (self.plan["step"], g["prompt_id"], j))
                self.assertEqual(row["max_tokens"], g["max_tokens"])
                k += 1
        self.assertEqual(k, len(rows))
        ids = {g["prompt_id"] for g in groups}
        self.assertIn("题目-7", ids)
        self.assertIn("emoji-\U0001F600", ids)

    def test_prompts_left_out_are_absent_not_an_error(self):
        # Regression: the old verl adapter raised KeyError on a --skip plan.
        planned = {a["prompt_id"] for a in self.plan["allocations"] if a["n"] > 0}
        self.assertNotIn("left-out", planned, "a prompt solved 16/16 gets no rollouts in a 14-rollout budget")
        rows = expand_plan(self.plan, PROMPTS)
        self.assertEqual({r["prompt_id"] for r in rows}, planned)

    def test_rows_carry_the_prompts_group(self):
        rows = expand_plan(self.plan, PROMPTS)
        by_prompt = {p["id"]: p.get("group") for p in PROMPTS}
        for r in rows:
            self.assertEqual(r.get("group"), by_prompt[r["prompt_id"]])
        self.assertTrue(any("group" in r for r in rows))
        self.assertTrue(all("group" not in r for r in expand_plan(self.plan)))

    def test_rows_carry_the_prompts_hint(self):
        # Issue 14: the offline hint travels with the rows, so results_rows can repeat it.
        plan = {"version": 1, "step": 2, "seed": 0, "allocations": [{"prompt_id": "h", "n": 2, "max_tokens": None}, {"prompt_id": "s", "n": 1, "max_tokens": None}]}
        prompts = [{"id": "h", "group": "olympiad", "prior_pass_rate": 0.125, "prior_samples": 16},
                   {"id": "s", "prior_samples": 8}]
        rows = expand_plan(plan, prompts)
        self.assertEqual([(r.get("group"), r.get("prior_pass_rate"), r.get("prior_samples")) for r in rows],
                         [("olympiad", 0.125, 16), ("olympiad", 0.125, 16), (None, None, None)])
        out = results_rows(rows, [1, 0, 1])
        self.assertEqual(out[0], {"prompt_id": "h", "step": 2, "reward": 1.0, "rollout_id": "2/h#0", "group": "olympiad", "prior_pass_rate": 0.125, "prior_samples": 16})
        self.assertEqual(out[2], {"prompt_id": "s", "step": 2, "reward": 1.0, "rollout_id": "2/s#0"})

    def test_a_later_round_numbers_from_first_rollout(self):
        plan = {"version": 1, "step": 3, "seed": 0, "allocations": [{"prompt_id": "p", "n": 2, "max_tokens": None, "first_rollout": 4}]}
        rows = expand_plan(plan)
        base = group_seed(0, 3, "p")
        self.assertEqual([r["rollout_index"] for r in rows], [4, 5])
        self.assertEqual([r["seed"] for r in rows], [base + 4, base + 5])
        self.assertEqual([r["rollout_id"] for r in rows], ["3/p#4", "3/p#5"])

    def test_a_malformed_plan_names_the_field(self):
        cases = [
            ({"version": 2, "step": 0, "seed": 0, "allocations": []}, r"plan\.version must be 1"),
            ({"version": 1, "seed": 0, "allocations": []}, r"'step' is required"),
            ({"version": 1, "step": 0, "seed": 0, "allocations": [{"prompt_id": "a", "n": -1}]}, r'allocations\[0\]: "n" must be an integer ≥ 0, got -1'),
            ({"version": 1, "step": 0, "seed": 0, "allocations": [{"n": 1}]}, r'allocations\[0\]: "prompt_id" must be a non-empty string'),
            ({"version": 1, "step": 0, "seed": 0, "allocations": [{"prompt_id": "", "n": 1}]}, r'allocations\[0\]: "prompt_id" must be a non-empty string'),
            # Two groups of one prompt would share rollout ids (0/a#0...), and observe would drop the second.
            ({"version": 1, "step": 0, "seed": 0, "allocations": [{"prompt_id": "a", "n": 2}, {"prompt_id": "b", "n": 1}, {"prompt_id": "a", "n": 2}]},
             r'allocations\[2\]: "prompt_id" \'a\' repeats'),
        ]
        for plan, message in cases:
            with self.assertRaisesRegex(ValueError, message):
                expand_plan(plan)


class ResultsRowsTest(unittest.TestCase):
    ROWS = [
        {"prompt_id": "a", "group_id": "1/a", "rollout_index": 0, "rollout_id": "1/a#0", "seed": 10, "max_tokens": None, "step": 1, "group": "g"},
        {"prompt_id": "a", "group_id": "1/a", "rollout_index": 1, "rollout_id": "1/a#1", "seed": 11, "max_tokens": None, "step": 1, "group": "g"},
        {"prompt_id": "b", "group_id": "1/b", "rollout_index": 0, "rollout_id": "1/b#0", "seed": 20, "max_tokens": None, "step": 1},
    ]

    def test_results_keep_ids_steps_and_groups(self):
        out = results_rows(self.ROWS, [1, 0.5, True], tokens=[10, 20, None], finish_reasons=["stop", "length", None])
        self.assertEqual(out, [
            {"prompt_id": "a", "step": 1, "reward": 1.0, "rollout_id": "1/a#0", "tokens": 10, "finish_reason": "stop", "group": "g"},
            {"prompt_id": "a", "step": 1, "reward": 0.5, "rollout_id": "1/a#1", "tokens": 20, "finish_reason": "length", "group": "g"},
            {"prompt_id": "b", "step": 1, "reward": 1.0, "rollout_id": "1/b#0"},
        ])

    def test_a_float32_sum_just_over_1_is_clamped_and_integral_float_tokens_taken(self):
        # As the verl and slime integrations take them (config.REWARD_SLACK): ten 0.1s summed in float32.
        out = results_rows(self.ROWS, [1.0000001, -1e-7, 0.25], tokens=[10.0, 20, None])
        self.assertEqual([(r["reward"], r.get("tokens")) for r in out], [(1.0, 10), (0.0, 20), (0.25, None)])
        self.assertIsInstance(out[0]["tokens"], int)
        with self.assertRaisesRegex(ValueError, r"reward of rollout 1/a#0 must be a number in \[0, 1\], got 1.001"):
            results_rows(self.ROWS, [1.001, 0, 0])

    def test_bad_values_name_the_rollout(self):
        with self.assertRaisesRegex(ValueError, r"reward of rollout 1/a#1 must be a number in \[0, 1\], got -1"):
            results_rows(self.ROWS, [1, -1, 0])
        with self.assertRaisesRegex(ValueError, r"tokens of rollout 1/b#0 must be an integer ≥ 0, got 2.5"):
            results_rows(self.ROWS, [1, 1, 0], tokens=[1, 2, 2.5])
        with self.assertRaisesRegex(ValueError, r"2 rewards for 3 rollouts"):
            results_rows(self.ROWS, [1, 1])
        with self.assertRaisesRegex(ValueError, r'finish_reason of rollout 1/a#0 must be "stop", "length" or "abort", got \'done\''):
            results_rows(self.ROWS, [1, 1, 1], finish_reasons=["done", None, None])

    def test_a_shaped_reward_with_pass_threshold_is_a_pass_or_a_fail(self):
        # OpenRLHF's rewards can be shaped below 0 (ProRL's stop_properly_penalty_coef, a remote
        # reward model's score): refused before, with no way to count them as the verl and slime
        # integrations' pass_threshold does.
        out = results_rows(self.ROWS, [1.0, -0.5, 0.0], pass_threshold=0)
        self.assertEqual([r["reward"] for r in out], [1.0, 0.0, 0.0])
        out = results_rows(self.ROWS, [7, 5, 5.5], pass_threshold=5)
        self.assertEqual([r["reward"] for r in out], [1.0, 0.0, 1.0])
        with self.assertRaisesRegex(ValueError, r"reward of rollout 1/a#0 must be a number in \[0, 1\], got -0.5; a shaped reward .*set pass_threshold"):
            results_rows(self.ROWS, [-0.5, 0, 0])
        with self.assertRaisesRegex(ValueError, r"reward of rollout 1/a#1 must be a number \(not NaN\), got nan"):
            results_rows(self.ROWS, [1, float("nan"), 0], pass_threshold=0)
        # ±inf as the integrations' Config.reward_of counts them: a pass above the threshold, a fail below.
        self.assertEqual([r["reward"] for r in results_rows(self.ROWS, [float("inf"), float("-inf"), 0.5], pass_threshold=0)], [1.0, 0.0, 1.0])
        for bad in (float("nan"), float("inf"), True, "0"):
            with self.subTest(threshold=bad), self.assertRaisesRegex(ValueError, "pass_threshold must be a finite number"):
                results_rows(self.ROWS, [1, 0, 0], pass_threshold=bad)

    def test_one_element_tensors_are_taken_as_their_number(self):
        # OpenRLHF keeps each sample's reward and length as a (1,) tensor: results_rows refused
        # them ("got [1.0]") while group_advantages took them.
        class OneElement:  # what _as_plain reads of a (1,) numpy array or tensor: tolist() gives a list
            def __init__(self, value):
                self.value = value

            def tolist(self):
                return [self.value]

        out = results_rows(self.ROWS, [OneElement(1.0), OneElement(0.0), [1]], tokens=[OneElement(12), [7], None])
        self.assertEqual([(r["reward"], r.get("tokens")) for r in out], [(1.0, 12), (0.0, 7), (1.0, None)])
        with self.assertRaisesRegex(ValueError, r"reward of rollout 1/a#0 must be a number in \[0, 1\], got \[1.0, 0.0\]"):
            results_rows(self.ROWS, [[1.0, 0.0], 0, 0])
        try:
            import torch
        except ImportError:
            return  # the torch case runs under /usr/bin/python3 (bash .ci/setup-python.sh)
        rewards = [torch.tensor([1.0]), torch.tensor([0.0]), torch.tensor([1.0])]
        lengths = [torch.tensor([12]), torch.tensor([7]), torch.tensor([3])]
        out = results_rows(self.ROWS, rewards, tokens=lengths)
        self.assertEqual([(r["reward"], r["tokens"]) for r in out], [(1.0, 12), (0.0, 7), (1.0, 3)])
        out = results_rows(self.ROWS, [torch.tensor([-1.0]), torch.tensor([1.0]), torch.tensor([1.0])], pass_threshold=0)
        self.assertEqual([r["reward"] for r in out], [0.0, 1.0, 1.0])


class StablePromptIdTest(unittest.TestCase):
    def test_a_dataset_index_wins_with_its_data_source(self):
        self.assertEqual(stable_prompt_id("text", extra_info={"index": 17}, data_source="gsm8k"), "gsm8k/17")
        self.assertEqual(stable_prompt_id("text", index=17), "17")
        self.assertEqual(stable_prompt_id(None, extra_info={"index": 3.0}), "3")

    def test_else_a_hash_of_the_text_stable_across_calls_and_key_order(self):
        expected = "h:" + hashlib.sha256("What is 2+2?".encode("utf-8")).hexdigest()[:16]
        self.assertEqual(stable_prompt_id("What is 2+2?"), expected)
        self.assertEqual(stable_prompt_id("What is 2+2?", extra_info={"split": "train"}), expected)
        a = stable_prompt_id([{"role": "user", "content": "hi"}])
        b = stable_prompt_id([{"content": "hi", "role": "user"}])
        self.assertEqual(a, b)
        self.assertNotEqual(a, stable_prompt_id([{"role": "user", "content": "hi!"}]))

    def test_an_image_in_the_messages_is_hashed_by_its_content(self):
        # verl's RLHFDataset._build_messages puts each image into the messages as
        # {"type": "image", "image": <PIL image>} (rl_dataset.py:319–326); the id was a TypeError
        # (not JSON serializable). Image: a stand-in with PIL.Image's mode, size and tobytes.
        class Image:
            def __init__(self, pixels):
                self.mode, self.size, self.pixels = "RGB", (1, 1), pixels

            def tobytes(self):
                return self.pixels

        def messages(image):
            return [{"role": "user", "content": [{"type": "image", "image": image}, {"type": "text", "text": "Find x."}]}]

        red = stable_prompt_id(messages(Image(b"\xff\x00\x00")))
        self.assertEqual(red, stable_prompt_id(messages(Image(b"\xff\x00\x00"))), "the same pixels: the same id at every step")
        self.assertNotEqual(red, stable_prompt_id(messages(Image(b"\x00\x00\xff"))))
        self.assertNotEqual(stable_prompt_id(messages(b"png-1")), stable_prompt_id(messages(b"png-2")))  # bytes too
        # The rule written out: the image as "media:" + the sha256 of its length-prefixed parts.
        parts = [repr(("RGB", (1, 1))).encode(), b"\xff\x00\x00"]
        media = "media:" + hashlib.sha256(b"".join(b"%d:" % len(p) + p for p in parts)).hexdigest()
        text = json.dumps(messages(media), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        self.assertEqual(red, "h:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16])

    def test_a_nan_index_or_source_counts_as_missing_as_none_does(self):
        # A pandas row whose integer index column became float (some rows lack it) holds NaN: every
        # such row got the id "gsm8k/nan", one posterior for different prompts.
        class Scalar:  # numpy's float64 NaN as _as_plain reads it (numpy itself below, where installed)
            def item(self):
                return float("nan")

        nans = [float("nan"), Scalar()]
        try:
            import numpy
            nans += [numpy.nan, numpy.float64("nan"), numpy.float32("nan")]
        except ImportError:
            pass
        for nan in nans:
            with self.subTest(nan=nan):
                self.assertEqual(stable_prompt_id("What is 2+2?", index=nan, data_source="gsm8k"), stable_prompt_id("What is 2+2?"))
                self.assertNotEqual(stable_prompt_id("a", index=nan, data_source="gsm8k"), stable_prompt_id("b", index=nan, data_source="gsm8k"))
                self.assertEqual(stable_prompt_id("a", extra_info={"index": nan}, data_source="gsm8k"), stable_prompt_id("a"))
                self.assertEqual(stable_prompt_id("a", index=nan, extra_info={"index": 4}, data_source="gsm8k"), "gsm8k/4")
                self.assertEqual(stable_prompt_id("a", index=3, data_source=nan), "3")
                with self.assertRaises(ValueError):
                    stable_prompt_id(None, index=nan)

    def test_pandas_na_counts_as_missing_as_none_does(self):
        # pandas' nullable columns (Int64, string: a Parquet file written from them reads back so)
        # hold pandas.NA for a null: every such row got the id "<NA>/<NA>", one posterior for all.
        try:
            import pandas
        except ImportError:
            self.skipTest("pandas is not installed for this python (bash .ci/setup-python.sh installs it for /usr/bin/python3)")
        frame = pandas.DataFrame({"index": pandas.array([7, None, None], dtype="Int64"),
                                  "data_source": pandas.array(["gsm8k", "gsm8k", None], dtype="string")})
        rows = frame.to_dict("records")
        self.assertIs(rows[1]["index"], pandas.NA)  # the premise: pandas hands NA, not NaN, to the caller
        ids = [stable_prompt_id("prompt %d" % k, index=row["index"], data_source=row["data_source"]) for k, row in enumerate(rows)]
        self.assertEqual(ids, ["gsm8k/7", stable_prompt_id("prompt 1"), stable_prompt_id("prompt 2")])
        self.assertEqual(stable_prompt_id("a", extra_info={"index": pandas.NA}, data_source="gsm8k"), stable_prompt_id("a"))
        self.assertEqual(stable_prompt_id("a", index=pandas.NaT), stable_prompt_id("a"))
        self.assertEqual(stable_prompt_id("a", index=3, data_source=pandas.NA), "3")

    def test_nothing_to_identify_is_an_error(self):
        with self.assertRaisesRegex(ValueError, "dataset index"):
            stable_prompt_id(None, extra_info={"split": "train"})


if __name__ == "__main__":
    unittest.main()


class NoteObservedTest(unittest.TestCase):
    """What an integration logs from an observe's summary (rollout_budget.plan.note_observed)."""

    def test_warnings_and_duplicates_are_logged_a_quiet_summary_is_not(self):
        from rollout_budget.plan import note_observed

        sent = [{"prompt_id": "a", "step": 1, "reward": 1}] * 3
        warning = "these results' newest step, 1, is 999 steps before the state's last step, 1000: ..."
        summary = {"applied": 1, "duplicates": 2, "aborted": 0, "prompts": 1, "last_step": 1000, "warnings": [warning]}
        with self.assertLogs("rollout_budget", level="WARNING") as logs:
            self.assertIs(note_observed(summary, sent), summary)
        self.assertEqual(logs.output[0], "WARNING:rollout_budget:rollout-budget: " + warning)
        self.assertIn("step 1: 2 of 3 rollouts were observed before", logs.output[1])
        self.assertEqual(len(logs.output), 2)
        quiet = {"applied": 3, "duplicates": 0, "aborted": 0, "prompts": 1, "last_step": 1}
        with self.assertLogs("rollout_budget", level="DEBUG") as logs:
            note_observed(quiet, sent)
            import logging
            logging.getLogger("rollout_budget").debug("marker")
        self.assertEqual(len(logs.output), 1)  # the marker only
