"""How the rollout-budget CLI is started from Python: always an explicit program, never `npx`.

`rollout-budget` is not a published npm package, so `npx rollout-budget` outside the clone asks
the public registry for an unrelated name. The command is, in order:
  1. the `command` argument: a path to bin/rollout-budget.js (run with node), or an argv list;
  2. $ROLLOUT_BUDGET_CLI: a path to bin/rollout-budget.js (run with node), or a command line
     (split like a shell does), e.g. "node /opt/rollout-budget/bin/rollout-budget.js"; blank
     (spaces only) counts as unset, as does a blank $ROLLOUT_BUDGET_NODE;
  3. `rollout-budget` on PATH (after `npm link` in the clone).
Node is $ROLLOUT_BUDGET_NODE, else `node` on PATH.
"""

from __future__ import annotations

import os
import shlex
import shutil

__all__ = ["cli_command"]


def _node():
    node = (os.environ.get("ROLLOUT_BUDGET_NODE") or "").strip() or shutil.which("node")
    if node is None:
        raise FileNotFoundError("node is not on PATH: set ROLLOUT_BUDGET_NODE to the node binary (Node 20+)")
    return node


def _from_text(text):
    text = text.strip()
    if not text:
        raise ValueError("command must not be empty")
    if text.endswith(".js") and os.path.exists(text):
        return [_node(), text]
    argv = shlex.split(text)
    if len(argv) == 1 and argv[0].endswith(".js"):
        raise FileNotFoundError("rollout-budget CLI %r does not exist (a path to bin/rollout-budget.js is expected)" % argv[0])
    return argv


def cli_command(command=None):
    """The argv prefix that runs the rollout-budget CLI (see the module doc for the order)."""
    if command is not None:
        if isinstance(command, (list, tuple)):
            if not command:
                raise ValueError("command must not be empty")
            return [str(c) for c in command]
        return _from_text(str(command))
    env = os.environ.get("ROLLOUT_BUDGET_CLI")
    if env and env.strip():  # blank: as if unset (it ran `serve` as the program)
        return _from_text(env)
    found = shutil.which("rollout-budget")
    if found is not None:
        return [found]
    raise FileNotFoundError(
        "cannot find the rollout-budget CLI: set ROLLOUT_BUDGET_CLI to /path/to/rollout-budget/bin/rollout-budget.js "
        "(after `npm run build` in the clone), pass command=..., or run `npm link` in the clone to put rollout-budget on PATH"
    )
