"""Client of the rollout-budget allocator service (standard library only, Python 3.8+).

Two transports with the same methods:

* ``HttpClient("http://127.0.0.1:8080")`` talks to ``rollout-budget serve`` over HTTP JSON, or
  through a reverse proxy that adds TLS and a path (``https://host/rollout-budget``);
* ``StdioClient(state="state.db")`` starts ``rollout-budget serve --stdio`` as a child process
  and talks NDJSON over its stdin/stdout (for a Ray actor that owns the allocator).

Per training step::

    plan = client.plan(prompts, budget_rollouts=len(prompts) * 8, multiple_of=8)
    rows = rollout_budget.expand_plan(plan, prompts)      # one row per rollout
    ...generate rows, grade them...
    client.observe(rollout_budget.results_rows(rows, rewards, tokens))

``prompts`` are dicts ``{"id", "max_tokens"?, "prompt_tokens"?, "group"?, "partial_rewards"?,
"prior_pass_rate"?, "prior_samples"?}`` (the last two an offline difficulty hint, passed through)
with a stable id (`stable_prompt_id`); results as the CLI's results JSONL. Errors raise
:class:`RolloutBudgetError` with the service's status, code, field and value. With a token
(`token=`, else $ROLLOUT_BUDGET_TOKEN) every HTTP request carries ``Authorization: Bearer``.
"""

from __future__ import annotations

import re

from .client_common import CONNECT_RETRIES, PLAN_OPTIONS, STATE_RETRIES, RolloutBudgetError, plan_body
from .http_client import HttpClient, is_service_url
from .stdio_client import StdioClient

__all__ = ["RolloutBudgetError", "HttpClient", "StdioClient", "connect", "PLAN_OPTIONS", "is_service_url", "plan_body",
           "STATE_RETRIES", "CONNECT_RETRIES"]


#: host:port (or [v6]:port), with an optional path: the service's address without its scheme.
HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):\d{1,5}(/.*)?$")


def connect(target, **kwargs):
    """``http://...`` or ``https://...`` → HttpClient; a SQLite path or a ``postgres://`` URL → a
    StdioClient on that state. Another ``scheme://`` is a ValueError, not a state path, and so is
    ``host:port`` without a scheme (it would be a new SQLite file of that name)."""
    if is_service_url(target):
        return HttpClient(target, **kwargs)
    if HOST_PORT.match(str(target)):
        raise ValueError("%r is a host and port without a scheme: write http://%s (or https:// for a TLS proxy)" % (target, target))
    scheme = re.match(r"([A-Za-z][A-Za-z0-9+.-]*)://", str(target))
    if scheme and scheme.group(1).lower() not in ("postgres", "postgresql"):
        raise ValueError("%r is neither the service's url (http:// or https://) nor a state (a SQLite path or a "
                         "postgres:// url)" % (target,))
    return StdioClient(state=target, **kwargs)
