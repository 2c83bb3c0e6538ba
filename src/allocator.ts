import { batchOf, type ResultBatch } from './io/formats.js';
import { createPosteriorPolicyRegistry } from './plan/policies.js';
import { mergePlanOptions, resolvePlanOptions, type PlanOptionsInput } from './plan/options.js';
import { planStep, type Registries } from './plan/planner.js';
import { posteriorView, type PosteriorView } from './plan/posterior-view.js';
import type { Budget, Candidate, Plan } from './plan/types.js';
import type { StateSnapshot } from './posterior/state.js';
import { createSolverRegistry } from './solver/registry.js';
import { metaChanges, snapshotWithMeta } from './store/meta.js';
import { SqliteStore } from './store/sqlite.js';
import type { ObserveSummary, Store } from './store/types.js';
import { createValueRegistry } from './value/functions.js';

export function createRegistries(): Registries {
  return { values: createValueRegistry(), policies: createPosteriorPolicyRegistry(), solvers: createSolverRegistry() };
}

export type { PosteriorView } from './plan/posterior-view.js';

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
    return mergePlanOptions(this.defaults, options);
  }

  snapshot(): StateSnapshot {
    return this.store.snapshot();
  }

  /**
   * Plans from the state, then records the candidates' group and hint that the state does not
   * hold yet (store/meta.ts: evidence untouched, idempotent, nothing when planning fails). The
   * plan is the one planStep gives on the state after that record.
   */
  plan(candidates: readonly Candidate[], budget: Budget, options: PlanOptionsInput = {}): Plan {
    const snapshot = this.store.snapshot();
    const changes = metaChanges(snapshot, candidates);
    const plan = planStep(snapshotWithMeta(snapshot, changes), candidates, budget, this.merged(options), this.registries);
    this.store.recordPrompts(changes);
    return plan;
  }

  /** Applies results (objects as in the results JSONL, or a parsed batch) in one transaction. */
  observe(results: readonly unknown[] | ResultBatch, options: PlanOptionsInput = {}): ObserveSummary {
    const batch = Array.isArray(results) ? batchOf(results) : (results as ResultBatch);
    return this.store.apply(batch, resolvePlanOptions(this.merged(options)).decay);
  }

  posterior(id: string, candidate: Partial<Candidate> = {}, options: PlanOptionsInput = {}): PosteriorView {
    return posteriorView(this.store.snapshot(), id, candidate, resolvePlanOptions(this.merged(options)));
  }

  close(): void {
    this.store.close();
  }
}

export function createAllocator(options: AllocatorOptions = {}): Allocator {
  return new Allocator(options);
}
