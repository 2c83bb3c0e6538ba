import type Database from 'better-sqlite3';
import { RolloutBudgetError } from '../errors.js';
import { lockWaitMs } from './busy.js';
import { sqliteDriver } from './sqlite-driver.js';
import { lastStepReader } from './sqlite-last-step.js';
import { openReadOnly, openRollbackReadOnly, unwritableReason } from './sqlite-read-only.js';
import { ROW_COLUMNS, type RawRow } from './sqlite-rows.js';
import { checkStateKind } from './state-kind.js';
import { cannotOpen, sqliteUnavailable } from './unavailable.js';

/** Prompt rows a batch (a PostgreSQL statement's worth: postgres-apply.ts WRITE_ROWS). */
export const PROMPT_BATCH = 10_000;
/** Claimed rollout keys a batch. */
export const KEY_BATCH = 50_000;

/**
 * A SQLite state read for a copy elsewhere (`backup --out postgres://...`,
 * store/postgres-import.ts): its prompt rows and claimed keys a batch at a time and its last
 * step, all in one read transaction, so the copy is the state at one moment while a
 * service goes on writing it (what it commits after the first read is not in the copy). Nothing
 * is written to the file or made beside it for good: a copy `backup` made (rollback journal,
 * nothing beside it) is read through a read-only connection (openRollbackReadOnly), a file this
 * user cannot write from a copy in memory or through its owner's -wal and -shm (openReadOnly),
 * any other through a connection that only reads (the one that closes last removes the -wal
 * and -shm SQLite makes for it). No format upgrade, no pooled build (the copy sums its own): a
 * state made before the hint columns reads them as NULL.
 *
 * Batches are read by key (`rowid > last`, `rollout_id > last`, each a B-tree seek), so memory is
 * one batch whatever the state's size, and no statement iterates (store/sqlite-kept.ts).
 */
export class SqliteSource {
  private readonly hintColumns: boolean;
  private readonly tables: ReadonlySet<string>;

  private constructor(private readonly db: Database.Database, readonly path: string) {
    this.tables = new Set(db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").pluck().all() as string[]);
    if (!this.tables.has('prompts')) {
      throw new RolloutBudgetError('STATE_ERROR', `${path}: no prompts table, so no state to copy (a file that holds only partial rollouts, or an empty database?); nothing was written`);
    }
    const columns = new Set(db.prepare("SELECT name FROM pragma_table_info('prompts')").pluck().all() as string[]);
    this.hintColumns = columns.has('prior_pass_rate') && columns.has('prior_samples');
  }

  /** Opens the state at `path` (a file that is there, checked by the caller) and starts the read transaction. */
  static open(path: string): SqliteSource {
    const driver = sqliteDriver();
    let db: Database.Database | undefined;
    try {
      const unwritable = unwritableReason(path);
      db = openRollbackReadOnly(driver, path, lockWaitMs())
        ?? (unwritable !== undefined ? openReadOnly(driver, path, unwritable) : new driver.Database(path, { fileMustExist: true, timeout: lockWaitMs(), ...driver.options }));
      checkStateKind(db, path);
      db.exec('BEGIN');
      const source = new SqliteSource(db, path);
      db.prepare('SELECT count(*) FROM sqlite_master').pluck().get(); // the read that fixes the transaction's moment
      return source;
    } catch (error) {
      db?.close();
      throw SqliteSource.failure(error, path);
    }
  }

  private static failure(error: unknown, path: string): unknown {
    if (error instanceof RolloutBudgetError) return error;
    return sqliteUnavailable(error, path) ?? cannotOpen(path, error);
  }

  /** Runs one read, a SQLite failure said as the state's (sqliteUnavailable). */
  private read<T>(work: () => T): T {
    try {
      return work();
    } catch (error) {
      throw SqliteSource.failure(error, this.path);
    }
  }

  /** Every prompt row (planned-only ones too), in the table's order (rowid, as a plain scan gives them), `size` a batch. */
  *prompts(size = PROMPT_BATCH): Generator<RawRow[]> {
    const hints = this.hintColumns ? '' : ', NULL AS prior_pass_rate, NULL AS prior_samples';
    const columns = this.hintColumns ? ROW_COLUMNS : ROW_COLUMNS.replace(', prior_pass_rate, prior_samples', '');
    const next = this.db.prepare(`SELECT ${columns}${hints}, rowid FROM prompts WHERE rowid > ? ORDER BY rowid LIMIT ?`).raw();
    for (let after = -Infinity; ;) {
      const rows = this.read(() => next.all(after, size) as [...RawRow, number][]);
      if (rows.length === 0) return;
      after = rows[rows.length - 1]![13];
      yield rows.map((r) => r.slice(0, 13) as RawRow);
      if (rows.length < size) return;
    }
  }

  /** Every claimed rollout key, in byte order, `size` a batch. */
  *seen(size = KEY_BATCH): Generator<string[]> {
    if (!this.tables.has('seen')) return;
    const first = this.db.prepare('SELECT rollout_id FROM seen ORDER BY rollout_id LIMIT ?').pluck();
    const next = this.db.prepare('SELECT rollout_id FROM seen WHERE rollout_id > ? ORDER BY rollout_id LIMIT ?').pluck();
    for (let after: string | undefined; ;) {
      const keys = this.read(() => (after === undefined ? first.all(size) : next.all(after, size)) as string[]);
      if (keys.length === 0) return;
      after = keys[keys.length - 1];
      yield keys;
      if (keys.length < size) return;
    }
  }

  /** The last observed step, or null (none observed). */
  lastStep(): number | null {
    return this.tables.has('meta') ? this.read(lastStepReader(this.db)) : null;
  }

  /** The partial rollouts the file keeps for execute and loop (executor/partials.ts): not part of the copy. */
  partialRollouts(): number {
    return this.tables.has('partial_rollouts') ? this.read(() => this.db.prepare('SELECT count(*) FROM partial_rollouts').pluck().get() as number) : 0;
  }

  /** Ends the read transaction and closes the connection. */
  close(): void {
    try {
      if (this.db.inTransaction) this.db.exec('COMMIT');
    } finally {
      this.db.close();
    }
  }
}
