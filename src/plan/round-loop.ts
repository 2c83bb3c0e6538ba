import { badInput, badOption, quote } from '../errors.js';
import { field } from '../fields.js';
import { withPartials } from './partial.js';
import type { Budget, Candidate, Plan } from './types.js';

/**
 * The round loop of one step, the one copy every caller shares (`loop`, replay and simulate,
 * the demo): plan → generate → plan again with each prompt's rewards so far as its
 * `partial_rewards`, until the rounds or the budget run out. How much each round may spend
 * is the planner's rule (plan/rounds.ts): the loop only tells it what is left and how many
 * rounds are left. How rollouts are generated is the caller's: `stepRounds` is a generator that
 * yields each plan and takes that plan's rollouts back; `runStepRounds` and
 * `runStepRoundsAsync` drive it with a synchronous (replay: ctx.generate) or asynchronous
 * (executor: executePlan) generate function. The step's results are observed once, after
 * the last round, by the caller.
 *
 * What is left is counted from what was generated: one rollout per rollout returned, and its
 * tokens when known, else the plan's expected tokens per rollout for that prompt; a plan's
 * prefill (its expected tokens beyond n × tokens per rollout, with a prefill weight) is
 * charged once, when its rollouts come back. The step stops after `rounds` rounds, or as
 * soon as a budget left is spent (≤ 0). A round that plans nothing generates nothing and the
 * next round plans again (its share is larger).
 */

/** One generated rollout, as the loop counts it. Rollouts that did not finish are left out. */
export interface RoundRollout {
  readonly prompt_id: string;
  /** Reward in [0, 1]. */
  readonly reward: number;
  /** Generated tokens; null or absent when unknown (charged at the plan's expected tokens). */
  readonly tokens?: number | null;
}

/**
 * A round's outcome with the tokens it generated, when the generator counted them: every token
 * generated for the round, rollouts that did not finish included (an over-provisioned group's
 * surplus, aborted: its tokens were spent, though it is no outcome). Charged in place of the
 * rollouts' own tokens, so a token budget is not overspent by the rollouts a round aborted.
 */
export interface RoundOutcome {
  readonly rollouts: readonly RoundRollout[];
  readonly tokens: number;
}

/** What a generate function returns for a round: its finished rollouts, or a RoundOutcome. */
export type RoundAnswer = readonly RoundRollout[] | RoundOutcome;

/** What the loop asks the planner for: one round. */
export interface RoundRequest {
  /** The step's candidates; those with rewards so far carry them as partial_rewards. */
  readonly candidates: readonly Candidate[];
  /** What is left of the step's budget. */
  readonly budget: Budget;
  /** Rounds left, this one included: pass it as the plan option `roundsLeft`. */
  readonly roundsLeft: number;
  /** Round index from 0. */
  readonly round: number;
  /** The step the first round's plan was made for (later rounds plan the same step). */
  readonly step?: number;
}

export interface StepRoundsInput {
  readonly candidates: readonly Candidate[];
  /**
   * Candidates left out of the rounds still to plan, read before each round: the caller adds
   * to it as it learns a prompt cannot be generated (`loop`: refused by the server as longer
   * than its context), so a later round does not plan it again.
   */
  readonly dropped?: ReadonlySet<string>;
  /** The step's whole budget. */
  readonly budget: Budget;
  /** Rounds a step is planned in, at most (≥ 1; plan/options.ts defaultRounds: 2). */
  readonly rounds: number;
  /** Plans one round (allocator.plan or planStep with `roundsLeft` and `step` from the request). */
  readonly plan: (request: RoundRequest) => Plan;
  /** Asked before each round after the first: true ends the step there (`loop`: Ctrl-C), no further round planned. */
  readonly stopped?: () => boolean;
}

/** StepRoundsInput with a planner that may answer later (`runStepRoundsAsync` only). */
export interface AsyncStepRoundsInput extends Omit<StepRoundsInput, 'plan'> {
  /** Plans one round: AsyncAllocator.plan, allocator.plan or planStep, with `roundsLeft` and `step` from the request. */
  readonly plan: (request: RoundRequest) => Plan | Promise<Plan>;
}

/** One rollout of the step as a results line (the results JSONL format): what `allocator.observe` takes. */
export interface StepResult {
  readonly prompt_id: string;
  readonly step: number;
  readonly reward: number;
  /** The rollout's generated tokens, when the generate function gave them (the state learns lengths from them). */
  readonly tokens?: number;
}

export interface StepRounds {
  /** Every round's plan, in order (plans with no rollouts included). */
  readonly plans: Plan[];
  /** Each prompt's rewards at this step, in generation order. */
  readonly rewards: Map<string, number[]>;
  /** Each prompt's rollouts' tokens, beside `rewards` (null where the generate function gave none). */
  readonly tokens: Map<string, (number | null)[]>;
  /**
   * The step's rollouts as results lines, a line a rollout with its tokens when known, prompt
   * by prompt in `rewards`' order: `allocator.observe(done.results)`. Observing `rewards` alone
   * (as this README's example did) never gave the state a length, so every plan went on
   * assuming `max_tokens` a rollout. Built on first read.
   */
  readonly results: readonly StepResult[];
  /** Rollouts and tokens charged (known tokens, else expected; prefill included). */
  readonly spent: { rollouts: number; tokens: number };
  /** What is left of the step's budget (≥ 0). */
  readonly left: Budget;
}

/** What the rounds ask their driver for: a round's plan, or a plan's generated rollouts. */
type RoundNeed = { readonly plan: RoundRequest } | { readonly rollouts: Plan };

/**
 * The rounds' bookkeeping, the one copy: yields what it needs next (a plan for a request, then
 * that plan's rollouts) and takes it back; the drivers below only answer. O(rounds · N).
 */
function* roundMachine(input: StepRoundsInput | AsyncStepRoundsInput): Generator<RoundNeed, StepRounds, Plan | RoundAnswer> {
  if (!Number.isSafeInteger(input.rounds) || input.rounds < 1) throw badOption(`rounds must be an integer ≥ 1, got ${input.rounds}`, ['rounds']);
  const rewards = new Map<string, number[]>();
  const tokens = new Map<string, (number | null)[]>();
  const plans: Plan[] = [];
  const budget = input.budget;
  const spent = { rollouts: 0, tokens: 0 };
  const leftOf = (): Budget => ({
    ...(budget.rollouts === undefined ? {} : { rollouts: Math.max(0, budget.rollouts - spent.rollouts) }),
    ...(budget.tokens === undefined ? {} : { tokens: Math.max(0, Math.floor(budget.tokens - spent.tokens)) }),
  });
  let step: number | undefined;
  const dropped = input.dropped;
  for (let round = 0; round < input.rounds; round++) {
    const left = leftOf();
    if (round > 0 && (left.rollouts === 0 || left.tokens === 0 || input.stopped?.() === true)) break;
    const plan = (yield {
      plan: {
        candidates: withPartials(dropped === undefined || dropped.size === 0 ? input.candidates : input.candidates.filter((c) => !dropped.has(c.id)), rewards),
        budget: left, roundsLeft: input.rounds - round, round,
        ...(step === undefined ? {} : { step }),
      },
    }) as Plan; // a plan is what a plan need is answered with
    step ??= plan.step;
    plans.push(plan);
    if (plan.totals.rollouts === 0) continue;
    const answer = (yield { rollouts: plan }) as RoundAnswer;
    const counted = Array.isArray(answer) ? undefined : checkOutcome(answer as RoundOutcome, round);
    const rollouts = counted === undefined ? (answer as readonly RoundRollout[]) : counted.rollouts;
    const perRollout = tokensPerRollout(plan);
    spent.tokens += prefillOf(plan, perRollout) + (counted?.tokens ?? 0);
    const given = new Map<string, number>();
    for (let k = 0; k < rollouts.length; k++) {
      const r = rollouts[k]!;
      // A boolean reward is 1 or 0 from here on: kept as given, the next round's plan refused
      // it as its own partial_rewards ("partial_rewards[0] must be a number, got true").
      const reward = checkRollout(r, k, round, perRollout, given);
      const got = rewards.get(r.prompt_id);
      const known = typeof r.tokens === 'number' ? r.tokens : null;
      if (got === undefined) {
        rewards.set(r.prompt_id, [reward]);
        tokens.set(r.prompt_id, [known]);
      } else {
        got.push(reward);
        tokens.get(r.prompt_id)!.push(known);
      }
      spent.rollouts++;
      if (counted === undefined) spent.tokens += r.tokens ?? perRollout.get(r.prompt_id)?.tokens ?? 0;
    }
  }
  const at = step ?? plans[0]!.step; // the first round always plans
  let results: StepResult[] | undefined;
  return { plans, rewards, tokens, spent, left: leftOf(), get results() { return (results ??= resultLines(rewards, tokens, at)); } };
}

/**
 * Checks rollout k of a round's answer against the round's plan: a reward in [0, 1], a prompt
 * the plan gives rollouts, at most its n of them (`given` counts them). A NaN reward was named
 * only by the next round's plan, as a partial_rewards field the caller never wrote; rollouts
 * beyond the plan were counted as spent. Returns the reward as a number (a boolean as 1 or 0). O(1).
 */
function checkRollout(r: RoundRollout, k: number, round: number, planned: ReadonlyMap<string, { n: number }>, given: Map<string, number>): number {
  const where = `round ${round + 1}: the generate function's rollout ${k}`;
  if (r === null || typeof r !== 'object') throw badInput(where, `must be an object {prompt_id, reward, tokens?}, got ${quote(r)}`);
  // A results line's rule (fields.ts): a number in [0, 1], or a boolean as 1 or 0.
  const reward = field.reward(where, 'reward', r.reward);
  const tokens: unknown = r.tokens;
  if (tokens !== undefined && tokens !== null && !(typeof tokens === 'number' && tokens >= 0 && tokens < Infinity)) {
    throw badInput(where, `"tokens" must be a non-negative number, null or absent, got ${quote(tokens)}`);
  }
  const n = planned.get(r.prompt_id)?.n ?? 0;
  const count = (given.get(r.prompt_id) ?? 0) + 1;
  given.set(r.prompt_id, count);
  if (count > n) throw badInput(where, `prompt ${quote(r.prompt_id)} has ${count} rollout${count === 1 ? '' : 's'}, more than this round's plan gives it (${n})`);
  return reward;
}

/**
 * A round's RoundOutcome: an object whose `rollouts` is an array and `tokens` a finite number
 * ≥ 0. A negative count handed the next round more than the step's budget (4,000 tokens, a
 * generate function answering -1e6: a second round of 1,004,000), a NaN one failed as the
 * caller's "budget_tokens must be an integer", and a missing one charged the round nothing. O(1).
 */
function checkOutcome(outcome: RoundOutcome, round: number): RoundOutcome {
  const where = `round ${round + 1}: the generate function's answer`;
  if (outcome === null || typeof outcome !== 'object' || !Array.isArray(outcome.rollouts)) {
    throw badInput(where, `must be an array of rollouts or {rollouts, tokens}, got ${quote(outcome)}`);
  }
  const tokens: unknown = outcome.tokens;
  if (typeof tokens !== 'number' || !(tokens >= 0 && tokens < Infinity)) {
    throw badInput(where, `"tokens" must be the round's generated tokens, a finite number ≥ 0, got ${quote(tokens)}`);
  }
  return outcome;
}

/** The step's rollouts as results lines (StepRounds.results). O(rollouts). */
function resultLines(rewards: ReadonlyMap<string, readonly number[]>, tokens: ReadonlyMap<string, readonly (number | null)[]>, step: number): StepResult[] {
  const lines: StepResult[] = [];
  for (const [prompt_id, got] of rewards) {
    const counts = tokens.get(prompt_id)!;
    for (let j = 0; j < got.length; j++) {
      const t = counts[j];
      lines.push(t === null || t === undefined ? { prompt_id, step, reward: got[j]! } : { prompt_id, step, reward: got[j]!, tokens: t });
    }
  }
  return lines;
}

/**
 * The step's rounds as a generator: yields each plan with rollouts to generate and expects
 * that plan's generated rollouts back (`next(rollouts)`); returns the step's rounds. Throws
 * what the planner throws (BUDGET_INFEASIBLE only when the whole budget left cannot give the
 * prompts min_n). O(rounds · (plan + N)).
 */
export function* stepRounds(input: StepRoundsInput): Generator<Plan, StepRounds, RoundAnswer> {
  const machine = roundMachine(input);
  let next = machine.next();
  while (next.done !== true) {
    const need = next.value;
    next = machine.next('plan' in need ? input.plan(need.plan) : yield need.rollouts);
  }
  return next.value;
}

/** Runs a step's rounds with a synchronous generate function (the replay's ctx.generate). */
export function runStepRounds(input: StepRoundsInput, generate: (plan: Plan) => RoundAnswer): StepRounds {
  const rounds = stepRounds(input);
  let next = rounds.next();
  while (next.done !== true) next = rounds.next(generate(next.value));
  return next.value;
}

/**
 * Runs a step's rounds with an asynchronous generate function (the executor's executePlan),
 * and a planner that may be asynchronous too (an AsyncAllocator's plan, on PostgreSQL).
 */
export async function runStepRoundsAsync(input: StepRoundsInput | AsyncStepRoundsInput, generate: (plan: Plan) => Promise<RoundAnswer>): Promise<StepRounds> {
  const machine = roundMachine(input);
  let next = machine.next();
  while (next.done !== true) {
    const need = next.value;
    next = machine.next('plan' in need ? await input.plan(need.plan) : await generate(need.rollouts));
  }
  return next.value;
}

/**
 * The plan's prefill tokens (prefill weight × prompt tokens per group): from its columns, or
 * for a plan read from a file, its expected tokens beyond Σ n × tokens per rollout (0 when that
 * is within rounding). O(rows).
 */
function prefillOf(plan: Plan, perRollout: ReadonlyMap<string, { n: number; tokens: number }>): number {
  const prefill = plan.columns?.prefillTokens;
  let total = 0;
  if (prefill !== undefined) {
    for (const t of prefill) total += t;
    return total;
  }
  if (plan.columns !== undefined) return 0;
  for (const t of perRollout.values()) total += t.n * t.tokens;
  const beyond = plan.totals.expected_tokens - total;
  return beyond > 0.5 * (perRollout.size + 1) ? beyond : 0;
}

/** Per planned prompt: its n and expected tokens per rollout (from the plan's columns when it has them). O(rows). */
function tokensPerRollout(plan: Plan): Map<string, { n: number; tokens: number }> {
  const out = new Map<string, { n: number; tokens: number }>();
  const columns = plan.columns;
  if (columns !== undefined) {
    for (let j = 0; j < columns.length; j++) out.set(columns.candidates[j]!.id, { n: columns.n[j]!, tokens: columns.tokensPerRollout[j]! });
    return out;
  }
  for (const a of plan.allocations) out.set(a.prompt_id, { n: a.n, tokens: a.n > 0 ? a.expected_tokens / a.n : 0 });
  return out;
}
