import { badOption, quote } from '../errors.js';
import { MAX_TOKEN_COUNT } from '../posterior/length.js';
import type { ExecuteOptions } from './types.js';

/** The largest over-provisioning ratio r (a group of n launches up to ⌊(1 + r)·n⌋): `--over-provision`'s range too. */
export const MAX_OVER_PROVISION = 10;

/**
 * The numbers of a library caller's ExecuteOptions, checked before any request as the CLI's
 * flags are (cli/executor.ts): a concurrency of 0 or NaN waited forever for a free slot, an
 * over-provision of -0.5 generated 2 of a group's 4 planned rollouts and of NaN none, with
 * nothing said, and a NaN timeout aborted every request. Errors name the option fields. O(1).
 */
export function checkExecuteNumbers(options: ExecuteOptions): void {
  const int = (name: string, v: unknown, min: number, max = Number.MAX_SAFE_INTEGER) => {
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min || v > max) {
      throw badOption(`${name} must be an integer ${max === Number.MAX_SAFE_INTEGER ? `≥ ${min}` : `from ${min} to ${max}`}, got ${quote(v)}`, [name]);
    }
  };
  int('concurrency', options.concurrency, 1);
  int('requestN', options.requestN, 1);
  int('retry.retries', options.retry?.retries, 0);
  if (options.defaultMaxTokens !== undefined) int('defaultMaxTokens', options.defaultMaxTokens, 1, MAX_TOKEN_COUNT);
  const over: unknown = options.overProvision;
  if (typeof over !== 'number' || !(over >= 0 && over <= MAX_OVER_PROVISION)) {
    throw badOption(`overProvision must be a number in [0, ${MAX_OVER_PROVISION}], got ${quote(over)}`, ['overProvision']);
  }
  const timeout: unknown = options.timeoutMs;
  if (typeof timeout !== 'number' || !(timeout > 0 && timeout < Infinity)) {
    throw badOption(`timeoutMs must be a finite number of milliseconds > 0, got ${quote(timeout)}`, ['timeoutMs']);
  }
}
