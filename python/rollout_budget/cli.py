"""The rollout-budget CLI from Python, with the client's methods (plan, observe, prompt).

For a trainer that keeps the state in a file and wants no long-running service: each call is
one CLI process (`plan --format json`, `observe`, `inspect`, `backup`). The CLI is started by an explicit
command (rollout_budget.command.cli_command: a path to bin/rollout-budget.js, $ROLLOUT_BUDGET_CLI,
or `rollout-budget` on PATH), never `npx`. A non-zero exit raises RolloutBudgetError with the
exit code as status and the CLI's one-line message.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile

from .client_common import PLAN_OPTIONS, RolloutBudgetError, check_prompt_id, to_json
from .plan import plain
from .command import child_env, cli_command, password_out_of_args

__all__ = ["Cli"]

_FLAGS = {name: "--" + name.replace("_", "-") for name in PLAN_OPTIONS}


class Cli:
    """`rollout-budget` as a subprocess per call, on the state file `state`."""

    def __init__(self, state="./rollout-budget.db", command=None, timeout=600.0):
        self.state = state
        self.command = cli_command(command)
        self.timeout = timeout

    def run(self, args, stdin=None):
        """Runs the CLI with `args`; returns stdout, raises RolloutBudgetError on a non-zero exit.
        A ``postgres://`` URL's password among `args` goes to the CLI as PGPASSWORD, not on its
        command line (rollout_budget.command.password_out_of_args)."""
        args, password = password_out_of_args(list(args))
        done = subprocess.run(self.command + args, input=stdin, capture_output=True, text=True, encoding="utf-8",
                              timeout=self.timeout, env=child_env(password))
        if done.returncode != 0:
            message = done.stderr.strip().replace("rollout-budget: ", "", 1)
            raise RolloutBudgetError(done.returncode, {"code": "BAD_INPUT" if done.returncode == 2 else "CLI_FAILED", "message": message})
        return done.stdout

    def plan(self, prompts, budget_rollouts=None, budget_tokens=None, rounds_left=None, multiple_of=None, **options):
        """`plan --format json` on `prompts` (written to a temporary JSONL file); returns the plan dict."""
        options = {name: plain(value) for name, value in dict(options, rounds_left=rounds_left, multiple_of=multiple_of).items()}
        budget_rollouts, budget_tokens = plain(budget_rollouts), plain(budget_tokens)
        unknown = sorted(set(options) - set(PLAN_OPTIONS))
        if unknown:
            raise TypeError("unknown plan options %s; expected some of %s" % (unknown, ", ".join(PLAN_OPTIONS)))
        args = ["plan", "--prompts", "-", "--state", self.state, "--format", "json"]
        if budget_rollouts is not None:
            args += ["--budget-rollouts", str(budget_rollouts)]
        if budget_tokens is not None:
            args += ["--budget-tokens", str(budget_tokens)]
        for name, value in options.items():
            if value is None or value is False:
                continue
            args += [_FLAGS[name]] if value is True else [_FLAGS[name], str(value)]
        text = "".join(to_json(p, "prompts[%d]" % i) + "\n" for i, p in enumerate(prompts))
        return json.loads(self.run(args, stdin=text))

    def observe(self, results, **options):
        """`observe` on `results` (one transaction, idempotent); returns its summary."""
        unknown = sorted(set(options) - {"decay", "reobserve_discount"})
        if unknown:
            raise TypeError("unknown observe options %s; expected decay, reobserve_discount" % unknown)
        fd, path = tempfile.mkstemp(suffix=".jsonl")
        try:
            # Made before the rows are written: a row that cannot be written (a TypeError) removes it too.
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                for i, row in enumerate(results):
                    f.write(to_json(row, "results[%d]" % i) + "\n")
            args = ["observe", "--results", path, "--state", self.state]
            for name, value in options.items():
                if value is not None:  # left out, as plan does: it passed --decay None
                    args += [_FLAGS[name], str(plain(value))]
            return json.loads(self.run(args))
        finally:
            os.unlink(path)

    def prompt(self, prompt_id):
        """`inspect --prompt`: the prompt's posterior as the next plan sees it."""
        return json.loads(self.run(["inspect", "--state", self.state, "--prompt", check_prompt_id(prompt_id)]))

    def backup(self, out):
        """`backup --out <out>`: a consistent copy of the state file (taken while others write it),
        e.g. beside each trainer checkpoint; returns ``{"out", "prompts", "last_step", "bytes"}``,
        or, for an `out` that is a ``postgres://...?schema=`` URL (the state copied into that
        schema), ``{"out", "prompts", "last_step", "rollout_ids"}``.
        Putting a copy back: ``Cli(state=copy).backup(state_path)`` while nothing has the state open."""
        return json.loads(self.run(["backup", "--state", self.state, "--out", str(out)]))

    def close(self):
        return 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
