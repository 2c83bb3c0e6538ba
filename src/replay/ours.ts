import { createRegistries } from '../allocator.js';
import { RolloutBudgetError } from '../errors.js';
import { defaultRounds, resolvePlanOptions, type PlanOptionsInput } from '../plan/options.js';
import { roundBudget, withPartials } from '../plan/partial.js';
import { planStep, type Registries } from '../plan/planner.js';
import type { Policy } from '../plan/policies.js';
import type { PromptState } from '../posterior/state.js';
import { snapshotOf } from '../posterior/state.js';
import { addRollout, applyEvidence, emptyEvidence } from '../store/accumulate.js';
import { MonomialCurves } from '../value/curves.js';
import type { Budget, Candidate, Plan } from '../plan/types.js';
import type { Decision, GroupOutcome, PolicyConfig, PolicyRun, ReplayPolicy, StepContext } from './types.js';

/**
 * Prompt states kept in memory exactly as the SQLite store keeps them (decayed evidence,
 * raw counts, length sums), so a replayed policy sees what the allocator would have seen.
 */
export class MemoryState {
  readonly states = new Map<string, PromptState>();
  constructor(private readonly decay: PlanOptionsInput['decay']) {}

  observe(step: number, groups: readonly GroupOutcome[]): void {
    const decay = resolvePlanOptions({ decay: this.decay ?? {} }).decay;
    for (const g of groups) {
      const e = emptyEvidence(g.prompt_id, step);
      g.rewards.forEach((r, j) => addRollout(e, r, g.tokens === null ? undefined : g.tokens[j]));
      this.states.set(g.prompt_id, applyEvidence(this.states.get(g.prompt_id), e, decay));
    }
  }
}

/** Our planner's options, and in how many rounds a step is planned and generated. */
export type ReplayPlanOptions = PlanOptionsInput & { readonly rounds?: number };

/**
 * Plans a step with our planner (planStep) from a memory state. Under a token budget it plans
 * with skip on (a prompt may get 0 rollouts: with long, costly responses the step selects
 * prompts rather than giving every one min_n; pass --skip to `plan` for the same); it also
 * does when the batch cannot get min_n each within the budget. An explicit `skip` option wins.
 */
export function planWithState(
  state: MemoryState,
  ctx: StepContext,
  options: ReplayPlanOptions,
  registries: Registries,
): Decision {
  const snapshot = snapshotOf(state.states.values());
  const { rounds = defaultRounds, ...planOptions } = options;
  const input: PlanOptionsInput = {
    ...planOptions, skip: options.skip ?? ctx.budget.tokens !== undefined, minN: ctx.minN, maxN: ctx.maxN, seed: ctx.seed, step: ctx.step,
  };
  const planOnce = (candidates: readonly Candidate[], budget: Budget): Plan => {
    try {
      return planStep(snapshot, candidates, budget, input, registries);
    } catch (error) {
      if (!(error instanceof RolloutBudgetError) || error.code !== 'BUDGET_INFEASIBLE') throw error;
      return planStep(snapshot, candidates, budget, { ...input, skip: true }, registries);
    }
  };
  if (rounds > 1) return planInRounds(ctx, rounds, planOnce);
  const plan = planOnce(ctx.candidates, ctx.budget);
  const byId = new Map(plan.allocations.map((a) => [a.prompt_id, a]));
  const n = Int32Array.from(ctx.candidates, (c) => byId.get(c.id)?.n ?? 0);
  const predicted = new Map(plan.allocations.map((a) => [a.prompt_id, a.p_mean]));
  return { n, predicted };
}

/**
 * A step in `rounds` rounds: round r of R plans a 1/(R − r + 1) share of the budget still left,
 * its groups are generated, and the next round plans with each prompt's rewards so far as its
 * `partial_rewards` (conditional values: e.g. more rollouts for a group that is all wrong so
 * far, none for one that already varies under `informative`). What is left is counted from
 * the generated groups (their tokens when known, else the plan's expected tokens). Predicted
 * pass rates are each prompt's first plan's, made before any of its outcomes at this step.
 */
function planInRounds(ctx: StepContext, rounds: number, planOnce: (candidates: readonly Candidate[], budget: Budget) => Plan): Decision {
  const rewards = new Map<string, readonly number[]>();
  const predicted = new Map<string, number>();
  const byId = new Map(ctx.candidates.map((c) => [c.id, c]));
  const left: { rollouts?: number; tokens?: number } = { ...ctx.budget };
  for (let r = 0; r < rounds; r++) {
    const budget = roundBudget(left, r, rounds);
    if (budget === undefined) break;
    const plan = planOnce(withPartials(ctx.candidates, rewards), budget);
    if (plan.totals.rollouts === 0) break;
    for (const a of plan.allocations) {
      if (!predicted.has(a.prompt_id)) predicted.set(a.prompt_id, a.p_mean);
      const g = ctx.generate(byId.get(a.prompt_id)!, a.n);
      rewards.set(a.prompt_id, [...g.rewards]);
      if (left.rollouts !== undefined) left.rollouts -= a.n;
      if (left.tokens !== undefined) left.tokens -= g.tokens === null ? a.expected_tokens : sumLast(g.tokens, a.n);
    }
  }
  return { predicted };
}

function sumLast(xs: readonly number[], n: number): number {
  let total = 0;
  for (let j = xs.length - n; j < xs.length; j++) total += xs[j]!;
  return total;
}

/** One of our planner's policies (bayes, thompson, mean, ...) as a replay policy. */
export function ourPolicy(name: string, description: string, overrides: PlanOptionsInput = {}): ReplayPolicy {
  return {
    description,
    create(config: PolicyConfig): PolicyRun {
      const options: PlanOptionsInput = { ...(config.plan as PlanOptionsInput | undefined), ...overrides, policy: name };
      const state = new MemoryState(options.decay);
      const registries = createRegistries();
      return {
        decide: (ctx) => planWithState(state, ctx, options, registries),
        observe: (step, groups) => state.observe(step, groups),
      };
    },
  };
}

/**
 * `oracle`: our planner with the true pass rates in place of the posteriors (simulation only):
 * the same value (default `balanced`), rounds, solver and length model, so it shows what a
 * perfect estimate of p would add.
 */
export const oraclePolicy: ReplayPolicy = {
  description: 'our planner at the true pass rates (simulation only): what a perfect estimate adds',
  needsTruth: true,
  create(config) {
    const registries = createRegistries();
    let truth = new Map<string, number>();
    const oracle: Policy = {
      description: 'true pass rates',
      // By id: the planner may build curves for a subset of the step's candidates (rounds).
      build: (input) => {
        const p = Float64Array.from(input.candidates, (c) => truth.get(c.id) ?? 0.5);
        return { curves: new MonomialCurves(input.value, { kind: 'point', p }), surplus: new MonomialCurves(input.surplusValue, { kind: 'point', p }) };
      },
    };
    registries.policies.register('oracle', oracle);
    const options: ReplayPlanOptions = { ...(config.plan as ReplayPlanOptions | undefined), policy: 'oracle' };
    const state = new MemoryState(options.decay);
    return {
      decide(ctx) {
        truth = new Map(ctx.candidates.map((c, i) => [c.id, ctx.truth?.[i] ?? 0.5]));
        const d = planWithState(state, ctx, options, registries);
        return { ...(d.n === undefined ? {} : { n: d.n }), predicted: truth };
      },
      observe: (step, groups) => state.observe(step, groups),
    };
  },
};
