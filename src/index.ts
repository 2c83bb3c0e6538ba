// The public entry of rollout-budget: named exports only; tests import through here.
export { Allocator, createAllocator, createRegistries } from './allocator.js';
export type { AllocatorOptions, PosteriorView } from './allocator.js';
export { RolloutBudgetError, quote } from './errors.js';
export type { ErrorCode } from './errors.js';
export { createRegistry } from './registry.js';
export type { Registry } from './registry.js';
export { betaDraw, betaMoment, betaQuantile, betaQuantileFast, gammaDraw, lgamma, logBeta } from './math/beta.js';
export type { Random } from './math/beta.js';
export { fnv1a } from './math/hash.js';
export { addEvidence, defaultDecay, forgetFactor } from './posterior/decay.js';
export type { DecayOptions } from './posterior/decay.js';
export { defaultPriorOptions, fitPrior, flatPrior, priorFor } from './posterior/prior.js';
export type { Prior, PriorOptions } from './posterior/prior.js';
export { defaultLengthOptions, expectedTokens } from './posterior/length.js';
export type { LengthEstimate, LengthOptions } from './posterior/length.js';
export { addToGroupStats, emptyGroupStats, snapshotOf } from './posterior/state.js';
export type { GroupStats, PromptState, StateSnapshot } from './posterior/state.js';
export {
  createValueRegistry, hitValue, informativeValue, knapsackValue, valueAt, varianceValue,
} from './value/functions.js';
export type { Monomial, ValueFunction } from './value/functions.js';
export { MonomialCurves } from './value/curves.js';
export type { CurveMode, ValueCurves } from './value/curves.js';
export { greedySolve } from './solver/greedy.js';
export { exactDp, milpSolve } from './solver/reference.js';
export { createSolverRegistry } from './solver/registry.js';
export type { Solver, SolverInput, SolverResult } from './solver/types.js';
export { createPolicyRegistry, thompsonDraws } from './plan/policies.js';
export type { Policy, PolicyInput, PolicyOutput } from './plan/policies.js';
export { defaultPlanOptions, resolvePlanOptions, validateBudget } from './plan/options.js';
export type { PlanOptionsInput } from './plan/options.js';
export { planStep, posteriors } from './plan/planner.js';
export type { Registries } from './plan/planner.js';
export type { Allocation, Budget, Candidate, Plan, PlanOptions } from './plan/types.js';
export { batchOf, digestOf, parsePrompts, parseResults } from './io/formats.js';
export type { ResultBatch, RolloutResult } from './io/formats.js';
export { parseJsonl, readText } from './io/jsonl.js';
export { SqliteStore } from './store/sqlite.js';
export type { ObserveSummary, Store } from './store/types.js';

// issue 5: service, async stores, PostgreSQL
export { asyncStoreOf } from './store/async.js';
export type { AsyncStore } from './store/async.js';
export { PostgresStore, redactUrl } from './store/postgres.js';
export { createStoreRegistry, openAsyncStore, storeKindOf } from './store/open.js';
export type { StoreOpener } from './store/open.js';
export { mergePlanOptions } from './plan/options.js';
export { posteriorView } from './plan/posterior-view.js';
export { AsyncAllocator } from './service/async-allocator.js';
export { Service, statusOf } from './service/router.js';
export type { ServiceRequest, ServiceResponse } from './service/router.js';
export { startHttpService } from './service/http.js';
export type { HttpOptions, HttpService } from './service/http.js';
export { serveStdio } from './service/stdio.js';
export { ServiceMetrics, PLAN_SECONDS_BUCKETS } from './service/metrics.js';
export { checkNames, errorBody, observeRequestOf, planRequestOf, promptQueryOf } from './service/requests.js';
export type { ObserveRequest, PlanRequest } from './service/requests.js';
