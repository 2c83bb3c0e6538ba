import { RolloutBudgetError } from '../errors.js';
import { fnv1a } from '../math/hash.js';

/**
 * Waiting for a SQLite state that another process is writing. SQLite lets one writer at a time
 * hold the file's write lock; a second `observe` (or a service) on the same file gets
 * SQLITE_BUSY. Each attempt waits up to ATTEMPT_MS inside SQLite (its busy handler), then we
 * back off (10 ms doubling to 200 ms, jittered) and try again, until the lock wait limit:
 * only then is it an error (STATE_ERROR, exit 2), and nothing was applied. A batch is one
 * transaction taken with BEGIN IMMEDIATE, so a busy attempt has done nothing yet.
 */
export const ATTEMPT_MS = 100;

/** Default longest wait for the write lock: 5 minutes (8 writers of 200k rollouts each need ~1). */
export const DEFAULT_LOCK_WAIT_MS = 300_000;

/** Environment variable overriding the wait, in seconds. */
export const LOCK_WAIT_ENV = 'ROLLOUT_BUDGET_LOCK_TIMEOUT_S';

/** The lock wait limit in ms: $ROLLOUT_BUDGET_LOCK_TIMEOUT_S × 1000, else the default. */
export function lockWaitMs(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env[LOCK_WAIT_ENV];
  if (raw === undefined || raw === '') return DEFAULT_LOCK_WAIT_MS;
  const s = Number(raw);
  if (!Number.isFinite(s) || s < 0) throw new RolloutBudgetError('BAD_OPTION', `${LOCK_WAIT_ENV} must be a number of seconds ≥ 0, got ${JSON.stringify(raw)}`);
  return s * 1000;
}

/** SQLITE_BUSY and SQLITE_LOCKED, with their extended codes (e.g. SQLITE_BUSY_SNAPSHOT). */
export function isBusy(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED'));
}

/** Pause before attempt k + 1: 10·2^k ms up to 200 ms, times a jitter in [0.5, 1) from (pid, k). */
function pauseMs(k: number): number {
  const jitter = 0.5 + (fnv1a(`${process.pid}:${k}`) / 2 ** 32) * 0.5;
  return Math.min(200, 10 * 2 ** Math.min(k, 5)) * jitter;
}

const sleeper = new Int32Array(new SharedArrayBuffer(4));

/** The error once the limit has passed. */
export type Timeout = (waitedMs: number) => RolloutBudgetError;

/** Runs `work` until it is not busy, sleeping this thread between attempts (CLI commands). */
export function retrySync<T>(work: () => T, limitMs: number, timeout: Timeout): T {
  const start = Date.now();
  for (let k = 0; ; k++) {
    try {
      return work();
    } catch (error) {
      if (!isBusy(error)) throw error;
      const waited = Date.now() - start;
      if (waited >= limitMs) throw timeout(waited);
      Atomics.wait(sleeper, 0, 0, Math.min(pauseMs(k), limitMs - waited));
    }
  }
}

/**
 * The same, waiting on timers so that the event loop keeps serving (the service). `stopped`,
 * asked after each busy attempt, ends the wait with its error (a service stopping: nothing applied).
 */
export async function retryAsync<T>(work: () => T, limitMs: number, timeout: Timeout, stopped?: () => RolloutBudgetError | undefined): Promise<T> {
  const start = Date.now();
  for (let k = 0; ; k++) {
    try {
      return work();
    } catch (error) {
      if (!isBusy(error)) throw error;
      const stop = stopped?.();
      if (stop !== undefined) throw stop;
      const waited = Date.now() - start;
      if (waited >= limitMs) throw timeout(waited);
      await new Promise((resolve) => setTimeout(resolve, Math.min(pauseMs(k), limitMs - waited)));
    }
  }
}
