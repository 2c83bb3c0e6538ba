"""What both service clients share (client.py): the plan and observe bodies, the service's errors,
the retries of a request, and what a fork's child does with what it inherited."""

from __future__ import annotations

import io
import json
import logging
import os
import time
import urllib.parse
import weakref

from .plan import plain

#: Plan options the service takes (body.options), as keyword arguments of ``plan``.
PLAN_OPTIONS = ("min_n", "max_n", "skip", "policy", "value", "seed", "step", "prefill_weight", "decay",
                "reobserve_discount", "rounds_left", "multiple_of", "fresh_share", "fresh_cap")


class RolloutBudgetError(Exception):
    """A request the service refused (4xx) or could not serve (5xx), or a CLI exit (status = exit code)."""

    def __init__(self, status, error):
        self.status = status
        self.code = error.get("code")
        self.field = error.get("field")
        self.value = error.get("value")
        #: The service's message alone (str() prefixes the status and code).
        self.message = error.get("message")
        #: The service says the same request may succeed sent again shortly (its database went away).
        self.retryable = error.get("retryable") is True
        super().__init__("%s %s: %s" % (status, self.code, error.get("message")))


def plan_body(prompts, budget_rollouts=None, budget_tokens=None, **options):
    """The body of POST /v1/plan; unknown options raise TypeError, None values are left out."""
    unknown = sorted(set(options) - set(PLAN_OPTIONS))
    if unknown:
        raise TypeError("unknown plan options %s; expected some of %s" % (unknown, ", ".join(PLAN_OPTIONS)))
    budget = {}
    if budget_rollouts is not None:
        budget["rollouts"] = budget_rollouts
    if budget_tokens is not None:
        budget["tokens"] = budget_tokens
    body = {"candidates": list(prompts), "budget": budget}
    given = {k: v for k, v in options.items() if v is not None}
    if given:
        body["options"] = given
    return body


def to_json(value, where=""):
    """``value`` as JSON text, with the numbers a trainer holds: numpy scalars and arrays and torch
    tensors are written as the numbers and lists they hold (before, json.dumps raised
    ``Object of type int64 is not JSON serializable`` for a ``max_tokens`` read from a DataFrame).
    Another value is a TypeError naming its field (``where``: the path of ``value`` itself)."""
    try:
        return json.dumps(value, default=_json_default, allow_nan=False)
    except TypeError as error:
        found = _first_field(value, where, _not_json)
        raise TypeError("%s: %s" % (found[0], error) if found else str(error)) from None
    except ValueError:
        # NaN and ±Infinity: JSON has neither (json.dumps wrote NaN, which the service refused as
        # malformed JSON, and a stdio client then read its reply as out of order).
        found = _first_field(value, where, _non_finite)
        raise ValueError("%s is %s, not a number JSON can carry: leave the field out where there is no value"
                         % found if found else "a value is NaN or infinite") from None


def _not_json(leaf):
    return None if leaf is None or isinstance(leaf, (str, int, float, bool)) else "not a JSON value"


def _non_finite(leaf):
    return repr(leaf) if isinstance(leaf, float) and (leaf != leaf or leaf in (float("inf"), float("-inf"))) else None


def _first_field(value, path, what):
    """(path, what is wrong) of the first value in ``value`` that ``what`` finds wrong (``what``
    returns None for a good one), dicts and lists walked, numpy and torch values read as the
    numbers and lists they hold; None when none is. The path is ``candidates[0].n``."""
    value = plain(value)
    if isinstance(value, dict):
        items = (("%s.%s" % (path, k) if path else str(k), v) for k, v in value.items())
    elif isinstance(value, (list, tuple)):
        items = (("%s[%d]" % (path, i), v) for i, v in enumerate(value))
    else:
        said = what(value)
        return None if said is None else (path or "the value", said)
    for field, v in items:
        found = _first_field(v, field, what)
        if found:
            return found
    return None


def _json_default(value):
    out = plain(value)
    if out is not value:
        return out
    raise TypeError("%s.%s %r is not a JSON value: give numbers, strings, lists and dicts (numpy and torch numbers "
                    "are taken as well)" % (type(value).__module__, type(value).__name__, value))


def _observe_body(results, options):
    unknown = sorted(set(options) - {"decay", "reobserve_discount"})
    if unknown:
        raise TypeError("unknown observe options %s; expected decay, reobserve_discount" % unknown)
    body = {"results": list(results)}
    # None leaves an option out (the service's default), as plan_body does: observe(decay=None) was a 400.
    options = {k: v for k, v in options.items() if v is not None}
    if options:
        body["options"] = options
    return body


def _has_ids(result):
    """Whether a result line names its rollout with a `rollout_id` (a group line, `rewards`, has
    none: it is keyed by its batch's digest, so a part of a batch would be keyed apart) and its
    `step` (without one, each part would take the state's last step + 1 after the part before)."""
    return (isinstance(result, dict) and result.get("rollout_id") is not None and "rewards" not in result
            and result.get("step") is not None)


def _by_prompt(results):
    """`results` with each prompt's results together, in the order of their prompts' first result
    (a prompt's own order kept), so that parts split between prompts."""
    order = {}
    for r in results:
        order.setdefault(r.get("prompt_id"), []).append(r)
    return [r for rows in order.values() for r in rows]


def _split_point(results):
    """The index nearest the middle of `results` where the prompt changes (the middle itself
    when one prompt holds them all)."""
    mid = len(results) // 2
    for d in range(len(results)):
        for i in (mid - d, mid + d):
            if 0 < i < len(results) and results[i].get("prompt_id") != results[i - 1].get("prompt_id"):
                return i
    return mid


def _merge_summaries(parts):
    """One observe summary from its parts': counts summed, last_step the largest, warnings joined."""
    merged = {}
    for part in parts:
        for key, value in part.items():
            if key == "warnings":
                merged.setdefault("warnings", []).extend(w for w in value if w not in merged.get("warnings", []))
            elif key == "last_step":
                if value is not None and (merged.get(key) is None or value > merged[key]):
                    merged[key] = value
                else:
                    merged.setdefault(key, value)
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                merged[key] = merged.get(key, 0) + value
            else:
                merged.setdefault(key, value)
    return merged


def check_prompt_id(prompt_id):
    """`prompt_id` when it can name a prompt, else a TypeError (not a string) or ValueError (a lone
    surrogate, which UTF-8 cannot carry) naming it, as plan and observe refuse such ids. It was
    str()-ed: ``prompt(None)`` returned the prior of a prompt named "None", as if it were one not
    seen yet; a surrogate was a bare UnicodeEncodeError. The service names the rest (empty, NUL)."""
    if not isinstance(prompt_id, str):
        shown = repr(prompt_id)
        raise TypeError("prompt id must be a string (a prompt's \"id\", as plan and observe take it), got %s (%s.%s)" % (
            shown if len(shown) <= 200 else shown[:200] + "...", type(prompt_id).__module__, type(prompt_id).__name__))
    try:
        prompt_id.encode("utf-8")
    except UnicodeEncodeError as error:
        shown = repr(prompt_id)
        raise ValueError("prompt id %s must be well-formed Unicode (a lone surrogate \\ud800-\\udfff cannot be stored), "
                         "got one at position %d" % (shown if len(shown) <= 200 else shown[:200] + "...", error.start + 1)) from None
    return prompt_id


def _prompt_path(prompt_id, query):
    path = "/v1/prompts/" + urllib.parse.quote(check_prompt_id(prompt_id), safe="")
    if query:
        path += "?" + urllib.parse.urlencode(query)
    return path


_log = logging.getLogger("rollout_budget")

#: How many times a request the service answered 503 with `"retryable": true` (STATE_ERROR: its
#: state database cannot be reached, as when PostgreSQL restarts or the network is cut) is sent
#: again, waiting 0.5, 1, 2, 4, 8, 8 s between tries (23.5 s in all), before the error is raised.
#: Safe: plans only read, and an observe sent again is applied once.
STATE_RETRIES = 6
#: The same for a service that cannot be reached (HttpClient): refused or cut, as while it restarts.
CONNECT_RETRIES = 6


#: Every client alive in this process, so that a child made by ``os.fork`` (multiprocessing's
#: default start method on Linux, a DataLoader's workers) drops what it inherited: see _forked.
_LIVE = weakref.WeakSet()


def _after_fork_in_child():
    for client in list(_LIVE):
        # Each _forked lets go of the parent's connection or process first, then closes its copies:
        # one that fails there must not leave the next clients sharing the parent's.
        try:
            client._forked()
        except Exception:
            _log.exception("rollout-budget: a client could not close what it inherited at a fork")


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class _Client:
    state_retries = STATE_RETRIES
    connect_retries = 0

    def _forked(self):
        """Runs in the child of an ``os.fork``, before anything else there."""

    def _request(self, method, path, body=None):
        raise NotImplementedError

    def _call(self, method, path, body=None):
        """One request; a retryable 503 is sent again up to ``state_retries`` times, a connection
        refused or cut (ConnectionError: the service restarting; behind a reverse proxy, the
        proxy's own 502) up to ``connect_retries`` times, waiting 0.5, 1, 2, 4, 8, 8 s. A timeout
        is not retried (a proxy's 504 neither): the service got the request."""
        failures = {"state": 0, "connect": 0}
        while True:
            try:
                return self._request(method, path, body)
            except RolloutBudgetError as error:
                if error.status == 502 and error.code == "UNEXPECTED_RESPONSE":
                    kind, limit, reason = "connect", self.connect_retries, error
                elif error.status == 503 and error.retryable:
                    kind, limit, reason = "state", self.state_retries, error
                else:
                    raise
            except ConnectionError as error:
                kind, limit, reason = "connect", self.connect_retries, error
            if failures[kind] >= limit:
                raise reason
            wait = min(0.5 * 2 ** failures[kind], 8.0)
            failures[kind] += 1
            _log.warning("rollout-budget: %s; trying again in %.1f s (%d of %d)", reason, wait, failures[kind], limit)
            time.sleep(wait)

    def plan(self, prompts, budget_rollouts=None, budget_tokens=None, rounds_left=None, multiple_of=None, **options):
        """Plan one step (or one round of it): returns the plan dict.

        `rounds_left` (this round included) makes the budgets what is left of the step, of which
        the planner takes this round's share; `multiple_of` makes Σ n a multiple of it (the
        rollout workers or data-parallel ranks). Other options: min_n, max_n, skip, policy,
        value, seed, step, prefill_weight, decay, reobserve_discount.
        """
        body = plan_body(prompts, budget_rollouts, budget_tokens, rounds_left=rounds_left, multiple_of=multiple_of, **options)
        return self._call("POST", "/v1/plan", body)

    def observe(self, results, **options):
        """Apply results in one transaction; re-sending the same results is a no-op.

        Results over the service's body limit (413: ``serve --body-limit``, 8 MiB by default:
        some 47,000 rollouts of 180 bytes; a reverse proxy's own limit) are sent again in parts, a
        prompt's results together where they fit, when every result has a ``rollout_id`` and a
        ``step``: each part is one transaction, and the whole sent again after a failure applies
        each rollout once. The summary is the parts' (counts summed, ``prompts`` too, so a prompt
        split over two parts counts twice; ``last_step`` the largest; warnings joined). Without
        ids a part would be keyed apart from the whole (README, observe), and without steps each
        part would take the state's last step + 1 after the part before, so such results get the
        413, saying so. A part that fails after others were applied raises its error saying how
        many were. Over HTTP a body over 1 MiB goes with ``Expect: 100-continue``, so the 413 comes
        before the body is sent, whatever its size (rollout_budget/http_continue.py)."""
        results = list(results)
        try:
            return self._call("POST", "/v1/observe", _observe_body(results, options))
        except RolloutBudgetError as error:
            if error.status != 413:
                raise
            if len(results) < 2 or not all(_has_ids(r) for r in results):
                raise RolloutBudgetError(413, {
                    "code": error.code, "field": error.field, "value": error.value,
                    "message": "%s (%d results in one request: with a rollout_id and a step on each, the client sends them in "
                               "parts; or raise the limit)" % (error.message, len(results))}) from error
        _log.info("rollout-budget: %d results are over the service's body limit: sending them in parts", len(results))
        summaries = []
        try:
            self._observe_parts(_by_prompt(results), options, summaries)
        except RolloutBudgetError as error:
            if not summaries:
                raise
            applied = sum(len(part) for part, _ in summaries)
            raise RolloutBudgetError(error.status, {
                "code": error.code, "field": error.field, "value": error.value,
                "message": "%s (sending %d results in parts: %d of them were observed in parts before this one; send the whole again "
                           "once the cause is fixed: those count as duplicates)" % (error.message, len(results), applied)}) from error
        return _merge_summaries(summary for _, summary in summaries)

    def _observe_parts(self, results, options, summaries):
        """Observes `results` in as few halvings as the body limit needs, appending (part, summary)
        to `summaries` as each part is applied."""
        try:
            summaries.append((results, self._call("POST", "/v1/observe", _observe_body(results, options))))
            return
        except RolloutBudgetError as error:
            if error.status != 413 or len(results) < 2:
                raise
        half = _split_point(results)
        self._observe_parts(results[:half], options, summaries)
        self._observe_parts(results[half:], options, summaries)

    def prompt(self, prompt_id, **query):
        """One prompt's posterior, counts and expected tokens (query: group, max_tokens, step). An id
        that is not a string, or holds a lone surrogate, is a TypeError or ValueError naming it."""
        return self._call("GET", _prompt_path(prompt_id, query))

    def health(self):
        return self._call("GET", "/healthz")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def _close_inherited(stream):
    """Closes a fork's child's copy of a file its parent's threads use, under its buffers: a thread
    of the parent that was reading or writing it at the fork held its buffer's lock, which in the
    child is never released, so the buffer's own close() would wait forever. Closing the raw file
    marks the buffers closed too, so they are never flushed or closed again."""
    raw = stream
    while raw is not None and not isinstance(raw, io.RawIOBase):
        raw = getattr(raw, "buffer", None) or getattr(raw, "raw", None)
    if raw is not None:
        try:
            raw.close()
        except (OSError, ValueError):
            pass
