"""Settings of the trainer integrations, from one place: a mapping or the environment.

Trainers start the integration from code we do not own (verl's `fit`, slime's rollout actor),
so settings come from a mapping (verl: the `rollout_budget` section of the trainer config, e.g.
`+rollout_budget.url=http://...` on the command line) and fall back to environment variables:

| key | environment | meaning |
| --- | --- | --- |
| url | ROLLOUT_BUDGET_URL | `http://host:port` of `rollout-budget serve` (or `https://host/path` of a TLS reverse proxy in front of it); else a state path (or postgres URL) served by a child `serve --stdio` |
| token | ROLLOUT_BUDGET_TOKEN | bearer token of the service (`serve --token`) |
| budget_rollouts | ROLLOUT_BUDGET_BUDGET_ROLLOUTS | rollouts a step; default: the trainer's uniform budget (prompts × n) |
| budget_tokens | ROLLOUT_BUDGET_BUDGET_TOKENS | generated tokens a step (optional) |
| multiple_of | ROLLOUT_BUDGET_MULTIPLE_OF | Σ n a multiple of this; default: what the trainer needs (its workers) |
| pass_threshold | ROLLOUT_BUDGET_PASS_THRESHOLD | when set, every reward counts as a pass (1) above this and a fail (0) otherwise, for rewards outside [0, 1] such as DAPO's ±1 or a judge's 0–10; default: none (rewards are taken as they are, and one outside [0, 1] is an error) |
| options | ROLLOUT_BUDGET_OPTIONS | plan options as a JSON object, e.g. {"min_n": 2, "max_n": 32, "skip": true}; `multiple_of` there is the setting above |
| timeout_s | ROLLOUT_BUDGET_TIMEOUT_S | seconds a request waits for the service's answer (default 60; above the service's --plan-timeout-s for large plans); for a state path only when set: the child `serve --stdio` that gives none in time is stopped (the next request starts it again) |
| rounds | ROLLOUT_BUDGET_ROUNDS | rounds a step is planned and generated in (an integer ≥ 1; default 1: one plan a step). round 1 plans its share, round 2 what is left with each prompt's rewards so far (docs/trainers.md, "Rounds in verl" and "Rounds in slime") |
| backup_state | ROLLOUT_BUDGET_BACKUP_STATE | the SQLite state file the service serves (its `serve --state`), copied into each trainer checkpoint (verl: `<default_local_dir>/global_step_<N>/rollout-budget.db`); default: `url` when that is a SQLite state path, else none; `none` turns it off |
"""

from __future__ import annotations

import json
import math
import os

from .client import HOST_PORT, PLAN_OPTIONS, connect, is_service_url
from .plan import REWARD_SLACK

__all__ = ["Settings", "settings_from"]

_KEYS = ("url", "token", "budget_rollouts", "budget_tokens", "multiple_of", "pass_threshold", "options", "timeout_s", "rounds", "backup_state")
#: HttpClient's own default.
DEFAULT_TIMEOUT_S = 60.0


class Settings:
    """Resolved integration settings (see the module doc)."""

    def __init__(self, url=None, token=None, budget_rollouts=None, budget_tokens=None, multiple_of=None, pass_threshold=None, options=None,
                 timeout_s=None, backup_state=None, rounds=1):
        self.url = url
        #: Rounds a step is planned in (≥ 1); 1: one plan a step.
        self.rounds = _int("rounds", rounds)
        #: Whether timeout_s was given (else the HTTP default; a child serve --stdio then has none).
        self.timeout_set = timeout_s is not None
        self.timeout_s = DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s
        self.token = token
        self.budget_rollouts = budget_rollouts
        self.budget_tokens = budget_tokens
        self.multiple_of = multiple_of
        self.pass_threshold = None if pass_threshold is None else _threshold(pass_threshold)
        self.options = dict(options or {})
        unknown = sorted(set(self.options) - set(PLAN_OPTIONS))
        if unknown:
            raise ValueError("rollout_budget options: unknown %s; expected some of %s" % (unknown, ", ".join(PLAN_OPTIONS)))
        # multiple_of is a setting of its own: the integrations pass it (or what the trainer needs) themselves.
        if "multiple_of" in self.options:
            given = _int("options.multiple_of", self.options.pop("multiple_of"))
            if self.multiple_of is not None and self.multiple_of != given:
                raise ValueError("rollout_budget: multiple_of %r and options.multiple_of %r differ; give one" % (self.multiple_of, given))
            self.multiple_of = given
        if self.url and HOST_PORT.match(str(self.url)):
            # Taken for a state path, it served a private SQLite file of that name through a child serve --stdio.
            raise ValueError("rollout_budget.url %r is a host and port without a scheme: write http://%s (or https:// for a TLS proxy)" % (self.url, self.url))
        self.backup_state = _backup_state(backup_state, self.url)

    def client(self):
        """A client for `url`: HttpClient for http:// and https://, else a StdioClient on that state."""
        if not self.url:
            raise ValueError("rollout_budget: set url (ROLLOUT_BUDGET_URL) to the service's http://host:port or a state path: "
                             "in verl as +rollout_budget.url=... on the command line (the config travels to the Ray actor that "
                             "runs fit); as a variable, in the environment of the Ray actor that trains or rolls out (on a "
                             "cluster a variable exported where the job is submitted does not reach it: pass it in the job's "
                             "runtime_env env_vars)")
        if is_service_url(self.url):
            return connect(self.url, token=self.token, timeout=self.timeout_s)
        # A child serve --stdio has no limit unless one is set: an observe may wait its turn for
        # another writer's lock (ROLLOUT_BUDGET_LOCK_TIMEOUT_S, 300 s), past the 60 s default.
        return connect(self.url, timeout=self.timeout_s if self.timeout_set else None)

    def reward_of(self, value, where):
        """A reward in [0, 1] for observe: pass (1) or fail (0) against pass_threshold when it is
        set, else as it is (within REWARD_SLACK of [0, 1]: clamped)."""
        r = float(value)
        if math.isnan(r):
            raise ValueError("%s: reward is NaN (not a number): check the reward function for this rollout" % where)
        if self.pass_threshold is not None:
            # Every reward, not only those outside [0, 1]: on a 0–10 scale with threshold 5, a 1 passed and a 3 failed.
            return 1.0 if r > self.pass_threshold else 0.0
        if -REWARD_SLACK <= r <= 1.0 + REWARD_SLACK:
            return min(1.0, max(0.0, r))
        raise ValueError("%s: reward %r is outside [0, 1]; set pass_threshold (verl: +rollout_budget.pass_threshold=<t>; "
                         "ROLLOUT_BUDGET_PASS_THRESHOLD) to count rewards above it as a pass, e.g. 0 for DAPO's ±1" % (where, value))


def _int(name, value):
    # int() truncates 2.5 and takes True for 1: both are a mistake in a config, not a number of rounds.
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise ValueError("rollout_budget.%s must be an integer, got %r" % (name, value))
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise ValueError("rollout_budget.%s must be an integer, got %r" % (name, value)) from None
    if n < 1:
        raise ValueError("rollout_budget.%s must be ≥ 1, got %r" % (name, value))
    return n


def _threshold(value):
    # NaN compared false with every reward: each rollout counted as a fail, unsaid.
    try:
        t = float(value) if not isinstance(value, bool) else None
    except (TypeError, ValueError):
        t = None
    if t is None or not math.isfinite(t):
        raise ValueError("rollout_budget.pass_threshold must be a finite number (rewards above it pass), got %r" % (value,))
    return t


def _seconds(name, value):
    try:
        s = float(value)
    except (TypeError, ValueError):
        raise ValueError("rollout_budget.%s must be a number of seconds, got %r" % (name, value)) from None
    if not s > 0 or s == float("inf"):
        raise ValueError("rollout_budget.%s must be a number of seconds above 0, got %r" % (name, value))
    return s


def _backup_state(value, url):
    """The SQLite state file to copy into checkpoints: `value`, or `url` when that is a SQLite
    path (the integration's own child `serve --stdio`); None when off (`none`) or unknown."""
    if value is None:
        state = str(url) if url else ""
        return state if state and state != ":memory:" and "://" not in state else None
    text = str(value).strip()
    if text.lower() in ("", "none", "off", "false"):
        return None
    if "://" in text:
        raise ValueError("rollout_budget.backup_state must be a SQLite state file, got %r: copy a PostgreSQL state's "
                         "schema with pg_dump --schema <schema>" % (value,))
    return text


def settings_from(mapping=None, environ=None):
    """Settings from `mapping` (a dict-like; missing keys fall back to `environ`, default os.environ)."""
    environ = os.environ if environ is None else environ
    mapping = {} if mapping is None else mapping
    raw = {}
    for key in _KEYS:
        value = mapping.get(key) if hasattr(mapping, "get") else None
        if value is None:
            value = environ.get("ROLLOUT_BUDGET_" + key.upper())
        raw[key] = value
    options = raw["options"]
    if isinstance(options, str):
        try:
            options = json.loads(options)
        except ValueError:
            raise ValueError("rollout_budget.options must be a JSON object, got %r" % options) from None
    if options is not None and not hasattr(options, "items"):
        raise ValueError("rollout_budget.options must be an object, got %r" % (options,))
    return Settings(
        url=raw["url"],
        token=raw["token"],
        budget_rollouts=None if raw["budget_rollouts"] is None else _int("budget_rollouts", raw["budget_rollouts"]),
        budget_tokens=None if raw["budget_tokens"] is None else _int("budget_tokens", raw["budget_tokens"]),
        multiple_of=None if raw["multiple_of"] is None else _int("multiple_of", raw["multiple_of"]),
        pass_threshold=raw["pass_threshold"],
        options=None if options is None else {str(k): v for k, v in options.items()},
        timeout_s=None if raw["timeout_s"] is None else _seconds("timeout_s", raw["timeout_s"]),
        backup_state=raw["backup_state"],
        rounds=1 if raw["rounds"] is None else raw["rounds"],
    )
