import { createRegistries } from '../allocator.js';
import { RolloutBudgetError } from '../errors.js';
import { resolvePlanOptions, type PlanOptionsInput } from '../plan/options.js';
import { planStep, type Registries } from '../plan/planner.js';
import type { Policy } from '../plan/policies.js';
import type { PromptState } from '../posterior/state.js';
import { snapshotOf } from '../posterior/state.js';
import { addRollout, applyEvidence, emptyEvidence } from '../store/accumulate.js';
import { MonomialCurves } from '../value/curves.js';
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

/**
 * Plans a step with our planner (planStep) from a memory state. Under a token budget it plans
 * with skip on (a prompt may get 0 rollouts: with long, costly responses the step selects
 * prompts rather than giving every one min_n; pass --skip to `plan` for the same); it also
 * does when the batch cannot get min_n each within the budget. An explicit `skip` option wins.
 */
export function planWithState(
  state: MemoryState,
  ctx: StepContext,
  options: PlanOptionsInput,
  registries: Registries,
): Decision {
  const snapshot = snapshotOf(state.states.values());
  const input: PlanOptionsInput = {
    ...options, skip: options.skip ?? ctx.budget.tokens !== undefined, minN: ctx.minN, maxN: ctx.maxN, seed: ctx.seed, step: ctx.step,
  };
  let plan;
  try {
    plan = planStep(snapshot, ctx.candidates, ctx.budget, input, registries);
  } catch (error) {
    if (!(error instanceof RolloutBudgetError) || error.code !== 'BUDGET_INFEASIBLE') throw error;
    plan = planStep(snapshot, ctx.candidates, ctx.budget, { ...input, skip: true }, registries);
  }
  const byId = new Map(plan.allocations.map((a) => [a.prompt_id, a]));
  const n = Int32Array.from(ctx.candidates, (c) => byId.get(c.id)?.n ?? 0);
  const predicted = new Map(plan.allocations.map((a) => [a.prompt_id, a.p_mean]));
  return { n, predicted };
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
 * `oracle`: the knapsack value at the true pass rates (simulation only), through the same
 * planner and solver as ours, so it is the ceiling of what a better estimate could give.
 */
export const oraclePolicy: ReplayPolicy = {
  description: 'knapsack value at the true pass rates (simulation only): the ceiling',
  needsTruth: true,
  create(config) {
    const registries = createRegistries();
    let truth: Float64Array = new Float64Array(0);
    const oracle: Policy = {
      description: 'true pass rates',
      build: (input) => ({
        curves: new MonomialCurves(input.value, { kind: 'point', p: truth }),
        surplus: new MonomialCurves(input.surplusValue, { kind: 'point', p: truth }),
      }),
    };
    registries.policies.register('oracle', oracle);
    const options: PlanOptionsInput = { ...(config.plan as PlanOptionsInput | undefined), policy: 'oracle', value: 'knapsack' };
    const state = new MemoryState(options.decay);
    return {
      decide(ctx) {
        truth = ctx.truth ?? new Float64Array(ctx.candidates.length).fill(0.5);
        const d = planWithState(state, ctx, options, registries);
        return { ...(d.n === undefined ? {} : { n: d.n }), predicted: new Map(ctx.candidates.map((c, i) => [c.id, truth[i]!])) };
      },
      observe: (step, groups) => state.observe(step, groups),
    };
  },
};
