"""Runs Knapsack RL's published allocator on batches read from stdin (JSON), for
test/knapsack-rl.test.ts. The allocator is imported from the upstream snapshot
(argv[1]: the folder holding exploration_utils.py), never copied here.

stdin:  {"batches": [{"states": [[valid, pass_rate, count], ...], "n": 8, "min_n": 2,
          "max_n": 16, "total_budget": 64, "allow_fallback": true}, ...]}
stdout: [{"n": [...]} | {"error": "ExceptionName"}, ...] (one JSON line)
"""
import contextlib
import io
import json
import sys

import numpy as np

sys.path.insert(0, sys.argv[1])
from exploration_utils import NUMBA_AVAILABLE, sampling_budget_by_knapsack  # noqa: E402

request = json.load(sys.stdin)
answers = []
for batch in request["batches"]:
    states = np.array(batch["states"], dtype=np.float64)
    try:
        # The allocator prints progress lines; keep stdout for the answer.
        with contextlib.redirect_stdout(io.StringIO()):
            budget, _info = sampling_budget_by_knapsack(
                states,
                n=batch["n"],
                min_n=batch["min_n"],
                max_n=batch["max_n"],
                total_budget=batch["total_budget"],
                allow_fallback=batch.get("allow_fallback", True),
            )
        answers.append({"n": [int(x) for x in budget]})
    except Exception as error:  # the published code raises: report which error
        answers.append({"error": type(error).__name__})
print(json.dumps({"numba": NUMBA_AVAILABLE, "answers": answers}))
