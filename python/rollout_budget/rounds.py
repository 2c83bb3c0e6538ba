"""One training step in rounds around the caller's generate function.

Round r plans with what is LEFT of the step's budgets and ``rounds_left`` = rounds − r (this
round included): the planner takes this round's share (the service's rule, issue 9's
`rounds_left`). After the first round each prompt carries its rewards so far as
``partial_rewards``, so the next plan tops groups up by what they showed; new rollouts join the
same group (``first_rollout``: same group id, later indices and seeds; after a round with
aborted rollouts, which give no reward, past every index launched, so none repeats). The rule is the
library's round loop (src/plan/round-loop.ts), mirrored here: rounds stop after the last one, or
as soon as a budget left is spent (≤ 0); a round that plans nothing generates nothing, and the
next round plans again (its share is larger). The step's results are observed once, after its
last round.

What is left is counted from what was generated: one rollout per finished rollout (aborted
ones are resumed at a later step, so they are not charged a rollout), and its tokens when
generate reports them, else the plan's expected tokens per rollout (allocation expected_tokens
/ n), so a token budget is never overspent by rollouts of unknown length; an aborted rollout's
tokens, when reported, are charged too (they were generated: the library's round loop charges
a round every token it generated, `RoundOutcome`); a plan's prefill (its expected tokens beyond
Σ n × tokens per rollout) is charged once.
"""

from __future__ import annotations

import logging

from .client_common import RolloutBudgetError
from .plan import expand_plan, note_observed, note_planned, results_rows

_log = logging.getLogger("rollout_budget")

__all__ = ["run_rounds", "RoundsResult"]


class RoundsResult:
    """What `run_rounds` did: the plans (one a round), the results it observed, the summary."""

    def __init__(self, plans, results, summary):
        self.plans = plans
        self.results = results
        self.summary = summary

    @property
    def step(self):
        return self.plans[0]["step"] if self.plans else None


def _outcome(value):
    """(reward, tokens, finish_reason) from what generate returned for one rollout."""
    if isinstance(value, dict):
        return value.get("reward"), value.get("tokens"), value.get("finish_reason")
    return value, None, None


def run_rounds(client, prompts, generate, budget_rollouts=None, budget_tokens=None, rounds=2, observe=True, refill_aborted=0,
               pass_threshold=None, **options):
    """Plans, generates and observes one step in `rounds` rounds; returns a RoundsResult.

    `client` has the service client's ``plan``/``observe`` (HttpClient, StdioClient or Cli).
    `prompts` are the step's candidates (dicts with a stable ``id``). `generate(rows)` receives
    one round's rows (expand_plan: prompt_id, group_id, rollout_index, rollout_id, seed,
    max_tokens, step) and returns, in the same order, a reward per row or a dict
    ``{"reward", "tokens"?, "finish_reason"?}``. `options` are plan options (min_n, max_n,
    skip, multiple_of, seed, step, ...): every round's Σ n is a multiple of ``multiple_of``.
    `refill_aborted`: up to that many more rounds (default 0) after the last, each planned
    with what rollouts aborted in the round before left unspent (an aborted rollout is not
    charged), for a step that must be whole (slime's global batch); 0 keeps them unspent, as
    APRIL's over-provisioning means them to be. `pass_threshold`: as in `results_rows`, rewards
    above it count as a pass (1), the others as a fail (0).

    Give ``step`` (the trainer's own step): a step run again after a crash then repeats its
    rollout ids, and its results apply once; without it the step is the state's last observed
    step + 1.

    On an error after a round was generated (a reward `results_rows` refuses, the service gone
    at observe), the exception's ``rounds_result`` is a RoundsResult of the plans (the failing
    round's too) and the results of the rounds completed before it, not observed (``summary``
    None): observe them once the cause is fixed.
    """
    if not isinstance(rounds, int) or isinstance(rounds, bool) or rounds < 1:
        raise ValueError("rounds must be an integer ≥ 1, got %r" % (rounds,))
    if not isinstance(refill_aborted, int) or isinstance(refill_aborted, bool) or refill_aborted < 0:
        raise ValueError("refill_aborted must be an integer ≥ 0, got %r" % (refill_aborted,))
    if budget_rollouts is None and budget_tokens is None:
        raise ValueError("a budget is required: budget_rollouts, budget_tokens or both")
    prompts = list(prompts)
    left_r, left_t = budget_rollouts, budget_tokens
    plans, results = [], []
    options = dict(options)
    try:
        summary = _rounds(client, prompts, generate, left_r, left_t, rounds, observe, options, plans, results, refill_aborted,
                          pass_threshold)
    except Exception as error:
        # What was generated before the error (a reward refused, a 413, the service gone):
        # the caller can observe it once the cause is fixed instead of losing the step.
        if getattr(error, "rounds_result", None) is None:
            try:
                error.rounds_result = RoundsResult(plans, list(results), None)
            except AttributeError:
                pass
        raise
    return RoundsResult(plans, results, summary)


def _rounds(client, prompts, generate, left_r, left_t, rounds, observe, options, plans, results, refill_aborted,
            pass_threshold=None):
    """run_rounds' rounds and observe, filling `plans` and `results`; returns the observe's summary."""
    partial = {}
    launched = {}  # prompt id → the index after the last rollout launched this step (aborted ones too)
    left = [left_r, left_t]

    def one_round(rounds_left, **extra):
        """Plans, generates and books one round; returns how many of its rollouts were aborted."""
        candidates = [dict(p, partial_rewards=list(partial[p["id"]])) if p["id"] in partial else p for p in prompts]
        plan = note_planned(client.plan(candidates, budget_rollouts=left[0], budget_tokens=left[1], rounds_left=rounds_left,
                                        **dict(options, **extra)))
        plans.append(plan)
        options["step"] = plan["step"]
        rows = expand_plan(plan, prompts, next_rollout=launched)
        if not rows:
            return 0  # nothing this round: the next round plans again, with a larger share
        outcomes = list(generate(rows))
        if len(outcomes) != len(rows):
            raise ValueError("generate returned %d outcomes for %d rollouts" % (len(outcomes), len(rows)))
        rewards, tokens, finish = zip(*(_outcome(o) for o in outcomes))
        batch = results_rows(rows, rewards, tokens, finish, pass_threshold=pass_threshold)
        planned = [a for a in plan["allocations"] if a["n"] > 0]
        per_rollout = {a["prompt_id"]: a["expected_tokens"] / a["n"] for a in planned}
        # Prefill: expected tokens beyond Σ n × tokens per rollout (within rounding: none).
        beyond = plan["totals"]["expected_tokens"] - sum(a["expected_tokens"] for a in planned)
        spent_t = beyond if beyond > 0.5 * (len(planned) + 1) else 0.0
        spent_r = aborted = 0
        for row, res in zip(rows, batch):
            launched[row["prompt_id"]] = max(launched.get(row["prompt_id"], 0), row["rollout_index"] + 1)
            if res.get("finish_reason") == "abort":
                # Resumed at a later step: not a rollout of this one, but its tokens were spent.
                spent_t += res.get("tokens", 0)
                aborted += 1
                continue
            spent_r += 1
            spent_t += res["tokens"] if "tokens" in res else per_rollout[row["prompt_id"]]
            partial.setdefault(row["prompt_id"], []).append(res["reward"])
        results.extend(batch)
        if left[0] is not None:
            left[0] = max(0, left[0] - spent_r)
        if left[1] is not None:
            left[1] = max(0, int(left[1] - spent_t))
        return aborted

    aborted = 0
    for r in range(rounds):
        aborted = one_round(rounds - r)
        if r + 1 < rounds and (left[0] == 0 or left[1] == 0):
            break
    # Rollouts aborted in the last round left their share of the rollout budget unspent (a
    # step that must be whole: slime's global batch); each refill round plans what is left.
    for _ in range(refill_aborted):
        if not aborted or left[0] == 0 or left[1] == 0:
            break
        try:
            # skip: a prompt whose rollouts all aborted need not start again at min_n, which the
            # budget left may not pay for (the aborted rollouts' tokens were spent).
            aborted = one_round(1, skip=True)
        except RolloutBudgetError as error:
            if error.code != "BUDGET_INFEASIBLE":
                raise
            _log.warning("rollout-budget: step %s: the rollouts %d aborted samples left are not planned again: %s",
                         options.get("step", "?"), aborted, error)
            break
    return note_observed(client.observe(results), results) if observe and results else None


class StepTotal:
    """A client wrapper a step plans its rounds through (run_rounds), so that the step's rollouts,
    all rounds together, are a multiple of `k` (slime's global_batch_size: slime trains on
    ⌊samples / k⌋ batches of k, drops the rest, and asserts at least one). Only the total
    matters to slime, so rounds before the last plan their share freely: each a multiple of k,
    where k is the whole budget (rollout_batch_size × n_samples_per_prompt = global_batch_size,
    one training step a rollout), is all or nothing, rounds in name only. The last round
    (rounds_left 1), after S finished rollouts: with multiple_of k when S is a multiple of k (one
    round is the plan with multiple_of of a step without rounds); else with the budget left,
    which lands on the step's budget when spent; where it leaves the total between two
    multiples (a token budget, max_n or skip leaves some unspent), planned again with its budget
    cut to the multiple below (the plan's warnings say so), unless the cut is below what the round
    must start (its plan kept, with a warning). `k` None: plans as they are.

    `each`: every round's Σ n a multiple of it as well (None: no such rule, slime's case). verl
    splits each generation call over its agent-loop workers (`DataProto.chunk` asserts equal
    parts), so each round's rollouts must divide by them, while the step's total must divide by
    all its workers (k). Every plan is then asked with ``multiple_of`` `each`, and k with the
    last round's multiple when the rounds before finished a multiple of k; `each` must divide k,
    so the cut to the multiple below is a multiple of `each` too (ValueError otherwise)."""

    def __init__(self, client, k, budget_rollouts, each=None):
        if each is not None and k is not None and k % each:
            raise ValueError("StepTotal: each round's multiple %d does not divide the step's multiple %d" % (each, k))
        self.client = client
        self.k = k
        self.budget = budget_rollouts
        self.each = each

    def plan(self, candidates, budget_rollouts=None, rounds_left=1, **options):
        if self.each is not None:
            options["multiple_of"] = self.each
        if rounds_left > 1:
            return self.client.plan(candidates, budget_rollouts=budget_rollouts, rounds_left=rounds_left, **options)
        # rounds_left 1 is the planner's default: left out, a one-round step's request is the one it always was.
        if self.k is None:
            return self.client.plan(candidates, budget_rollouts=budget_rollouts, **options)
        so_far = self.budget - budget_rollouts
        if so_far % self.k == 0:
            return self.client.plan(candidates, budget_rollouts=budget_rollouts, **dict(options, multiple_of=self.k))
        plan = self.client.plan(candidates, budget_rollouts=budget_rollouts, **options)
        while True:
            planned = plan["totals"]["rollouts"]
            cut = self.k * ((so_far + planned) // self.k) - so_far
            if cut < 0 or cut == planned:
                return plan  # < 0: the rounds before already passed the multiple below (warned at the step's end)
            try:
                shorter = self.client.plan(candidates, budget_rollouts=cut, **options)
            except RolloutBudgetError as error:
                if error.code != "BUDGET_INFEASIBLE":
                    raise
                # The cut is below what this round must start (a prompt whose earlier rollouts all
                # aborted is new again: min_n): keep the plan; the step's end warns of the total.
                plan.setdefault("warnings", []).append(
                    "the last round kept its plan of %d rollouts: cut to %d for a multiple of multiple_of %d, it could not start "
                    "its new prompts (%s)" % (planned, cut, self.k, error))
                return plan
            plan = shorter
            plan.setdefault("warnings", []).append(
                "the last round planned again with budget_rollouts %d (it planned %d of the %d left): the step's %d rollouts so "
                "far and these make a multiple of multiple_of %d" % (cut, planned, budget_rollouts, so_far, self.k))

    def observe(self, results):
        return self.client.observe(results)
