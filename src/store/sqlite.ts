import Database from 'better-sqlite3';
import { RolloutBudgetError } from '../errors.js';
import { sourceOfBatch, type ResultBatch, type ResultSource } from '../io/results.js';
import type { DecayOptions } from '../posterior/decay.js';
import { snapshotOf, type PromptState, type StateSnapshot } from '../posterior/state.js';
import { ATTEMPT_MS, LOCK_WAIT_ENV, lockWaitMs, retryAsync, retrySync } from './busy.js';
import { SqliteWriter } from './sqlite-apply.js';
import { fromRow, type Row } from './sqlite-rows.js';
import type { ObserveSummary, Store } from './types.js';


const SCHEMA = `
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS prompts (
  id TEXT PRIMARY KEY,
  grp TEXT,
  successes REAL NOT NULL,
  failures REAL NOT NULL,
  last_step INTEGER NOT NULL,
  rollouts INTEGER NOT NULL,
  reward_sum REAL NOT NULL,
  correct_count INTEGER NOT NULL,
  correct_tokens REAL NOT NULL,
  wrong_count INTEGER NOT NULL,
  wrong_tokens REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS seen (rollout_id TEXT PRIMARY KEY) WITHOUT ROWID;
`;

export interface SqliteStoreOptions {
  /**
   * Longest wait for another process's write lock before an operation fails with
   * STATE_ERROR (store/busy.ts); default $ROLLOUT_BUDGET_LOCK_TIMEOUT_S, else 300 s.
   */
  readonly lockWaitMs?: number;
}

/**
 * The state in one SQLite file (or ':memory:'). WAL journal with synchronous=FULL: a batch
 * commits whole or not at all, also when the process is killed mid-write. Several processes
 * may write one file: each waits its turn for the write lock (store/busy.ts).
 */
export class SqliteStore implements Store {
  private readonly db: Database.Database;
  private readonly lockWaitMs: number;

  constructor(readonly path: string, options: SqliteStoreOptions = {}) {
    this.lockWaitMs = options.lockWaitMs ?? lockWaitMs();
    try {
      this.db = new Database(path, { timeout: ATTEMPT_MS });
      this.sync(() => {
        if (path !== ':memory:') this.db.pragma('journal_mode = WAL');
        this.db.pragma('synchronous = FULL');
        this.db.exec(SCHEMA);
      });
    } catch (error) {
      if (error instanceof RolloutBudgetError) throw error;
      throw new RolloutBudgetError('STATE_ERROR', `${path}: cannot open the state database (${(error as Error).message})`);
    }
  }

  private busy = (waitedMs: number) =>
    new RolloutBudgetError(
      'STATE_ERROR',
      `${this.path}: another process held the state's write lock for ${(waitedMs / 1000).toFixed(1)} s, longer than the limit of ` +
        `${this.lockWaitMs / 1000} s (${LOCK_WAIT_ENV}); nothing was applied. Wait for the other observe or service to finish, or raise the limit`,
    );

  /** Runs one operation, waiting (this thread asleep) while another process holds the lock. */
  private sync<T>(work: () => T): T {
    return retrySync(work, this.lockWaitMs, this.busy);
  }

  get(id: string): PromptState | undefined {
    const row = this.sync(() => this.db.prepare('SELECT * FROM prompts WHERE id = ?').get(id) as Row | undefined);
    return row === undefined ? undefined : fromRow(row);
  }

  lastStep(): number | null {
    const row = this.sync(() => this.db.prepare("SELECT value FROM meta WHERE key = 'last_step'").get() as { value: string } | undefined);
    return row === undefined ? null : Number(row.value);
  }

  count(): number {
    return this.sync(() => (this.db.prepare('SELECT COUNT(*) AS n FROM prompts').get() as { n: number }).n);
  }

  /**
   * Loads every prompt (group figures need them all) and keeps those asked for plus the
   * pooled figures. One read transaction, so the view is consistent.
   */
  snapshot(): StateSnapshot {
    const read = this.db.transaction(() => {
      const rows = this.db.prepare('SELECT * FROM prompts').all() as Row[];
      return snapshotOf(rows.map(fromRow), this.lastStep());
    });
    return this.sync(() => read());
  }

  /** Applies a batch in one BEGIN IMMEDIATE transaction, waiting (asleep) for the write lock. */
  apply(batch: ResultBatch, decay: DecayOptions): ObserveSummary {
    return this.applySource(sourceOfBatch(batch), decay);
  }

  /**
   * Applies a batch read chunk by chunk (a results file of any size) in one BEGIN IMMEDIATE
   * transaction: keys are claimed and evidence summed per chunk (store/claims.ts), the prompt
   * rows written at the end, then one commit; a bad line rolls everything back. Memory: one
   * chunk and the (prompt, step) sums, not the batch.
   */
  applySource(source: ResultSource, decay: DecayOptions): ObserveSummary {
    return this.sync(this.applier(source, decay));
  }

  /** apply(), waiting for the write lock on timers: the event loop keeps serving meanwhile. */
  applyAsync(batch: ResultBatch, decay: DecayOptions): Promise<ObserveSummary> {
    return retryAsync(this.applier(sourceOfBatch(batch), decay), this.lockWaitMs, this.busy);
  }

  private applier(source: ResultSource, decay: DecayOptions): () => ObserveSummary {
    const run = this.db.transaction(() => this.writer.apply(source, decay));
    return () => run.immediate();
  }

  /** The statements of observe (store/sqlite-apply.ts), prepared on first use. */
  private get writer(): SqliteWriter {
    return (this.writerStatements ??= new SqliteWriter(this.db));
  }

  private writerStatements: SqliteWriter | undefined;

  close(): void {
    this.db.close();
  }
}
