// The public entry of rollout-budget: named exports only, grouped by concept; tests import through here.

// Errors and registries: one error family with stable codes; a typed registry per extension point.
export { RolloutBudgetError, quote, withFieldNames } from './errors.js';
export type { ErrorCode } from './errors.js';
export { createRegistry } from './registry.js';
export type { Registry } from './registry.js';

// Math: Beta moments, quantiles and draws; Student's t quantile; hashing for seeds and tie-breaks.
export { betaDraw, betaMoment, betaQuantile, betaQuantileFast, gammaDraw, lgamma, logBeta } from './math/beta.js';
export type { Random } from './math/beta.js';
export { fnv1a } from './math/hash.js';
export { arc4Random } from './math/arc4.js';
export { tQuantile } from './math/student.js';

// Posterior: prompt state, decay, learned prior, expected response length.
export { addToGroupStats, emptyGroupStats, snapshotOf } from './posterior/state.js';
export type { GroupStats, PromptState, StateSnapshot } from './posterior/state.js';
export { addEvidence, behindWarning, decayedTerm, defaultDecay, EVIDENCE_FLOOR, forgetFactor } from './posterior/decay.js';
export type { DecayOptions } from './posterior/decay.js';
export { defaultPriorOptions, fitPrior, flatPrior, priorFor } from './posterior/prior.js';
export type { Prior, PriorOptions } from './posterior/prior.js';
export { defaultHintPool, fitHintPool, fitHints, hintLogit } from './posterior/hint-fit.js';
export type { HintFit, HintPool } from './posterior/hint-fit.js';
export { calibrationSummary, hintPriors, trustOf } from './posterior/hints.js';
export type { CalibrationSummary, HintCalibration, HintPriors } from './posterior/hints.js';
export { defaultLengthOptions, expectedTokens } from './posterior/length.js';
export type { LengthEstimate, LengthOptions } from './posterior/length.js';

// Value of n rollouts: value functions as monomials, their curves, conditional values for partial groups.
export {
  balancedSingleRoundValue, balancedValue, createValueRegistry, hitValue, informativeValue, knapsackValue, valueAt, varianceValue,
} from './value/functions.js';
export type { Monomial, ValueFunction } from './value/functions.js';
export { MonomialCurves } from './value/curves.js';
export type { CurveMode, ValueCurves } from './value/types.js';
export { conditionalValue, partialGroupOf, partialKey } from './value/conditional.js';
export type { PartialGroup } from './value/conditional.js';
export { PartitionedCurves } from './value/partitioned.js';

// Solvers: the greedy the planner uses, exact references, the registry.
export { greedySolve } from './solver/greedy.js';
export { exactDp, milpSolve, solvedOrThrow } from './solver/reference.js';
export { createSolverRegistry } from './solver/registry.js';
export { fixedTokensOf } from './solver/types.js';
export type { Solver, SolverInput, SolverResult } from './solver/types.js';

// Planning: options, posterior policies, the planner, the round rule and the round loop.
export { defaultPlanOptions, defaultRounds, mergePlanOptions, resolvePlanOptions, validateBudget } from './plan/options.js';
export type { PlanOptionsInput } from './plan/options.js';
export { createPolicyRegistry, createPosteriorPolicyRegistry, thompsonDraws } from './plan/policies.js';
export type {
  Policy, PolicyInput, PolicyOutput, PosteriorPolicy, PosteriorPolicyInput, PosteriorPolicyOutput,
} from './plan/policies.js';
export { planStep } from './plan/planner.js';
export { posteriors } from './plan/posteriors.js';
export { MAX_N_LIMIT, planLimits } from './plan/limits.js';
export type { PlanLimits } from './plan/limits.js';
export type { Registries } from './plan/planner.js';
export { freshUpperBounds } from './plan/fresh-cap.js';
export { grownShareWarning, roundShare } from './plan/rounds.js';
export type { RoundNeeds, RoundShare } from './plan/rounds.js';
export { runStepRounds, runStepRoundsAsync, stepRounds } from './plan/round-loop.js';
export type { AsyncStepRoundsInput, RoundAnswer, RoundOutcome, RoundRequest, RoundRollout, StepRounds, StepRoundsInput } from './plan/round-loop.js';
export { withPartials } from './plan/partial.js';
export { posteriorView } from './plan/posterior-view.js';
export type { Allocation, Budget, Candidate, Plan, PlanColumns, PlanOptions } from './plan/types.js';
export { planJsonChunks, planJsonCompact } from './plan/serialize.js';
export {
  DEFAULT_MAX_TOKENS, defaultLimitWarning, formatPlan, groupId, groupSeed, groupsWithoutLimit, payloadOf, planGroups, planJsonl, PLAN_FORMATS, sglangRequest, vllmBatch,
} from './plan/exports.js';
export type { ExportOptions, PlanFormat, PlanGroup, PromptPayload } from './plan/exports.js';

// The allocator: the library entry on a store.
export { Allocator, createAllocator, createRegistries, PARTIAL_READ_PROMPTS, PARTIAL_READ_SHARE } from './allocator.js';
export type { AllocatorOptions, PosteriorView } from './allocator.js';

// File formats and stores.
export { batchOf, digestOf, parsePrompts, parsePromptsAt, parsePromptsFile, parseResults } from './io/formats.js';
export { autoKey, batchKey, sourceOfBatch } from './io/results.js';
export { fileResultSource } from './io/result-file.js';
export type { ResultChunk, ResultSource, ResultTaker } from './io/results.js';
export { CHUNK_BYTES, fileDigest, lineChunks } from './io/chunks.js';
export type { ParsedPrompts, ResultBatch, RolloutResult } from './io/formats.js';
export { MAX_JSON_DEPTH, nestedDeeperThan, parseJson, parseJsonl, readText } from './io/jsonl.js';
export { field, MAX_STORED_TEXT, storedTextProblem } from './fields.js';
export { decodeUtf8, invalidUtf8At } from './io/utf8.js';
export { SqliteStore } from './store/sqlite.js';
export type { SqliteStoreOptions } from './store/sqlite.js';
export { DEFAULT_LOCK_WAIT_MS, LOCK_WAIT_ENV, isBusy, lockWaitMs } from './store/busy.js';
export type { ObserveSummary, Store } from './store/types.js';
export { asyncStoreOf } from './store/async.js';
export type { AsyncStore } from './store/async.js';
export { PostgresStore, redactUrl } from './store/postgres.js';
export { createStoreRegistry, openAsyncStore, storeKindOf } from './store/open.js';
export { hintOf, mergeMeta, promptMetaFields, metaChanges, metaDiffers, metaOf, NO_STEP, snapshotWithMeta, withMeta } from './store/meta.js';
export type { PromptMeta } from './store/meta.js';
export type { StoreOpener } from './store/open.js';

// Service: HTTP and stdio on an async allocator.
export { AsyncAllocator } from './service/async-allocator.js';
export { Service, statusOf, targetOf } from './service/router.js';
export type { ServiceRequest, ServiceResponse } from './service/router.js';
export { startHttpService } from './service/http.js';
export type { HttpOptions, HttpService } from './service/http.js';
export { serveStdio } from './service/stdio.js';
export { PlanWorkers } from './service/plan-worker.js';
export type { PlanWorkersOptions } from './service/plan-worker.js';
export type { PlanRunner } from './service/plan-runner.js';
export { RequestGuard, isLoopback } from './service/guard.js';
export type { GuardOptions, Refusal } from './service/guard.js';
export { ServiceMetrics, PLAN_SECONDS_BUCKETS } from './service/metrics.js';
export { checkNames, errorBody, observeRequestOf, planRequestOf, promptQueryOf } from './service/requests.js';
export type { ObserveRequest, PlanRequest } from './service/requests.js';

// Executor: runs plans on OpenAI-compatible servers, grades, loops plan → execute → observe.
export { commitPartials, executePlan } from './executor/execute.js';
export { reportOfFailure } from './executor/types.js';
export { runLoop } from './executor/loop.js';
export type { LoopStep, PlanExecutor } from './executor/loop.js';
export { PartialStore, StepPartials } from './executor/partials.js';
export type { PartialRollout, PartialSource } from './executor/partials.js';
export { parsePlan } from './executor/planfile.js';
export { gradeBatchOutput, gradeSummaryLine } from './executor/grade.js';
export type { GradeOptions, GradeReport, GradeSummary } from './executor/grade.js';
export { Dispatcher, EndpointRests, backoff, defaultRetry } from './executor/dispatcher.js';
export type { RetryPolicy } from './executor/dispatcher.js';
export { RequestError, streamRequest, tokensOf } from './executor/client.js';
export { endpointUrl, normalizeEndpoint } from './executor/endpoint.js';
export { describeFinishCounts, finishOutcome, isPlainFinish } from './executor/finish.js';
export type { FinishOutcome } from './executor/finish.js';
export { DETECT_GRACE_MS, SERVER_PROFILES, StoppedDetection, choicesPerRequest, createServerRegistry, detectServer, resolveServer } from './executor/profiles.js';
export type { Detection, ServerProfile } from './executor/profiles.js';
export { quantile, summaryLine } from './executor/summary.js';
export type { Api, ExecuteOptions, ExecuteReport, ExecuteSummary, ExecutedRollout, InputOrigin } from './executor/types.js';
export { answersMatch, lastBoxed, mathReward, numericValue } from './executor/verify/math.js';
export { MAX_ANSWER_CHARS, normalize, normalizeAnswer } from './executor/verify/normalize.js';
export type { Normalized } from './executor/verify/normalize.js';
export { evaluate, expressionsEqual, parseExpression } from './executor/verify/expr.js';
export type { Expr } from './executor/verify/expr.js';
export { shapeOf, shapesEqual } from './executor/verify/structure.js';
export type { Shape } from './executor/verify/structure.js';
export { commandVerifier, createVerifierRegistry, mathVerifier, verifierFrom } from './executor/verify/verifiers.js';
export type { Verifier, VerifierFactory, VerifierOptions, VerifyItem } from './executor/verify/verifiers.js';
export { DEFAULT_VERIFIER_TIMEOUT_S } from './executor/verify/command.js';

// sim-server: a test double of an OpenAI-compatible inference server, for dry runs.
export { SIM_PROFILES, SimServer, noFaults } from './simserver/server.js';
export type { SimFaults, SimFinishFault, SimProfile, SimServerOptions, SimStats } from './simserver/server.js';
export { ENGINE_ERROR_CHUNK, SIM_REASONING_FIELDS, plainSse, sseEvent } from './simserver/stream.js';
export type { SimReasoningField, SimSse } from './simserver/stream.js';
export { answerGenerate } from './simserver/sglang.js';
export { SHORT_COT, SIM_ANSWER_TOKENS, SimModel, countSimTokens, defaultSimModel, tokenId, wrongAnswer } from './simserver/model.js';
export type { LengthModel, SimModelOptions, SimPrompt, SimResponse } from './simserver/model.js';
export { parseSimPrompts } from './simserver/prompts.js';

// Replay and simulation: allocation strategies (the baselines and ours) scored on a logged run or a simulated pool.
export { LoggedRun, drawOutcomes, parseVisits } from './replay/visits.js';
export type { ReplayRun, Visit } from './replay/visits.js';
export { loadLog, readLog, detectFormat, logFiles, logFormats } from './replay/log.js';
export type { LoadOptions, LogFormat } from './replay/log.js';
export { replayEnvironment, visitDrawer } from './replay/env.js';
export { epochsOf, replayStreams, runPolicies } from './replay/engine.js';
export type { EngineOptions, PolicyResult, ReplayStream } from './replay/engine.js';
export { MetricsRecorder, hasVariance, ranks, spearman } from './replay/metrics.js';
export type { CalibrationBin, StepMetrics, Totals } from './replay/metrics.js';
export { SpendRecorder } from './replay/spend.js';
export type { SpendBins } from './replay/spend.js';
export { baselineNames, createReplayPolicyRegistry, defaultPolicyList } from './replay/policies.js';
export { MemoryState, oraclePolicy, ourPolicy, planWithState } from './replay/ours.js';
export type { OurDecision, ReplayPlanOptions } from './replay/ours.js';
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
export { EASY_MEAN, HARD_MEAN, History } from './replay/history.js';
export type { PromptHistory } from './replay/history.js';
export type {
  Decision, Environment, GroupDrawer, GroupOutcome, PolicyConfig, PolicyRun, ReplayPolicy, StepContext, World,
} from './replay/types.js';
export { defaultScenario, parseScenario } from './simulate/scenario.js';
export type { HintModel, Scenario, ScenarioGroup } from './simulate/scenario.js';
export { simulatedEnvironment } from './simulate/world.js';

// Reports.
export { reportHtml } from './report/html.js';
export type { ReportMeta } from './report/html.js';
export { budgetChart, effectiveChart } from './report/charts-steps.js';
export { costChart, cumulativeChart } from './report/charts-run.js';
export { histogramChart, spendChart } from './report/charts-alloc.js';
export { calibrationChart } from './report/charts-calibration.js';
export { seedsChart } from './report/charts-seeds.js';
export { headline, ratioSummaries } from './report/headline.js';
export { median, movingEffective, reportView } from './report/series.js';
export type { ReportView, SeedRun } from './report/series.js';
export { niceTicks } from './report/svg.js';
export { summaryMarkdown, summaryRows, summaryText } from './report/summary.js';
export { metricsJson, summaryDocument, writeReport } from './report/write.js';
export type { ReportInput } from './report/write.js';

// The command line (a thin layer over the above), and the version.
export { runCli } from './cli/main.js';
export { VERSION } from './version.js';
export type { CliIo } from './cli/io.js';
