import { existsSync, rmSync } from 'node:fs';
import { isPostgresUrl } from '../store/url.js';

/**
 * A SQLite state file that a command created and then failed with: `plan`, `observe` and
 * `serve` remove it again, so a failed command leaves no state behind that only it made.
 */

/** Whether `state` names a SQLite state file that is not there yet (':memory:' and URLs are not files). */
export function isNewStateFile(state: string): boolean {
  return state !== ':memory:' && !isPostgresUrl(state) && !existsSync(state);
}

/**
 * Whether no prompt of a state has evidence, by its `count()` of prompts with evidence: a
 * state that another process observed into meanwhile is kept. False when it cannot be read.
 */
export async function holdsNoEvidence(count: () => number | Promise<number>): Promise<boolean> {
  try {
    return (await count()) === 0;
  } catch {
    return false;
  }
}

/** Removes a SQLite state file with its WAL and shared-memory files. */
export function removeStateFile(state: string): void {
  for (const suffix of ['', '-wal', '-shm']) rmSync(`${state}${suffix}`, { force: true });
}
