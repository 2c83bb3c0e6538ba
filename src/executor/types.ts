import type { RolloutBudgetError } from '../errors.js';
import type { Candidate } from '../plan/types.js';
import type { EndpointRests, RetryPolicy } from './dispatcher.js';
import type { PartialRollout, PartialSource } from './partials.js';
import type { ServerProfile } from './profiles.js';
import type { Verifier } from './verify/verifiers.js';

export type Api = 'chat' | 'completions';

/** Where a run's inputs came from, for error messages that name a file and line. */
export interface InputOrigin {
  /** The plan's name (its path, or "stdin"). */
  readonly plan?: string;
  /** The prompts file's name. */
  readonly prompts?: string;
  /** Each prompt's place, `file:line`, by id. */
  readonly promptLines?: ReadonlyMap<string, string>;
}

export interface ExecuteOptions {
  /**
   * Base URLs: http://host:port, with or without /v1 and a trailing slash (normalizeEndpoint);
   * requests go to <base>/v1/completions or /v1/chat/completions.
   */
  readonly endpoints: readonly string[];
  /** How requests are shaped for the server (profiles.ts); default vLLM's. */
  readonly server?: ServerProfile;
  /** The prompts field that holds the text to send (default "prompt"); `messages` is read as is. */
  readonly promptField?: string;
  /** Names for error messages (file:line of a prompt). */
  readonly origin?: InputOrigin;
  readonly model: string;
  /** Undefined: chat for prompts with `messages`, completions for `prompt` strings. */
  readonly api?: Api;
  /** Requests in flight at most, over all endpoints. */
  readonly concurrency: number;
  /** Largest n of one request; a group's rollouts are split over ⌈n / requestN⌉ requests. */
  readonly requestN: number;
  /** r ≥ 0: launch ⌊(1 + r)·n⌋ rollouts per group, keep the first n that finish. */
  readonly overProvision: number;
  /**
   * Tokens the run may generate before it stops (with over-provisioning): default the plan's
   * `budget.tokens`. `loop` passes its step's tokens left, since it plans each round under a
   * lower figure (runLoop).
   */
  readonly tokenBudget?: number;
  /**
   * Per attempt, ms without a byte from the server (before the answer's headers, or between two
   * pieces of its body): the request is then aborted and retried. A streamed answer that keeps
   * coming is never cut, however long the generation.
   */
  readonly timeoutMs: number;
  readonly retry: RetryPolicy;
  readonly verifier: Verifier;
  /** Where unfinished generations are read from (resumed first); written by commitPartials. */
  readonly partials?: PartialSource;
  /**
   * Per prompt, the index of the group's next fresh rollout when earlier rounds of this step
   * launched some (the loop passes every index it has seen); default from the allocation's
   * first_rollout (execute.ts).
   */
  readonly nextRollout?: ReadonlyMap<string, number>;
  readonly temperature?: number;
  /**
   * max_tokens for groups whose plan entry has none (null). Undefined: omit it and take the
   * server's default (16 for /v1/completions in vLLM and OpenAI, so set it).
   */
  readonly defaultMaxTokens?: number;
  /** Fields merged into every request body last (e.g. {"top_p": 0.95, "return_token_ids": false}). */
  readonly extraBody?: Readonly<Record<string, unknown>>;
  /** Sent as `Authorization: Bearer <key>` with every request (vLLM and SGLang `--api-key`). */
  readonly apiKey?: string;
  /**
   * Which endpoints rest after failures, shared by runs over the same endpoints (loop's rounds
   * and steps: dispatcher.ts EndpointRests); default: the run's own, all awake at its start.
   */
  readonly rests?: EndpointRests;
  /**
   * Stops the run when aborted (the CLI aborts it on Ctrl-C): requests in flight are aborted,
   * their rollouts written as "abort" and kept as partials to resume (as over-provisioning's
   * surplus is), none is launched after it, and the finished ones are graded and returned.
   */
  readonly stop?: AbortSignal;
  /** Called as rollouts finish (done, planned). */
  readonly onProgress?: (done: number, planned: number) => void;
  /** Milliseconds clock (injectable). */
  readonly now?: () => number;
}

/** One results-JSONL line, as `observe` takes it. */
export interface ExecutedRollout {
  prompt_id: string;
  step: number;
  rollout_id: string;
  reward: number;
  tokens?: number;
  finish_reason: 'stop' | 'length' | 'abort';
  /** The server's own finish_reason when it was neither "stop" nor "length" (finish.ts). */
  server_finish_reason?: string;
  group?: string;
  /** The prompt's offline hint, when its candidate has one (so observe remembers it). */
  prior_pass_rate?: number;
  prior_samples?: number;
  seed: number;
  latency_ms?: number;
}

export interface ExecuteSummary {
  /** Finished rollouts written with a reward (resumed ones included). */
  rollouts: number;
  planned: number;
  /** Rollouts stopped in flight (finish_reason "abort"), kept for the next step. */
  aborted: number;
  /** Over-provisioned rollouts never launched because their group filled first. */
  not_launched: number;
  /** Rollouts continued from an earlier step's partial (or completed surplus). */
  resumed: number;
  /** Tokens generated in this run (finished and aborted), where the server reported them. */
  tokens: number;
  /** Rollouts whose token count the server did not report. */
  tokens_unknown: number;
  wall_s: number;
  tokens_per_s: number;
  latency_p50_ms: number | null;
  latency_p99_ms: number | null;
  requests: number;
  retries: number;
  mean_reward: number | null;
  /** Requests sent to each endpoint. */
  requests_per_endpoint: number[];
  /**
   * Requests to each endpoint that failed as a server or connection does (refused, reset, 5xx,
   * timeouts), each retried, on another endpoint while this one rests (dispatcher.ts).
   */
  failures_per_endpoint: number[];
  stopped_by_token_budget: boolean;
  /** Server finish reasons other than stop and length, counted (abort, error, repetition, ...). */
  finish_reasons: Record<string, number>;
}

export interface ExecuteReport {
  results: ExecutedRollout[];
  summary: ExecuteSummary;
  /**
   * The partial-rollout changes of this run, for `commitPartials` once the results are safe
   * (written or observed): resumed ids to delete, aborted rollouts to keep.
   */
  partials: { consumed: string[]; keep: PartialRollout[] };
  /**
   * Prompts the server refused as longer than its context with their max_tokens (a 400 saying
   * so), with its message: their rollouts are written aborted, `server_finish_reason`
   * "context_length". Empty when none.
   */
  too_long?: { prompt_id: string; message: string }[];
}

const REPORT = Symbol('rollout-budget execute report');

/**
 * The report of the run that `error` ended (a server that stayed down past the retries, a
 * request refused), as executePlan rejects with it: what finished, and what was in flight as
 * aborted partials, as after Ctrl-C, for the caller to write or observe before it raises the
 * error (before, the whole step was lost, finished rollouts included). Undefined for another error.
 */
export function reportOfFailure(error: unknown): ExecuteReport | undefined {
  return error instanceof Error ? (error as unknown as { [REPORT]?: ExecuteReport })[REPORT] : undefined;
}

/**
 * A run's report, and the error that ended it early when it did: what executePlan resolves to,
 * or what its rejection carries (reportOfFailure). Any other rejection is thrown as it is.
 */
export async function settled(run: Promise<ExecuteReport>): Promise<{ report: ExecuteReport; failure?: RolloutBudgetError }> {
  try {
    return { report: await run };
  } catch (error) {
    const report = reportOfFailure(error);
    if (report === undefined) throw error;
    return { report, failure: error as RolloutBudgetError };
  }
}

/** Attaches a failed run's report to the error it is rejected with (reportOfFailure). */
export function withReport(error: RolloutBudgetError, report: ExecuteReport): RolloutBudgetError {
  (error as unknown as { [REPORT]?: ExecuteReport })[REPORT] = report;
  return error;
}

export type PromptLine = Candidate;
