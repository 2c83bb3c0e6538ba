import { existsSync, rmSync } from 'node:fs';
import { isPostgresUrl } from '../store/url.js';
import { statIfThere } from '../io/paths.js';

/**
 * A SQLite state file that a command created and then failed with: `plan`, `observe`, `serve`,
 * `execute` and `loop` remove it again, so a failed command leaves no state behind that only
 * it made.
 */

/** Whether `state` names a SQLite state file that is not there yet (':memory:' and URLs are not files). */
export function isNewStateFile(state: string): boolean {
  return state !== ':memory:' && !isPostgresUrl(state) && !existsSync(state);
}

/**
 * `isEmpty()`, asked just before a command removes a state file it created: false when the
 * file cannot be read (then it is kept). Callers ask whether any prompt has evidence (and any
 * partial rollout is stored), so a state that another process wrote to meanwhile is kept.
 */
export async function stillEmpty(isEmpty: () => boolean | Promise<boolean>): Promise<boolean> {
  try {
    return await isEmpty();
  } catch {
    return false;
  }
}

/** Removes a SQLite state file with its WAL and shared-memory files. */
export function removeStateFile(state: string): void {
  for (const suffix of ['', '-wal', '-shm']) rmSync(`${state}${suffix}`, { force: true });
}

/**
 * After a state this command created failed to open (a full disk: "database or disk is full"):
 * removes what SQLite left, a file of 0 bytes and its WAL and shared-memory files. A file with
 * bytes in it is kept: another process made it meanwhile.
 */
function removeUnopenedStateFile(state: string): void {
  if (statIfThere(state)?.size === 0) removeStateFile(state);
}

/**
 * `open()` (a store on `state`), and where it fails on a state file this command created
 * (`created`: isNewStateFile before), what SQLite left of it removed. plan, observe and serve.
 */
export async function openCreated<T>(state: string, created: boolean, open: () => T | Promise<T>): Promise<T> {
  try {
    return await open();
  } catch (error) {
    if (created) removeUnopenedStateFile(state);
    throw error;
  }
}
