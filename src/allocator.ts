import { RolloutBudgetError } from './errors.js';
import { batchOf, checkCandidate, checkCandidates, checkedBatch, type ResultBatch } from './io/formats.js';
import { createPosteriorPolicyRegistry } from './plan/policies.js';
import { checkKnownKeys, checkOptionKeys, mergePlanOptions, resolvePlanOptions, type PlanOptionsInput } from './plan/options.js';
import { checkPlanCall, planStep, type Registries } from './plan/planner.js';
import { posteriorView, type PosteriorView } from './plan/posterior-view.js';
import type { Budget, Candidate, Plan } from './plan/types.js';
import type { StateSnapshot } from './posterior/state.js';
import { createSolverRegistry } from './solver/registry.js';
import { metaChanges, snapshotWithMeta } from './store/meta.js';
import { SqliteStore } from './store/sqlite.js';
import type { ObserveSummary, Store } from './store/types.js';
import { createValueRegistry } from './value/functions.js';

/**
 * A plan reads only its candidates' rows and the pooled rows (store/pooled.ts), as the service
 * does, from a state of at least this many prompts (Store.promptsAtMost) ...
 */
export const PARTIAL_READ_PROMPTS = 1 << 16;
/** ... when its candidates are at most this share of them; else it reads the whole state. */
export const PARTIAL_READ_SHARE = 1 / 8;

/**
 * What a plan of only its candidates reads of the state: Store.snapshot's `ids` (theirs),
 * `groups` (theirs) and `hinted` (whether one carries a hint).
 */
export function candidateRead(candidates: readonly Candidate[]): [ids: string[], groups: string[], hinted: boolean] {
  const groups = new Set<string>();
  for (const c of candidates) if (c.group !== undefined) groups.add(c.group);
  return [candidates.map((c) => c.id), [...groups], candidates.some((c) => c.prior_pass_rate !== undefined)];
}

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

const ALLOCATOR_KEYS = ['state', 'store', 'defaults', 'registries'];

/**
 * The library entry: an allocator on a store. plan() reads, observe() writes, posterior()
 * reads; all three validate like the CLI: candidates as a prompts file's lines
 * (io/formats.ts checkCandidates), results as a results file's, a batch built by hand included.
 */
export class Allocator {
  readonly store: Store;
  readonly registries: Registries;
  private readonly defaults: PlanOptionsInput;
  private closed = false;

  constructor(options: AllocatorOptions = {}) {
    // `{ stat: 'run.db' }` planned on a state in memory that no later run could read.
    checkKnownKeys(options, ALLOCATOR_KEYS, 'allocator options');
    if (options.defaults !== undefined) checkOptionKeys(options.defaults, 'defaults');
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
   * plan is the one planStep gives on the state after that record. `deliver`, when given, gets
   * the plan before the record (the CLI writes its file there): if it throws, nothing is recorded.
   */
  plan(given: readonly Candidate[], budget: Budget, options: PlanOptionsInput = {}, deliver?: (plan: Plan) => void): Plan {
    this.requireOpen();
    // Options, budget and names first: a bad one is answered before a state of 10⁶ rows is read.
    checkPlanCall(budget, this.merged(options), this.registries);
    const candidates = checkCandidates(given);
    const snapshot = this.readsAll(candidates.length) ? this.store.snapshot() : this.store.snapshot(...candidateRead(candidates));
    const changes = metaChanges(snapshot, candidates);
    // A record that cannot be written fails before the plan is delivered, as it did when the plan came after it.
    if (changes.length > 0) this.store.requireWritable?.();
    const plan = planStep(snapshotWithMeta(snapshot, changes), candidates, budget, this.merged(options), this.registries);
    deliver?.(plan);
    this.store.recordPrompts(changes);
    return plan;
  }

  /**
   * Whether a plan of `count` candidates reads the whole state: unless the state holds at
   * least PARTIAL_READ_PROMPTS prompts and the candidates are at most PARTIAL_READ_SHARE of
   * them. A whole read sums the pooled figures over every prompt, as every release has; a read
   * of the candidates' rows takes them from the pooled rows, kept as observes add to them, so
   * its numbers are the service's and may differ from a whole read's in the last digits.
   */
  readsAll(count: number): boolean {
    const most = this.store.promptsAtMost?.();
    return most === undefined || most < PARTIAL_READ_PROMPTS || count > most * PARTIAL_READ_SHARE;
  }

  /** Applies results (objects as in the results JSONL, or a parsed batch) in one transaction. */
  observe(results: readonly unknown[] | ResultBatch, options: PlanOptionsInput = {}): ObserveSummary {
    this.requireOpen();
    const batch = Array.isArray(results) ? batchOf(results) : checkedBatch(results);
    return this.store.apply(batch, resolvePlanOptions(this.merged(options)).decay);
  }

  /**
   * One prompt's posterior as the next plan would see it. Reads its row and the pooled rows, as
   * the service's GET /v1/prompts/{id} does (it read every row: 42 ms a call on 50,000 prompts),
   * so its fractional figures may differ from a whole read's in their last digits.
   */
  posterior(id: string, candidate: Partial<Candidate> = {}, options: PlanOptionsInput = {}): PosteriorView {
    this.requireOpen();
    // Checked as a plan's candidate is: an id of 5 or "", a max_tokens of -1 (expected_tokens -1), a group of 5 were answered.
    checkCandidate('posterior', { ...candidate, id });
    const resolved = resolvePlanOptions(this.merged(options));
    return posteriorView(this.store.snapshot([id], candidate.group === undefined ? [] : [candidate.group]), id, candidate, resolved);
  }

  /** Closes the store; a later plan, observe or posterior throws STATE_ERROR saying so. Closing twice does nothing. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.store.close();
  }

  private requireOpen(): void {
    if (this.closed) throw new RolloutBudgetError('STATE_ERROR', 'this allocator was closed (allocator.close()): create another to plan, observe or read posteriors again');
  }
}

export function createAllocator(options: AllocatorOptions = {}): Allocator {
  return new Allocator(options);
}
