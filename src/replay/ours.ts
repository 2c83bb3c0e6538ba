import { createRegistries } from '../allocator.js';
import { RolloutBudgetError } from '../errors.js';
import { defaultRounds, resolvePlanOptions, type PlanOptionsInput } from '../plan/options.js';
import { planStep, type Registries } from '../plan/planner.js';
import { runStepRounds, type RoundRequest, type RoundRollout } from '../plan/round-loop.js';
import type { PosteriorPolicy } from '../plan/policies.js';
import type { PromptState } from '../posterior/state.js';
import { snapshotOf } from '../posterior/state.js';
import { addRollout, applyEvidence, emptyEvidence } from '../store/accumulate.js';
import { metaDiffers, metaOf, withMeta } from '../store/meta.js';
import { MonomialCurves } from '../value/curves.js';
import type { Candidate, Plan } from '../plan/types.js';
import type { Decision, GroupOutcome, PolicyConfig, PolicyRun, ReplayPolicy, StepContext } from './types.js';

/**
 * Prompt states kept in memory exactly as the SQLite store keeps them (decayed evidence,
 * raw counts, length sums, and the group and hint a plan's candidates give, store/meta.ts),
 * so a replayed policy sees what the allocator would have seen.
 */
export class MemoryState {
  readonly states = new Map<string, PromptState>();
  constructor(private readonly decay: PlanOptionsInput['decay']) {}

  /** What Allocator.plan records of its candidates: their group and hint, where they differ. */
  record(candidates: readonly Candidate[]): void {
    for (const c of candidates) {
      const m = metaOf(c);
      if (m !== undefined && metaDiffers(this.states.get(c.id), m)) this.states.set(c.id, withMeta(this.states.get(c.id), m));
    }
  }

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

/** A decision of ours: the engine's Decision, and the plans of the step's rounds (audits, tests). */
export interface OurDecision extends Decision {
  readonly plans: readonly Plan[];
}

/**
 * Plans and generates a step with our planner (planStep) from a memory state, in `rounds`
 * rounds (default 2) through the library's one round loop (plan/round-loop.ts): each round is
 * generated with `ctx.generate`, and the next one plans with each prompt's rewards so far as
 * its `partial_rewards`. Under a token budget it plans with skip on unless the options say
 * otherwise: long, costly responses make a step select prompts rather than give every one
 * min_n (pass `plan --skip` for the same in production). Without skip, a budget that cannot
 * give every prompt min_n is BUDGET_INFEASIBLE, as in `plan`. Predicted pass rates are each
 * prompt's first plan's, made before any of its outcomes at this step.
 */
export function planWithState(
  state: MemoryState,
  ctx: StepContext,
  options: ReplayPlanOptions,
  registries: Registries,
): OurDecision {
  // Recorded before the snapshot: the plan equals one made on the state after the record (store/meta.ts).
  state.record(ctx.candidates);
  const snapshot = snapshotOf(state.states.values());
  const { rounds = defaultRounds, ...planOptions } = options;
  const input: PlanOptionsInput = {
    ...planOptions, skip: options.skip ?? ctx.budget.tokens !== undefined, minN: ctx.minN, maxN: ctx.maxN, seed: ctx.seed, step: ctx.step,
  };
  const byId = new Map(ctx.candidates.map((c) => [c.id, c]));
  const plan = (r: RoundRequest): Plan => {
    try {
      return planStep(snapshot, r.candidates, r.budget, { ...input, roundsLeft: r.roundsLeft }, registries);
    } catch (error) {
      // Not retried: the step is named, and the caller decides (raise the budget, lower min_n, set skip).
      if (!(error instanceof RolloutBudgetError) || error.code !== 'BUDGET_INFEASIBLE') throw error;
      throw new RolloutBudgetError(error.code, `step ${ctx.step}: ${error.message}`, error.exitCode, error.fields);
    }
  };
  const { plans } = runStepRounds({ candidates: ctx.candidates, budget: ctx.budget, rounds, plan }, (p) => generateRound(ctx, p, byId));
  const predicted = new Map<string, number>();
  for (const plan of plans) for (const a of plan.allocations) if (!predicted.has(a.prompt_id)) predicted.set(a.prompt_id, a.p_mean);
  return { predicted, plans };
}

/** Generates a round's plan with ctx.generate; returns the new rollouts. */
function generateRound(ctx: StepContext, plan: Plan, byId: ReadonlyMap<string, Candidate>): RoundRollout[] {
  const out: RoundRollout[] = [];
  for (const a of plan.allocations) {
    const g = ctx.generate(byId.get(a.prompt_id)!, a.n);
    for (let j = g.rewards.length - a.n; j < g.rewards.length; j++) {
      out.push({ prompt_id: a.prompt_id, reward: g.rewards[j]!, tokens: g.tokens === null ? null : g.tokens[j]! });
    }
  }
  return out;
}

/** Our planner with one of its posterior policies (bayes, thompson, mean, ...) as a replay strategy. */
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
 * perfect estimate of p would add (without the first round's bound on new prompts, which only
 * stands in for what their priors cannot tell apart).
 */
export const oraclePolicy: ReplayPolicy = {
  description: 'our planner at the true pass rates (simulation only): what a perfect estimate adds',
  needsTruth: true,
  create(config) {
    const registries = createRegistries();
    let truth = new Map<string, number>();
    const oracle: PosteriorPolicy = {
      description: 'true pass rates',
      // By id: the planner may build curves for a subset of the step's candidates (rounds).
      build: (input) => {
        const p = Float64Array.from(input.candidates, (c) => truth.get(c.id) ?? 0.5);
        return { curves: new MonomialCurves(input.value, { kind: 'point', p }), surplus: new MonomialCurves(input.surplusValue, { kind: 'point', p }) };
      },
    };
    registries.policies.register('oracle', oracle);
    // No first-round bound on new prompts (plan/fresh-cap.ts): it stands in for what a prior cannot tell apart, which the true pass rates do.
    const options: ReplayPlanOptions = { ...(config.plan as ReplayPlanOptions | undefined), policy: 'oracle', freshCap: 0 };
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
