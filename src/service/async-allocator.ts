import { candidateRead, createRegistries } from '../allocator.js';
import { batchOf, checkCandidate, checkCandidates, checkedBatch, type ResultBatch } from '../io/formats.js';
import { checkOptionKeys, mergePlanOptions, resolvePlanOptions, type PlanOptionsInput } from '../plan/options.js';
import { checkPlanCall, planStep, type Registries } from '../plan/planner.js';
import { posteriorView, type PosteriorView } from '../plan/posterior-view.js';
import type { Budget, Candidate, Plan } from '../plan/types.js';
import type { AsyncStore } from '../store/async.js';
import { metaChanges, snapshotWithMeta } from '../store/meta.js';
import type { ObserveSummary } from '../store/types.js';

/**
 * The Allocator on an async store (SQLite or PostgreSQL): the same plan / observe / posterior,
 * with the store's I/O awaited and the planning itself the pure `planStep`. A plan reads only
 * its candidates' prompts and the pooled figures (store/pooled.ts), so its cost follows the
 * request, not the number of prompts the state tracks.
 */
export class AsyncAllocator {
  readonly registries: Registries;

  constructor(
    readonly store: AsyncStore,
    private readonly defaults: PlanOptionsInput = {},
    registries?: Registries,
  ) {
    this.registries = registries ?? createRegistries();
    checkOptionKeys(defaults, 'defaults');
    resolvePlanOptions(defaults);
  }

  /** As Allocator.plan, `deliver` included: run before the record, which it stops by throwing. */
  async plan(given: readonly Candidate[], budget: Budget, options: PlanOptionsInput = {}, deliver?: (plan: Plan) => void): Promise<Plan> {
    const merged = mergePlanOptions(this.defaults, options);
    checkPlanCall(budget, merged, this.registries); // bad options, budget or names before touching the store
    const candidates = checkCandidates(given); // a request's were checked as it was read (service/requests.ts)
    // As Allocator.plan: plan on the state as it reads once the candidates' metadata is recorded, then record it.
    const snapshot = await this.store.snapshot(...candidateRead(candidates));
    const changes = metaChanges(snapshot, candidates);
    const plan = planStep(snapshotWithMeta(snapshot, changes), candidates, budget, merged, this.registries);
    deliver?.(plan);
    await this.store.recordPrompts(changes);
    return plan;
  }

  async observe(results: readonly unknown[] | ResultBatch, options: PlanOptionsInput = {}): Promise<ObserveSummary> {
    const batch = Array.isArray(results) ? batchOf(results) : checkedBatch(results);
    return this.store.apply(batch, resolvePlanOptions(mergePlanOptions(this.defaults, options)).decay);
  }

  async posterior(id: string, candidate: Partial<Candidate> = {}, options: PlanOptionsInput = {}): Promise<PosteriorView> {
    checkCandidate('posterior', { ...candidate, id }); // as Allocator.posterior
    const resolved = resolvePlanOptions(mergePlanOptions(this.defaults, options));
    return posteriorView(await this.store.snapshot([id], candidate.group === undefined ? [] : [candidate.group]), id, candidate, resolved);
  }

  close(): Promise<void> {
    return this.store.close();
  }
}
