import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from rollout_budget_cli import parse_plan_jsonl  # noqa: E402
from rollout_budget_slime import plan_groups  # noqa: E402

PLAN = "\n".join([
    '{"type":"header","version":1,"step":2,"seed":0}',
    '{"group_id":"2/x","prompt_id":"x","n":2,"max_tokens":512,"seed":10}',
    '{"group_id":"2/y","prompt_id":"y","n":3,"max_tokens":null,"seed":20}',
])


class Sample:
    def __init__(self, prompt):
        self.prompt = prompt
        self.group_index = None
        self.index = None
        self.metadata = {}


class SlimeAdapterTest(unittest.TestCase):
    def test_groups_have_planned_sizes_indices_and_seeds(self):
        plan = parse_plan_jsonl(PLAN)
        groups = plan_groups({"x": Sample("px"), "y": {"prompt": "py"}}, plan)
        self.assertEqual([len(g) for g in groups], [2, 3])
        self.assertEqual([s.index for s in groups[0]] + [s["index"] for s in groups[1]], [0, 1, 2, 3, 4])
        self.assertEqual([s.group_index for s in groups[0]], [0, 0])
        self.assertEqual([s["metadata"]["rollout_seed"] for s in groups[1]], [20, 21, 22])
        self.assertEqual(groups[0][1].metadata, {"rollout_seed": 11, "max_tokens": 512, "group_id": "2/x"})
        self.assertIsNot(groups[0][0], groups[0][1])


if __name__ == "__main__":
    unittest.main()
