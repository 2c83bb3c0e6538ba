"""`python -m rollout_budget.dataset`: a verl dataset's rows as prompts JSONL, with the ids the
verl integration gives the same prompts. Before, a verl user converting a dataset as the CLI's
Parquet error said (pandas' to_json) got `"id" must be a non-empty string, got nothing`.

The rows are shaped as verl's preprocessing scripts write them (examples/data_preprocess/
gsm8k.py: data_source, prompt as chat messages, ability, reward_model with ground_truth,
extra_info with split and index). Parquet itself cannot be read here (Debian has no pyarrow);
the JSONL form of the same rows is what these tests read.
"""

import contextlib
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

from . import support
from rollout_budget import dataset
from rollout_budget.verl import VerlAdapter

ROWS = [
    {"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": "Natalia sold clips to 48 of her friends in April. Let's think step by step and output the final answer after \"####\"."}],
     "ability": "math", "reward_model": {"style": "rule", "ground_truth": "72"}, "extra_info": {"split": "train", "index": 0}},
    {"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": "Weng earns $12 an hour for babysitting."}],
     "ability": "math", "reward_model": {"style": "rule", "ground_truth": "10"}, "extra_info": {"split": "train", "index": 1}},
    {"data_source": "lighteval/MATH", "prompt": [{"role": "system", "content": "Reason step by step."}, {"role": "user", "content": "Compute 1+1."}],
     "ability": "math", "reward_model": {"style": "rule", "ground_truth": "2"}, "extra_info": {"split": "train", "index": 0}},
    # No index: the id is a hash of the messages (stable_prompt_id's rule 2).
    {"data_source": "custom", "prompt": [{"role": "user", "content": "What is 3*3?"}], "reward_model": {"ground_truth": 9}},
]


def _hash_id(messages):
    """stable_prompt_id's documented rule 2, written out here: "h:" + sha256 of the compact, key-sorted JSON."""
    text = json.dumps(messages, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "h:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


class DatasetTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="rb-dataset-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.rows = os.path.join(self.dir, "train.jsonl")
        with open(self.rows, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r) + "\n" for r in ROWS)

    def run_module(self, *args):
        env = dict(os.environ, PYTHONPATH=support.PYTHON_DIR)
        return subprocess.run([sys.executable, "-m", "rollout_budget.dataset", *args], capture_output=True, text=True, env=env, cwd=self.dir)

    def test_rows_become_candidates_with_the_verl_integrations_ids(self):
        out = os.path.join(self.dir, "prompts.jsonl")
        run = self.run_module(self.rows, "--out", out, "--max-tokens", "1024")
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("4 prompts from", run.stderr)
        with open(out, encoding="utf-8") as f:
            got = [json.loads(line) for line in f]
        self.assertEqual([c["id"] for c in got], ["openai/gsm8k/0", "openai/gsm8k/1", "lighteval/MATH/0", _hash_id(ROWS[3]["prompt"])])
        self.assertEqual(got[0], {"id": "openai/gsm8k/0", "messages": ROWS[0]["prompt"], "ground_truth": "72", "group": "openai/gsm8k", "max_tokens": 1024})
        self.assertEqual(got[3]["ground_truth"], "9")  # a number in the dataset: as text, as the verifier reads it
        # The CLI plans them as they are.
        plan = subprocess.run(support.COMMAND + ["plan", "--prompts", out, "--state", ":memory:", "--budget-rollouts", "32"],
                              capture_output=True, text=True)
        self.assertEqual(plan.returncode, 0, plan.stderr)
        allocations = json.loads(plan.stdout)["allocations"]
        self.assertEqual(sorted(a["prompt_id"] for a in allocations), sorted(c["id"] for c in got))
        self.assertEqual(sum(a["n"] for a in allocations), 32)

    def test_several_files_are_one_prompts_file_and_an_id_in_two_of_them_is_named(self):
        # verl's data.train_files is a list. Two files each numbering extra_info.index from 0 under
        # one data_source give two problems one id: the verl integration refuses that within a
        # batch only; in different steps they share one posterior without an error.
        second = os.path.join(self.dir, "more.jsonl")
        extra = [dict(ROWS[1], prompt=[{"role": "user", "content": "Another problem."}], extra_info={"split": "train", "index": 7})]
        with open(second, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r) + "\n" for r in extra)
        out = os.path.join(self.dir, "both.jsonl")
        run = self.run_module(self.rows, second, "--out", out)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("5 prompts from %s, %s written to" % (self.rows, second), run.stderr)
        with open(out, encoding="utf-8") as f:
            self.assertEqual([json.loads(line)["id"] for line in f][-1], "openai/gsm8k/7")
        clash = os.path.join(self.dir, "clash.jsonl")
        with open(clash, "w", encoding="utf-8") as f:
            f.write(json.dumps(dict(ROWS[1], prompt=[{"role": "user", "content": "A different problem."}])) + "\n")
        run = self.run_module(self.rows, clash, "--out", os.path.join(self.dir, "no.jsonl"))
        self.assertEqual(run.returncode, 2)
        self.assertIn("clash.jsonl:1: the prompt id 'openai/gsm8k/1' is %s row 2's too (the same data_source and "
                      "extra_info.index): a prompt must appear once; drop the repeat, or give the files different data_source "
                      "values" % self.rows, run.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "no.jsonl")))

    def test_the_ids_are_those_verl_adapter_gives_the_same_rows_in_a_batch(self):
        support.require_torch()
        from .verl_trainer import dataset_batch

        indexed = [r for r in ROWS if "extra_info" in r and len(r["prompt"]) == 1]
        batch = dataset_batch([{"text": r["prompt"][0]["content"], "data_source": r["data_source"], "index": r["extra_info"]["index"]} for r in indexed])
        want = VerlAdapter(client=None).prompt_ids(batch)
        got = [c["id"] for c in dataset.candidates_of(enumerate(indexed, start=1))]
        self.assertEqual(got, want)

    def test_bad_rows_exit_2_naming_file_row_and_field_and_write_nothing(self):
        out = os.path.join(self.dir, "prompts.jsonl")
        cases = [
            ([dict(ROWS[0]), dict(ROWS[0])], "train.jsonl:2: the prompt id 'openai/gsm8k/0' is row 1's too"),
            ([{"question": "1+1?", "data_source": "x"}], "train.jsonl:1: 'prompt' must be the chat messages (a list) or a non-empty string, got null; the prompt's field is another? pass --prompt-key"),
        ]
        for rows, says in cases:
            with open(self.rows, "w", encoding="utf-8") as f:
                f.writelines(json.dumps(r) + "\n" for r in rows)
            run = self.run_module(self.rows, "--out", out)
            self.assertEqual(run.returncode, 2, run.stderr)
            self.assertIn("rollout_budget.dataset: %s/%s" % (self.dir, says), run.stderr)
            self.assertEqual(sorted(os.listdir(self.dir)), ["train.jsonl"])
        with open(self.rows, "w", encoding="utf-8") as f:
            f.write(json.dumps(ROWS[0]) + "\n[1, 2]\n")
        run = self.run_module(self.rows, "--out", out)
        self.assertEqual(run.returncode, 2)
        self.assertIn("train.jsonl:2: a row must be a JSON object, got list", run.stderr)
        # --prompt-key names another field.
        with open(self.rows, "w", encoding="utf-8") as f:
            f.write(json.dumps({"question": "1+1?", "extra_info": {"index": 5}}) + "\n")
        run = self.run_module(self.rows, "--prompt-key", "question")
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(json.loads(run.stdout), {"id": "5", "prompt": "1+1?"})

    def test_rows_with_images_need_an_index(self):
        # verl's geo3k rows (examples/data_preprocess/geo3k.py): "<image>" in the prompt, the image
        # in an "images" column, extra_info.index. Without an index the trainer's id hashes the
        # decoded image in the messages, which no id made here would match.
        geo = [{"data_source": "hiyouga/geometry3k", "prompt": [{"role": "user", "content": "<image>Find x."}],
                "images": [{"path": "%d.png" % i}], "reward_model": {"ground_truth": "3"}, "extra_info": {"split": "train", "index": i}}
               for i in range(2)]
        with open(self.rows, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r) + "\n" for r in geo)
        run = self.run_module(self.rows)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual([json.loads(line)["id"] for line in run.stdout.splitlines()], ["hiyouga/geometry3k/0", "hiyouga/geometry3k/1"])
        del geo[1]["extra_info"]["index"]
        with open(self.rows, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r) + "\n" for r in geo)
        run = self.run_module(self.rows, "--out", os.path.join(self.dir, "prompts.jsonl"))
        self.assertEqual(run.returncode, 2)
        self.assertIn("train.jsonl:2: the row has images and no extra_info.index", run.stderr)
        self.assertEqual(sorted(os.listdir(self.dir)), ["train.jsonl"])

    def test_parquet_without_pandas_says_what_to_install(self):
        parquet = os.path.join(self.dir, "train.parquet")
        with open(parquet, "wb") as f:
            f.write(b"PAR1")
        err = io.StringIO()
        with mock.patch.dict(sys.modules, {"pandas": None}), contextlib.redirect_stderr(err):
            code = dataset.main([parquet])
        self.assertEqual(code, 2)
        self.assertIn("train.parquet: reading Parquet needs pandas with pyarrow (pip install pandas pyarrow, as verl installs them)", err.getvalue())


    def test_parquet_is_told_by_its_bytes_and_other_bad_files_are_named(self):
        # train.pq or TRAIN.PARQUET was read as JSONL: "'utf-8' codec can't decode byte 0xff in
        # position 9", naming neither the file nor the cause.
        for name in ("train.pq", "TRAIN.PARQUET", "rows"):
            parquet = os.path.join(self.dir, name)
            with open(parquet, "wb") as f:
                f.write(b"PAR1\x15\x04\x15\xff\xff")
            err = io.StringIO()
            with mock.patch.dict(sys.modules, {"pandas": None}), contextlib.redirect_stderr(err):
                self.assertEqual(dataset.main([parquet]), 2, name)
            self.assertIn("%s: reading Parquet needs pandas with pyarrow" % name, err.getvalue())
        binary = os.path.join(self.dir, "bad.jsonl")
        with open(binary, "wb") as f:
            f.write(b'{"prompt": "a"}\n\xff\xfe\n')
        run = self.run_module(binary)
        self.assertEqual(run.returncode, 2)
        self.assertIn("bad.jsonl:2: not UTF-8 text", run.stderr)
        # A repeated prompt without an index: its id is a hash of the prompt, not of an index.
        with open(binary, "w", encoding="utf-8") as f:
            f.write('{"prompt": "same"}\n{"prompt": "same"}\n')
        run = self.run_module(binary)
        self.assertIn("bad.jsonl:2: the prompt id 'h:", run.stderr)
        self.assertIn("is row 1's too (the same prompt, its id a hash of it without an extra_info.index)", run.stderr)
        # --out in a folder that is not there: named, not the temp file's name.
        run = self.run_module(self.rows, "--out", os.path.join(self.dir, "nope", "p.jsonl"))
        self.assertEqual(run.returncode, 2)
        self.assertIn("--out %s: no folder %s to write it in" % (os.path.join(self.dir, "nope", "p.jsonl"), os.path.join(self.dir, "nope")), run.stderr)
        self.assertNotIn(".p.jsonl.", run.stderr)

    def test_a_missing_value_pandas_reads_as_nan_is_none_as_verl_reads_it(self):
        # TEST DOUBLE of pandas (no pyarrow here): read_parquet's rows as pandas 3 gives them for
        # a string column with a null, float NaN (checked with pandas 3.0.6 and pyarrow 25 by
        # hand); verl's reader gives None. The row became id "nan/1" and group "nan", which the
        # training run's ids ("1") never matched.
        nan = float("nan")

        class Frame:
            def to_dict(self, orient):
                assert orient == "records"
                return [{"data_source": nan, "prompt": [{"role": "user", "content": "1+1?"}],
                         "reward_model": {"ground_truth": "2"}, "extra_info": {"index": 1, "split": nan}}]

        class Pandas:
            @staticmethod
            def read_parquet(path):
                return Frame()

        parquet = os.path.join(self.dir, "train.parquet")
        with open(parquet, "wb") as f:
            f.write(b"PAR1")
        with mock.patch.dict(sys.modules, {"pandas": Pandas}):
            candidates = list(dataset.candidates_of(dataset.read_rows(parquet), parquet))
        self.assertEqual(candidates, [{"id": "1", "messages": [{"role": "user", "content": "1+1?"}], "ground_truth": "2"}])
        # The id verl's adapter gives that row, read with its null as None (VerlAdapter.prompt_ids calls this).
        from rollout_budget import stable_prompt_id
        self.assertEqual(stable_prompt_id(prompt=[{"role": "user", "content": "1+1?"}], data_source=None, extra_info={"index": 1}), "1")


if __name__ == "__main__":
    unittest.main()
