import type Database from 'better-sqlite3';
import { RolloutBudgetError } from '../errors.js';

/**
 * The state file's format, in SQLite's `user_version`: written on a state's first writable open
 * (files made before it have 0, the same format). A file of a later version, made by a newer
 * rollout-budget, is refused: this one could misread what it does not know.
 */
export const STATE_VERSION = 1;

/** Tables that only a state has: a file holding one of them is a state. */
const STATE_TABLES: readonly string[] = ['meta', 'prompts', 'partial_rollouts'];

/**
 * Refuses a SQLite file that is not a state: one with tables but none of a state's own
 * (another program's database, given by mistake, was given a state's tables beside its own and
 * switched to WAL), or one of a later STATE_VERSION. Runs before anything is written.
 */
export function checkStateKind(db: Database.Database, path: string): void {
  const shown = foreignTables(db);
  if (shown !== undefined) {
    throw new RolloutBudgetError('STATE_ERROR', `${path}: a SQLite database of another program (its tables: ${shown}), not a rollout-budget state; it was left as it was: give another --state path`);
  }
  const version = userVersion(db);
  if (version > STATE_VERSION) {
    throw new RolloutBudgetError('STATE_ERROR', `${path}: a state of format ${version}, made by a newer rollout-budget (this one reads format ${STATE_VERSION} and older): upgrade rollout-budget to use it`);
  }
}

/**
 * The tables of the open database, listed (the first 5), when it holds tables and none a state
 * has: another program's database. Undefined for a state or an empty database.
 */
export function foreignTables(db: Database.Database): string | undefined {
  const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").pluck().all() as string[];
  // meta and prompts: the store's first tables; partial_rollouts: a state execute or loop made first (executor/partials.ts).
  if (tables.length === 0 || tables.some((t) => STATE_TABLES.includes(t))) return undefined;
  return tables.slice(0, 5).join(', ') + (tables.length > 5 ? `, … (${tables.length} tables)` : '');
}

/** SQLite's `user_version` of the open database: 0 unless a program set it. */
export function userVersion(db: Database.Database): number {
  return db.prepare('PRAGMA user_version').pluck().get() as number;
}
