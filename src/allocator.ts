import { batchOf, type ResultBatch } from './io/formats.js';
import { betaQuantile } from './math/beta.js';
import { createPolicyRegistry } from './plan/policies.js';
import { resolvePlanOptions, type PlanOptionsInput } from './plan/options.js';
import { planStep, posteriors, type Registries } from './plan/planner.js';
import type { Budget, Candidate, Plan } from './plan/types.js';
import { expectedTokens } from './posterior/length.js';
import type { StateSnapshot } from './posterior/state.js';
import { createSolverRegistry } from './solver/registry.js';
import { SqliteStore } from './store/sqlite.js';
import type { ObserveSummary, Store } from './store/types.js';
import { createValueRegistry } from './value/functions.js';

export function createRegistries(): Registries {
  return { values: createValueRegistry(), policies: createPolicyRegistry(), solvers: createSolverRegistry() };
}

/** A prompt's posterior as the next plan would see it. */
export interface PosteriorView {
  id: string;
  group: string | null;
  step: number;
  alpha: number;
  beta: number;
  p_mean: number;
  p_low: number;
  p_high: number;
  rollouts: number;
  reward_sum: number;
  last_step: number | null;
  expected_tokens: number;
  seen: boolean;
}

export interface AllocatorOptions {
  /** SQLite file path, or ':memory:' (the default). */
  readonly state?: string;
  /** A store of your own (e.g. another backend); overrides `state`. */
  readonly store?: Store;
  /** Defaults for every plan and observe of this allocator (decay, prior, min/max n, ...). */
  readonly defaults?: PlanOptionsInput;
  readonly registries?: Registries;
}

/**
 * The library entry: an allocator on a store. plan() reads, observe() writes, posterior()
 * reads; all three validate like the CLI.
 */
export class Allocator {
  readonly store: Store;
  readonly registries: Registries;
  private readonly defaults: PlanOptionsInput;

  constructor(options: AllocatorOptions = {}) {
    this.store = options.store ?? new SqliteStore(options.state ?? ':memory:');
    this.registries = options.registries ?? createRegistries();
    this.defaults = options.defaults ?? {};
    resolvePlanOptions(this.defaults);
  }

  private merged(options: PlanOptionsInput): PlanOptionsInput {
    const d = this.defaults;
    return {
      ...d,
      ...options,
      decay: { ...d.decay, ...options.decay },
      prior: { ...d.prior, ...options.prior },
      length: { ...d.length, ...options.length },
    };
  }

  snapshot(): StateSnapshot {
    return this.store.snapshot();
  }

  plan(candidates: readonly Candidate[], budget: Budget, options: PlanOptionsInput = {}): Plan {
    return planStep(this.store.snapshot(), candidates, budget, this.merged(options), this.registries);
  }

  /** Applies results (objects as in the results JSONL, or a parsed batch) in one transaction. */
  observe(results: readonly unknown[] | ResultBatch, options: PlanOptionsInput = {}): ObserveSummary {
    const batch = Array.isArray(results) ? batchOf(results) : (results as ResultBatch);
    return this.store.apply(batch, resolvePlanOptions(this.merged(options)).decay);
  }

  posterior(id: string, candidate: Partial<Candidate> = {}, options: PlanOptionsInput = {}): PosteriorView {
    const resolved = resolvePlanOptions(this.merged(options));
    const snapshot = this.store.snapshot();
    const step = resolved.step ?? (snapshot.lastStep === null ? 0 : snapshot.lastStep + 1);
    const state = snapshot.get(id);
    const c: Candidate = { ...candidate, id, ...(state?.group ? { group: candidate.group ?? state.group } : {}) };
    const { alpha, beta } = posteriors(snapshot, [c], step, resolved);
    const a = alpha[0]!;
    const b = beta[0]!;
    const lo = (1 - resolved.interval) / 2;
    const group = c.group === undefined ? undefined : snapshot.group(c.group);
    return {
      id,
      group: c.group ?? null,
      step,
      alpha: a,
      beta: b,
      p_mean: a / (a + b),
      p_low: betaQuantile(lo, a, b),
      p_high: betaQuantile(1 - lo, a, b),
      rollouts: state?.rollouts ?? 0,
      reward_sum: state?.rewardSum ?? 0,
      last_step: state?.lastStep ?? null,
      expected_tokens: expectedTokens(state, group, snapshot.all, a / (a + b), c.max_tokens, resolved.length).tokens,
      seen: state !== undefined,
    };
  }

  close(): void {
    this.store.close();
  }
}

export function createAllocator(options: AllocatorOptions = {}): Allocator {
  return new Allocator(options);
}
