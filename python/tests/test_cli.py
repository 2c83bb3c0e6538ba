"""The CLI wrapper (rollout_budget.Cli) against the real CLI, and how the CLI is found."""

import os
import shutil
import tempfile
import unittest

from . import support
import rollout_budget as rb


class CliTest(unittest.TestCase):
    def setUp(self):
        self.dir = support.temp_folder(self, "rb-py-cli-")
        self.state = os.path.join(self.dir, "s.db")

    def test_plan_observe_prompt_round_trip(self):
        cli = rb.Cli(state=self.state, command=support.COMMAND)
        prompts = [{"id": "a", "max_tokens": 256}, {"id": "b", "group": "g"}, {"id": "c"}]
        plan = cli.plan(prompts, budget_rollouts=22, multiple_of=4, skip=True, max_n=12, seed=5)
        self.assertEqual(plan["version"], 1)
        self.assertEqual(sum(a["n"] for a in plan["allocations"]) % 4, 0)
        rows = rb.expand_plan(plan, prompts)
        rewards = [1 if r["prompt_id"] == "a" else 0 for r in rows]
        summary = cli.observe(rb.results_rows(rows, rewards, [10] * len(rows)))
        self.assertEqual(summary["applied"], len(rows))
        self.assertEqual(cli.observe(rb.results_rows(rows, rewards))["duplicates"], len(rows))
        view = cli.prompt("a")
        self.assertEqual(view["rollouts"], sum(1 for r in rows if r["prompt_id"] == "a"))
        self.assertEqual(view["reward_sum"], view["rollouts"])

    def test_backup_copies_the_state_and_the_copy_put_back_restores_it(self):
        cli = rb.Cli(state=self.state, command=support.COMMAND)
        cli.observe([{"prompt_id": "a", "step": 0, "reward": 1, "rollout_id": "0/a#0"}])
        copy = os.path.join(self.dir, "global_step_0.db")
        self.assertEqual(cli.backup(copy), {"out": copy, "prompts": 1, "last_step": 0, "bytes": os.path.getsize(copy)})
        cli.observe([{"prompt_id": "b", "step": 1, "reward": 0, "rollout_id": "1/b#0"}])
        self.assertEqual(cli.prompt("b")["rollouts"], 1)
        rb.Cli(state=copy, command=support.COMMAND).backup(self.state)
        self.assertEqual((cli.prompt("a")["rollouts"], cli.prompt("b")["rollouts"]), (1, 0))
        with self.assertRaises(rb.RolloutBudgetError) as ctx:
            cli.backup(os.path.join(self.dir, "no-folder", "x.db"))
        self.assertIn("cannot write (ENOENT)", str(ctx.exception))

    def test_a_cli_error_is_a_rolloutbudgeterror_with_the_exit_code_and_message(self):
        cli = rb.Cli(state=self.state, command=support.COMMAND)
        with self.assertRaises(rb.RolloutBudgetError) as ctx:
            cli.plan([{"id": "a"}, {"id": "a"}], budget_rollouts=8)
        self.assertEqual(ctx.exception.status, 2)
        self.assertIn('"id" "a" repeats line 1', str(ctx.exception))
        with self.assertRaises(rb.RolloutBudgetError) as ctx:
            cli.plan([{"id": "a"}], budget_rollouts=8, multiple_of=0)
        self.assertIn("--multiple-of", str(ctx.exception))
        with self.assertRaises(TypeError):
            cli.plan([{"id": "a"}], budget_rollouts=8, min_rollouts=2)


class CommandTest(unittest.TestCase):
    def setUp(self):
        self.saved = {k: os.environ.get(k) for k in ("ROLLOUT_BUDGET_CLI", "ROLLOUT_BUDGET_NODE", "PATH")}

    def tearDown(self):
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    def test_a_js_path_runs_with_node(self):
        os.environ["ROLLOUT_BUDGET_NODE"] = support.NODE
        self.assertEqual(rb.cli_command(support.CLI), [support.NODE, support.CLI])
        os.environ["ROLLOUT_BUDGET_CLI"] = support.CLI
        self.assertEqual(rb.cli_command(), [support.NODE, support.CLI])
        os.environ["ROLLOUT_BUDGET_CLI"] = "node /opt/x/bin/rollout-budget.js --flag"
        self.assertEqual(rb.cli_command(), ["node", "/opt/x/bin/rollout-budget.js", "--flag"])
        os.environ["ROLLOUT_BUDGET_NODE"] = " "  # blank: node on PATH, not " " as the program
        self.assertEqual(rb.cli_command(support.CLI), [shutil.which("node"), support.CLI])

    def test_never_npx_a_clear_error_when_nothing_is_configured(self):
        # Regression: examples/rollout_budget_cli.py defaulted to `npx rollout-budget`, which
        # outside the clone asks the public registry for an unrelated package.
        os.environ.pop("ROLLOUT_BUDGET_CLI", None)
        empty = tempfile.mkdtemp(prefix="rb-py-path-")
        try:
            os.environ["PATH"] = empty
            with self.assertRaisesRegex(FileNotFoundError, "ROLLOUT_BUDGET_CLI"):
                rb.cli_command()
            with self.assertRaisesRegex(FileNotFoundError, "does not exist"):
                rb.cli_command("/nonexistent/bin/rollout-budget.js")
            # Blank counts as unset: it gave [] and StdioClient ran `serve` as the program
            # ("No such file or directory: 'serve'", naming neither the variable nor the CLI).
            for blank in (" ", "\n"):
                os.environ["ROLLOUT_BUDGET_CLI"] = blank
                with self.assertRaisesRegex(FileNotFoundError, "^cannot find the rollout-budget CLI: set ROLLOUT_BUDGET_CLI"):
                    rb.cli_command()
                with self.assertRaisesRegex(FileNotFoundError, "^cannot find the rollout-budget CLI"):
                    rb.StdioClient(state=os.path.join(empty, "s.db")).health()
            os.environ.pop("ROLLOUT_BUDGET_CLI")
            with self.assertRaisesRegex(ValueError, "^command must not be empty$"):
                rb.cli_command("  ")
            # `rollout-budget` on PATH is used as is.
            link = os.path.join(empty, "rollout-budget")
            with open(link, "w") as f:
                f.write("#!/bin/sh\nexit 0\n")
            os.chmod(link, 0o755)
            self.assertEqual(rb.cli_command(), [link])
        finally:
            shutil.rmtree(empty, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
