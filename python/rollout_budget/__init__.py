"""rollout-budget for Python trainers (standard library only; numpy optional).

- Service client: `HttpClient`, `StdioClient`, `connect`, errors as `RolloutBudgetError`.
- `python -m rollout_budget.dataset`: a verl dataset as the prompts JSONL the CLI reads (dataset.py).
- CLI wrapper: `Cli` (an explicit path to the CLI, never npx; see rollout_budget.command).
- Helpers every integration uses: `expand_plan` (a plan's rollouts as rows, with the executor's
  group ids and seeds), `results_rows` (what `observe` takes), `group_advantages` (GRPO,
  Dr. GRPO and RLOO advantages on uneven groups, equal to verl's), `stable_prompt_id` (an id
  that survives across steps), `run_rounds` (one step in rounds around your generate function),
  `step_metrics` (a step's ``rollout_budget/*`` figures for the trainer's logger).
- Trainer integrations: `rollout_budget.verl` (with python/patches/verl-b178a3c.patch) and
  `rollout_budget.slime` (a rollout function and a reward post-process). See docs/trainers.md.
"""

from .advantages import ADVANTAGE_KINDS, group_advantages
from .cli import Cli
from .client import PLAN_OPTIONS, HttpClient, RolloutBudgetError, StdioClient, connect
from .command import cli_command
from .metrics import step_metrics
from .plan import expand_plan, group_id, group_seed, note_observed, note_planned, results_rows, rollout_id, stable_prompt_id
from .rounds import RoundsResult, run_rounds

__version__ = "0.1.0"

__all__ = [
    "ADVANTAGE_KINDS",
    "Cli",
    "HttpClient",
    "PLAN_OPTIONS",
    "RolloutBudgetError",
    "RoundsResult",
    "StdioClient",
    "cli_command",
    "connect",
    "expand_plan",
    "group_advantages",
    "group_id",
    "group_seed",
    "note_observed",
    "note_planned",
    "results_rows",
    "rollout_id",
    "run_rounds",
    "stable_prompt_id",
    "step_metrics",
]
