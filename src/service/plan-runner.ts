import type { PlanOptionsInput } from '../plan/options.js';
import type { FileIdentity } from '../store/file-identity.js';

/**
 * Where the service's plans run. The service validates a plan request first (a bad one is a
 * 400 without reaching the runner), then hands the runner the request body.
 */
export interface PlanRunner {
  /**
   * The plan for a validated `POST /v1/plan` body, as JSON text. Rejects with a
   * RolloutBudgetError (BUDGET_INFEASIBLE, STATE_ERROR, PLAN_TIMEOUT, ...) or an Error; with
   * INTERRUPTED when `signal` (the client went away) aborts before the plan started. A deadline
   * counts from `arrivedMs` (performance.now() when the request arrived), else from the call.
   */
  plan(body: string, signal?: AbortSignal, arrivedMs?: number): Promise<string>;
  /** Lets the running plans finish, then stops the runner and closes its store. */
  close(): Promise<void>;
}

/** What a planning thread needs to plan as the service would: its own store and the defaults. */
export interface PlanThreadInit {
  /** The `--state` location; the thread opens its own connection to it. */
  readonly state: string;
  /** The service's default plan options (e.g. `--decay`). */
  readonly defaults: PlanOptionsInput;
  /**
   * The SQLite file the service opened: a thread opens its connection only while that file is
   * still at the path (one removed or replaced since would be a new, empty state).
   */
  readonly file?: FileIdentity;
}

/** Service → planning thread. */
export type PlanThreadRequest = { readonly kind: 'plan'; readonly id: number; readonly body: string } | { readonly kind: 'close' };

/** Planning thread → service: the plan's JSON text, a caller mistake, an internal error, or closed. */
export type PlanThreadReply =
  | { readonly kind: 'plan'; readonly id: number; readonly text: string }
  | { readonly kind: 'error'; readonly id: number; readonly code: string; readonly message: string; readonly exitCode: number; readonly fields: readonly string[]; readonly retryable: boolean }
  | { readonly kind: 'internal'; readonly id: number; readonly message: string; readonly stack: string }
  | { readonly kind: 'closed' };
