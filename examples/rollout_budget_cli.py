"""Calling the rollout-budget CLI from Python (standard library only).

Shared by the verl and slime adapters: run `plan --format jsonl` for a step, parse its
groups, and hand results back with `observe`.
"""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

#: How the CLI is started; override with the ROLLOUT_BUDGET_CLI environment variable
#: (split on spaces), e.g. "node /opt/rollout-budget/bin/rollout-budget.js".
DEFAULT_CLI: tuple[str, ...] = tuple(os.environ.get("ROLLOUT_BUDGET_CLI", "npx rollout-budget").split())


@dataclass(frozen=True)
class Group:
    """One prompt's group in a plan: rollout j of the group uses seed + j."""

    group_id: str
    prompt_id: str
    n: int
    max_tokens: Optional[int]
    seed: int


@dataclass(frozen=True)
class StepPlan:
    header: dict
    groups: list[Group]

    @property
    def step(self) -> int:
        return int(self.header["step"])

    def by_prompt(self) -> dict[str, Group]:
        return {g.prompt_id: g for g in self.groups}


def parse_plan_jsonl(text: str) -> StepPlan:
    """Parses `plan --format jsonl`: one header line, then one line per group."""
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    if not lines or lines[0].get("type") != "header":
        raise ValueError("plan JSONL must start with a header line ({\"type\": \"header\", ...})")
    groups = [
        Group(g["group_id"], g["prompt_id"], int(g["n"]), g.get("max_tokens"), int(g["seed"]))
        for g in lines[1:]
    ]
    return StepPlan(lines[0], groups)


def run_cli(args: Sequence[str], cli: Sequence[str] = DEFAULT_CLI) -> str:
    """Runs the CLI; raises RuntimeError with its message on a non-zero exit."""
    done = subprocess.run([*cli, *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"rollout-budget {' '.join(args[:1])} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def plan_step(
    prompts_path: str,
    state: str,
    budget_rollouts: Optional[int] = None,
    budget_tokens: Optional[int] = None,
    seed: int = 0,
    extra: Iterable[str] = (),
    cli: Sequence[str] = DEFAULT_CLI,
) -> StepPlan:
    """Plans the next step for the prompts in `prompts_path` (JSONL with an "id" per line)."""
    args = ["plan", "--prompts", prompts_path, "--state", state, "--format", "jsonl", "--seed", str(seed)]
    if budget_rollouts is not None:
        args += ["--budget-rollouts", str(budget_rollouts)]
    if budget_tokens is not None:
        args += ["--budget-tokens", str(budget_tokens)]
    return parse_plan_jsonl(run_cli([*args, *extra], cli))


def observe(results: Iterable[dict], state: str, cli: Sequence[str] = DEFAULT_CLI) -> dict:
    """Applies results ({prompt_id, step, reward, tokens?, rollout_id?}) to the state."""
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for row in results:
            f.write(json.dumps(row) + "\n")
        path = f.name
    try:
        return json.loads(run_cli(["observe", "--results", path, "--state", state], cli))
    finally:
        os.unlink(path)
