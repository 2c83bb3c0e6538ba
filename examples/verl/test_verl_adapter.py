"""Checks the verl adapter with a plain-Python stand-in for verl's DataProto.

The plan comes from $RB_PLAN_JSONL when set (the vitest wrapper writes one with the real
CLI), else from the small plan below.
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from rollout_budget_cli import parse_plan_jsonl, plan_step  # noqa: E402
from rollout_budget_verl import expand_batch, results_from_batch  # noqa: E402

EMBEDDED = "\n".join([
    '{"type":"header","version":1,"step":4,"seed":0,"policy":"bayes","value":"knapsack"}',
    '{"group_id":"4/a","prompt_id":"a","n":3,"max_tokens":1024,"seed":100}',
    '{"group_id":"4/b","prompt_id":"b","n":0,"max_tokens":null,"seed":200}',
    '{"group_id":"4/c","prompt_id":"c","n":5,"max_tokens":null,"seed":300}',
])


class FakeDataProto:
    """verl DataProto's contract as the adapter uses it: columns in `batch` (tensors) and
    `non_tensor_batch`, and `sample_level_repeat`, which repeats row i repeat_times[i] times
    consecutively (torch.repeat_interleave / np.repeat semantics; 0 drops the row)."""

    def __init__(self, batch, non_tensor_batch, meta_info=None):
        self.batch = batch
        self.non_tensor_batch = non_tensor_batch
        self.meta_info = meta_info or {}

    def __len__(self):
        return len(next(iter(self.batch.values())))

    def sample_level_repeat(self, repeat_times):
        assert len(repeat_times) == len(self), "one repeat count per row"

        def rep(col):
            return [v for v, k in zip(col, repeat_times) for _ in range(k)]

        return FakeDataProto(
            {k: rep(v) for k, v in self.batch.items()},
            {k: rep(v) for k, v in self.non_tensor_batch.items()},
            dict(self.meta_info),
        )


class VerlAdapterTest(unittest.TestCase):
    def setUp(self):
        path = os.environ.get("RB_PLAN_JSONL")
        text = open(path, encoding="utf-8").read() if path else EMBEDDED
        self.plan = parse_plan_jsonl(text)
        self.assertTrue(self.plan.groups, "the plan has groups")
        # Prompts in a different order than the plan, with a tensor-like column.
        ids = [g.prompt_id for g in reversed(self.plan.groups)]
        self.batch = FakeDataProto(
            {"input_ids": [[i, i + 1] for i in range(len(ids))]},
            {"prompt_id": list(ids), "raw_prompt": [f"text of {i}" for i in ids]},
        )

    def test_expands_each_prompt_by_its_planned_n_with_the_group_uid(self):
        out = expand_batch(self.batch, self.plan)
        by_prompt = self.plan.by_prompt()
        ids = self.batch.non_tensor_batch["prompt_id"]
        self.assertEqual(len(out), sum(by_prompt[i].n for i in ids))
        row = 0
        checked = 0
        for k, pid in enumerate(ids):
            g = by_prompt[pid]
            for j in range(g.n):
                self.assertEqual(out.non_tensor_batch["prompt_id"][row], pid)
                self.assertEqual(out.non_tensor_batch["uid"][row], g.group_id)
                self.assertEqual(out.non_tensor_batch["rollout_seed"][row], g.seed + j)
                self.assertEqual(out.non_tensor_batch["max_tokens"][row], g.max_tokens)
                self.assertEqual(out.batch["input_ids"][row], self.batch.batch["input_ids"][k])
                self.assertEqual(out.non_tensor_batch["raw_prompt"][row], f"text of {pid}")
                row += 1
                checked += 1
        self.assertEqual(row, len(out))
        self.assertGreater(checked, 0)
        # One uid per group: GRPO groups are exactly the plan's groups.
        uids = out.non_tensor_batch["uid"]
        for g in self.plan.groups:
            self.assertEqual(uids.count(g.group_id), g.n)

    def test_a_prompt_missing_from_the_plan_is_an_error(self):
        self.batch.non_tensor_batch["prompt_id"][0] = "not-planned"
        with self.assertRaises(KeyError):
            expand_batch(self.batch, self.plan)

    def test_results_rows_are_what_observe_takes(self):
        out = expand_batch(self.batch, self.plan)
        rows = results_from_batch(out, [1.0] * len(out), [10] * len(out), self.plan.step)
        self.assertEqual(len(rows), len(out))
        self.assertEqual(len({r["rollout_id"] for r in rows}), len(rows))
        self.assertTrue(all(set(r) == {"prompt_id", "step", "reward", "tokens", "rollout_id"} for r in rows))

    def test_plan_step_calls_the_cli_for_jsonl(self):
        # A stand-in CLI that checks its arguments and prints the embedded plan.
        script = (
            "import sys; a=sys.argv[1:]; "
            "assert a[0]=='plan' and a[a.index('--format')+1]=='jsonl' and a[a.index('--budget-rollouts')+1]=='64', a; "
            f"print({EMBEDDED!r})"
        )
        plan = plan_step("p.jsonl", "s.db", budget_rollouts=64, cli=[sys.executable, "-c", script])
        self.assertEqual([g.n for g in plan.groups], [3, 0, 5])


if __name__ == "__main__":
    unittest.main()
