import type Database from 'better-sqlite3';
import { fromRow, type Row } from './sqlite-rows.js';
import { POOLED_COLUMNS, POOLED_META_KEY, pooledMendedNote, pooledOf, pooledStaleNote, pooledSumsSql, pooledValues, samePooled, scopesOfSums } from './pooled.js';

/** The pooled rows in a SQLite state (store/pooled.ts): their first fill, and their check and rebuild. */

/**
 * Fills the pooled rows from the prompts once, for a state written before they existed (and
 * marks a new state); later observes keep them up to date. O(N) once.
 */
export function buildPooledRows(db: Database.Database): void {
  const marked = () => db.prepare('SELECT 1 FROM meta WHERE key = ?').pluck().get(POOLED_META_KEY) !== undefined;
  if (marked()) return;
  db.transaction(() => {
    if (marked()) return;
    const rows = db.prepare('SELECT * FROM prompts').all() as Row[];
    if (rows.length > 0) writePooled(db, [...pooledOf(rows.map(fromRow))].map(([scope, stats]) => [scope, pooledValues(stats)]));
    db.prepare('INSERT INTO meta (key, value) VALUES (?, ?)').run(POOLED_META_KEY, '1');
  }).immediate();
}

/**
 * SqliteStore.mendPooled: the check is a read view (writers go on); only rows found wrong are
 * checked again and rebuilt in one BEGIN IMMEDIATE transaction, so no observe lands between that
 * read and the rebuild. The prompts are summed by SQLite (pooledSumsSql: O(N) without an object
 * a row). Returns the note for `path`, or undefined when the rows were right; on a state opened
 * read-only (`readOnly`: why) the rows are only checked, and the note says they were not rebuilt.
 */
export function mendPooledRows(db: Database.Database, path: string, readOnly?: string): string | undefined {
  /** The prompts' pooled figures when the stored rows do not sum them, else undefined. */
  const wrong = () => {
    const stored = new Map((db.prepare(`SELECT scope, ${POOLED_COLUMNS.join(', ')} FROM pooled`).raw().all() as [string, ...number[]][]).map(([scope, ...v]) => [scope, v]));
    const actual = scopesOfSums(db.prepare(pooledSumsSql('prompts')).raw().all() as unknown[][]);
    return samePooled(stored, actual) ? undefined : actual;
  };
  // Rows never built (a state older than them, opened read-only): nothing reads them (count() counts the prompts).
  const built = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'pooled'").pluck().get() !== undefined
    && db.prepare('SELECT 1 FROM meta WHERE key = ?').pluck().get(POOLED_META_KEY) !== undefined;
  if (!built || db.transaction(wrong)() === undefined) return undefined;
  // A state this process may not write: checked, said, left as it is.
  if (readOnly !== undefined) return pooledStaleNote(path, readOnly);
  return db.transaction(() => {
    const actual = wrong();
    if (actual === undefined) return undefined;
    db.prepare('DELETE FROM pooled').run();
    writePooled(db, actual);
    return pooledMendedNote(path);
  }).immediate();
}

/** Writes pooled rows, each scope's figures in POOLED_COLUMNS order (inside the caller's transaction). */
function writePooled(db: Database.Database, rows: Iterable<readonly [string, readonly number[]]>): void {
  const insert = db.prepare(`INSERT OR REPLACE INTO pooled (scope, ${POOLED_COLUMNS.join(', ')}) VALUES (?, ${POOLED_COLUMNS.map(() => '?').join(', ')})`);
  for (const [scope, values] of rows) insert.run(scope, ...values);
}
