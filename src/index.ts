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
export type { CurveMode, ValueCurves } from './value/types.js';
export { conditionalValue, partialGroupOf, partialKey } from './value/conditional.js';
export type { PartialGroup } from './value/conditional.js';
export { PartitionedCurves } from './value/partitioned.js';
export { greedySolve } from './solver/greedy.js';
export { exactDp, milpSolve, solvedOrThrow } from './solver/reference.js';
export { createSolverRegistry } from './solver/registry.js';
export { fixedTokensOf } from './solver/types.js';
export type { Solver, SolverInput, SolverResult } from './solver/types.js';
export { createPolicyRegistry, thompsonDraws } from './plan/policies.js';
export type { Policy, PolicyInput, PolicyOutput } from './plan/policies.js';
export { defaultPlanOptions, resolvePlanOptions, validateBudget } from './plan/options.js';
export type { PlanOptionsInput } from './plan/options.js';
export { planStep, posteriors } from './plan/planner.js';
export type { Registries } from './plan/planner.js';
export type { Allocation, Budget, Candidate, Plan, PlanColumns, PlanOptions } from './plan/types.js';
export { batchOf, digestOf, parsePrompts, parseResults } from './io/formats.js';
export type { ResultBatch, RolloutResult } from './io/formats.js';
export { parseJsonl, readText } from './io/jsonl.js';
export { SqliteStore } from './store/sqlite.js';
export { LoggedRun, drawOutcomes, parseVisits } from './replay/visits.js';
export type { Visit } from './replay/visits.js';
export { runCli } from './cli/main.js';
export type { CliIo } from './cli/io.js';
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

// issue 4: generation executor, verifiers, sim-server (test double), plan exports
export { formatPlan, groupId, groupSeed, planGroups, planJsonl, PLAN_FORMATS, sglangRequest, vllmBatch } from './plan/exports.js';
export type { ExportOptions, PlanFormat, PlanGroup } from './plan/exports.js';
export { commitPartials, executePlan } from './executor/execute.js';
export { runLoop } from './executor/loop.js';
export type { LoopStep } from './executor/loop.js';
export { PartialStore } from './executor/partials.js';
export type { PartialRollout } from './executor/partials.js';
export { parsePlan } from './executor/planfile.js';
export { Dispatcher, backoff, defaultRetry } from './executor/dispatcher.js';
export type { RetryPolicy } from './executor/dispatcher.js';
export { RequestError, streamRequest } from './executor/client.js';
export { quantile, summaryLine } from './executor/summary.js';
export type { Api, ExecuteOptions, ExecuteReport, ExecuteSummary, ExecutedRollout } from './executor/types.js';
export { answersMatch, lastBoxed, mathReward, normalizeAnswer, numericValue } from './executor/verify/math.js';
export { commandVerifier, createVerifierRegistry, mathVerifier, verifierFrom } from './executor/verify/verifiers.js';
export type { Verifier, VerifierFactory, VerifyItem } from './executor/verify/verifiers.js';
export { SimServer, noFaults } from './simserver/server.js';
export type { SimFaults, SimServerOptions, SimStats } from './simserver/server.js';
export { SHORT_COT, SimModel, countSimTokens, defaultSimModel, tokenId, wrongAnswer } from './simserver/model.js';
export type { LengthModel, SimModelOptions, SimPrompt, SimResponse } from './simserver/model.js';
export { parseSimPrompts } from './simserver/prompts.js';

// issue 3: replay, simulation, baselines, metrics, report
export { loadLog, detectFormat, logFiles, logFormats } from './replay/log.js';
export type { LoadOptions, LogFormat } from './replay/log.js';
export { replayEnvironment, visitDrawer } from './replay/env.js';
export { epochsOf, replayStreams, runPolicies } from './replay/engine.js';
export type { EngineOptions, PolicyResult, ReplayStream } from './replay/engine.js';
export { MetricsRecorder, hasVariance, ranks, spearman } from './replay/metrics.js';
export type { CalibrationBin, StepMetrics, Totals } from './replay/metrics.js';
export { baselineNames, createReplayPolicyRegistry, defaultPolicyList } from './replay/policies.js';
export { MemoryState, oraclePolicy, ourPolicy, planWithState } from './replay/ours.js';
// the baselines' allocation rules, each as published (src/replay/baselines/)
export { fixedN, uniformPolicy } from './replay/baselines/uniform.js';
export { dapoKeeps, dapoMaxGenBatches, dapoPolicy } from './replay/baselines/dapo.js';
export { gresoAdapt, gresoDefaults, gresoPolicy, gresoSkipProbability, gresoSkips, gresoUpdate } from './replay/baselines/greso.js';
export type { GresoP } from './replay/baselines/greso.js';
export { KnapsackRlRaise, knapsackRlAllocate } from './replay/baselines/knapsack-rl-allocate.js';
export type { KnapsackRlOptions, KnapsackRlState } from './replay/baselines/knapsack-rl-allocate.js';
export { knapsackRlPolicy, knapsackRlState } from './replay/baselines/knapsack-rl.js';
export { moppsDefaults, moppsPolicy, moppsUpdate } from './replay/baselines/mopps.js';
export type { MoppsPosterior } from './replay/baselines/mopps.js';
export { xrpoDefaults, xrpoHalfWidth, xrpoPolicy, xrpoPriority } from './replay/baselines/xrpo.js';
export { tQuantile } from './math/student.js';
export { EASY_MEAN, HARD_MEAN, History } from './replay/history.js';
export type { PromptHistory } from './replay/history.js';
export type {
  Decision, Environment, GroupDrawer, GroupOutcome, PolicyConfig, PolicyRun, ReplayPolicy, StepContext, World,
} from './replay/types.js';
export { defaultScenario, parseScenario } from './simulate/scenario.js';
export type { Scenario } from './simulate/scenario.js';
export { simulatedEnvironment } from './simulate/world.js';
export { calibrationChart, effectiveChart, histogramChart, reportHtml } from './report/html.js';
export { balancedValue } from './value/functions.js';
export { summaryMarkdown, summaryRows, summaryText } from './report/summary.js';
export { metricsJson, writeReport } from './report/write.js';
export type { ReportInput } from './report/write.js';
