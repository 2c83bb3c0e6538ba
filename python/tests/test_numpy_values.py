"""Numbers as a trainer holds them (numpy scalars and arrays, torch tensors) sent by each client.

Before, json.dumps raised ``Object of type int64 is not JSON serializable`` for a ``max_tokens``
read from a DataFrame, or rewards kept in an array. Needs numpy and torch (Debian's
python3-torch under /usr/bin/python3: test/executor-python.test.ts runs it there).
"""

import os
import tempfile
import unittest

from . import support
import rollout_budget as rb


class NumpyValuesTest(support.ServiceCase):
    def setUp(self):
        support.require_torch()

    def test_each_client_sends_numpy_and_torch_numbers_as_the_numbers_they_hold(self):
        import numpy as np
        import torch

        folder = support.temp_folder(self, "rb-py-numpy-")
        clients = {
            "http": rb.HttpClient(self.url),
            "stdio": rb.StdioClient(state=self.state, command=support.COMMAND),
            "cli": rb.Cli(state=os.path.join(folder, "cli.db"), command=support.COMMAND),
        }
        for kind, client in clients.items():
            with self.subTest(kind):
                pid = "numpy-%s" % kind
                plan = client.plan([{"id": pid, "max_tokens": np.int64(512)}], budget_rollouts=np.int32(8),
                                   max_n=torch.tensor(8))
                self.assertEqual([(a["prompt_id"], a["n"], a["max_tokens"]) for a in plan["allocations"]], [(pid, 8, 512)])
                summary = client.observe([{"prompt_id": pid, "step": 0, "rewards": np.array([1.0, 0.0, 1.0]),
                                           "tokens": torch.tensor([10, 20, 30])}])
                self.assertEqual(summary["applied"], 3)
                self.assertEqual(client.prompt(pid)["rollouts"], 3)
                # The field is named as the service names it (the Cli: the row of its results file).
                field = r"results\[0\]\.rewards" if kind == "cli" else r"body\.results\[0\]\.rewards"
                with self.assertRaisesRegex(TypeError, r"^%s: builtins\.set \{1, 2\} is not a JSON value" % field):
                    client.observe([{"prompt_id": pid, "step": 1, "rewards": {1, 2}}])
        # The Cli writes an observe's rows to a temporary file first: the row that could not be
        # written left it behind.
        spool = os.path.join(folder, "spool")
        os.mkdir(spool)
        saved, tempfile.tempdir = tempfile.tempdir, spool
        try:
            with self.assertRaises(TypeError):
                clients["cli"].observe([{"prompt_id": "numpy-cli", "step": 1, "rewards": {1, 2}}])
        finally:
            tempfile.tempdir = saved
        self.assertEqual(os.listdir(spool), [])
        for client in clients.values():
            if hasattr(client, "close"):
                client.close()


if __name__ == "__main__":
    unittest.main()
