import { rmSync } from 'node:fs';
import type Database from 'better-sqlite3';
import { RolloutBudgetError } from '../errors.js';
import { sourceOfBatch, type ResultBatch, type ResultSource } from '../io/results.js';
import { checkDecay, type DecayOptions } from '../posterior/decay.js';
import { snapshotOf, type PromptState, type StateSnapshot } from '../posterior/state.js';
import { ATTEMPT_MS, LOCK_WAIT_ENV, lockWaitMs, retryAsync, retrySync } from './busy.js';
import { cannotOpen, sqliteUnavailable } from './unavailable.js';
import { checkSameFile, fileIdentity, sqliteStateNotes, type FileIdentity } from './file-identity.js';
import type { PromptMeta } from './meta.js';
import { ALL_SCOPE, POOLED_COLUMNS, POOLED_META_KEY } from './pooled.js';
import { buildPooledRows, mendPooledRows } from './sqlite-pooled.js';
import { ClaimConflict, SqliteWriter } from './sqlite-apply.js';
import { installedSqlite, sqliteDriver } from './sqlite-driver.js';
import { vacuumInto } from './sqlite-copy.js';
import { openReadOnly, readOnlyError, requireCreatable, unwritableReason } from './sqlite-read-only.js';
import { PartialRead } from './sqlite-partial.js';
import type { ScannedState } from './scan-ahead.js';
import { lastStepReader } from './sqlite-last-step.js';
import { PromptScan } from './sqlite-scan.js';
import { checkStateKind, STATE_VERSION, userVersion } from './state-kind.js';
import { fromRow, type Row } from './sqlite-rows.js';
import type { ObserveSummary, Store } from './types.js';
import { isPostgresUrl, notAStateUrl, redactUrl } from './url.js';


/** How much of a state file SQLite reads through a memory map. */
export const MMAP_BYTES = 1 << 30;

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
  wrong_tokens REAL NOT NULL,
  prior_pass_rate REAL,
  prior_samples INTEGER
);
CREATE TABLE IF NOT EXISTS seen (rollout_id TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS pooled (scope TEXT PRIMARY KEY, ${POOLED_COLUMNS.map((c) => `${c} REAL NOT NULL`).join(', ')}) WITHOUT ROWID;
`;

/** Columns added after the first release: a state file made before them gains them on open. */
const ADDED_COLUMNS: readonly [string, string][] = [['prior_pass_rate', 'REAL'], ['prior_samples', 'INTEGER']];
export interface SqliteStoreOptions {
  /**
   * Longest wait for another process's write lock before an operation fails with
   * STATE_ERROR (store/busy.ts); default $ROLLOUT_BUDGET_LOCK_TIMEOUT_S, else 300 s.
   */
  readonly lockWaitMs?: number;
}

/** The page size of a new state file (docs/performance.md, twelfth round). */
export const PAGE_BYTES = 16_384;

/**
 * The state in one SQLite file (or ':memory:'). WAL journal with synchronous=FULL: a batch
 * commits whole or not at all, also when the process is killed mid-write. Several processes
 * may write one file: each waits its turn for the write lock (store/busy.ts). A file this user
 * cannot write is opened read-only, without making files beside it (store/sqlite-read-only.ts).
 */
export class SqliteStore implements Store {
  private readonly db: Database.Database;
  private readonly lockWaitMs: number;
  /** The opened file (undefined for ':memory:'), checked before each operation. */
  private file: FileIdentity | undefined;
  /**
   * Why the state was opened read-only (`path: this user cannot write it ...`), or undefined when
   * it may be written (store/sqlite-read-only.ts): what a write's error says.
   */
  private readonly readOnly: string | undefined;

  constructor(readonly path: string, options: SqliteStoreOptions = {}) {
    this.lockWaitMs = options.lockWaitMs ?? lockWaitMs();
    if (isPostgresUrl(path)) {
      throw new RolloutBudgetError('BAD_OPTION', `${redactUrl(path)}: a PostgreSQL URL, and this store opens SQLite files (PostgresStore.connect or openAsyncStore opens it)`);
    }
    const notState = notAStateUrl(path);
    if (notState !== undefined) throw new RolloutBudgetError('BAD_OPTION', notState);
    try {
      const driver = sqliteDriver();
      requireCreatable(path);
      const unwritable = unwritableReason(path);
      // A state this user cannot write is read without making files beside it (store/sqlite-read-only.ts).
      this.db = unwritable === undefined ? new driver.Database(path, { timeout: ATTEMPT_MS, ...driver.options }) : openReadOnly(driver, path, unwritable);
      this.sync(() => {
        checkStateKind(this.db, path); // before anything is written: another program's database, a later format
        if (unwritable === undefined) {
          // A new file gets 16 kB pages (an existing one keeps its own: SQLite ignores this then).
          // observe's claimed keys go into the B-tree at scattered places, and larger pages split
          // less: 10⁶ rollouts with ids 1.99 → 1.81 s (median of 5 each, taking turns), the keys'
          // inserts alone 0.79 → 0.63 s; plans the same, an 8-rollout observe +0.1 ms (p50).
          this.db.exec(`PRAGMA page_size = ${PAGE_BYTES}`);
          if (path !== ':memory:') this.db.exec('PRAGMA journal_mode = WAL');
          this.db.exec('PRAGMA synchronous = FULL');
        }
        // Reads through a memory map (up to 1 GiB of the file): a plan's row lookups cost a
        // memory access, not a read() each (4,096 lookups in a 10⁶-prompt state: ~80 → ~10 ms).
        this.db.exec(`PRAGMA mmap_size = ${MMAP_BYTES}`);
        // One transaction for the whole schema: a new file commits (and syncs) once, not once a table.
        this.db.transaction(() => {
          this.db.exec(SCHEMA);
          if (unwritable === undefined && userVersion(this.db) === 0) this.db.exec(`PRAGMA user_version = ${STATE_VERSION}`);
          const have = new Set((this.db.prepare('PRAGMA table_info(prompts)').all() as { name: string }[]).map((c) => c.name));
          for (const [name, type] of ADDED_COLUMNS) if (!have.has(name)) this.db.exec(`ALTER TABLE prompts ADD COLUMN ${name} ${type}`);
        })();
      });
      this.sync(() => buildPooledRows(this.db));
      if (unwritable !== undefined) {
        // Any write now fails (SQLITE_READONLY), and sync() says why.
        this.db.exec('PRAGMA query_only = ON');
        this.readOnly = `${path}: ${unwritable}`;
      }
      if (path !== ':memory:') this.file = fileIdentity(path);
    } catch (error) {
      throw cannotOpen(path, error);
    }
  }

  /** Throws STATE_ERROR when the file at the path is no longer the one opened (store/file-identity.ts). */
  private checkFile(): void {
    if (this.file !== undefined) checkSameFile(this.path, this.file);
  }

  /**
   * The better-sqlite3 Database class (loaded on first use), for tools that write a state file
   * directly; what it makes is kept until the process ends (store/sqlite-kept.ts keepingAll).
   */
  static driver(): typeof Database {
    return installedSqlite();
  }

  private busy = (waitedMs: number) =>
    new RolloutBudgetError(
      'STATE_ERROR',
      `${this.path}: another process held the state's write lock for ${(waitedMs / 1000).toFixed(1)} s, longer than the limit of ` +
        `${this.lockWaitMs / 1000} s (${LOCK_WAIT_ENV}); nothing was applied. Wait for the other observe or service to finish, or raise the limit`,
    );

  /** Runs one operation, waiting (this thread asleep) while another process holds the lock. */
  private sync<T>(work: () => T): T {
    this.checkFile();
    try {
      return retrySync(work, this.lockWaitMs, this.busy);
    } catch (error) {
      throw this.failure(error);
    }
  }

  /** The same, waiting on timers: the event loop keeps serving meanwhile; stopWaiting ends the wait. */
  private async waiting<T>(work: () => T): Promise<T> {
    this.checkFile();
    try {
      return await retryAsync(work, this.lockWaitMs, this.busy, () => this.stopped);
    } catch (error) {
      throw this.failure(error);
    }
  }

  private stopped: RolloutBudgetError | undefined;

  /**
   * Ends every wait for another process's write lock (now and later) with STATE_ERROR, nothing
   * applied: a stopping service, whose clients were cut, does not stay up until the lock frees
   * (up to the lock wait limit, 300 s by default) to apply batches no client will hear of.
   */
  stopWaiting(reason: string): void {
    this.stopped = new RolloutBudgetError('STATE_ERROR', `${this.path}: ${reason}: stopped waiting for another process's write lock; nothing was applied`);
  }

  /** What a failed operation throws: a write to a read-only state says why it is read-only; a SQLite failure its STATE_ERROR. */
  private failure(error: unknown): unknown {
    if (this.readOnly !== undefined && /^SQLITE_READONLY/.test(String((error as { code?: unknown }).code))) {
      return readOnlyError(this.readOnly);
    }
    return sqliteUnavailable(error, this.path) ?? error;
  }

  get(id: string): PromptState | undefined {
    const read = (this.rowRead ??= this.db.prepare('SELECT * FROM prompts WHERE id = ?'));
    const row = this.sync(() => read.get(id) as Row | undefined);
    return row === undefined ? undefined : fromRow(row);
  }

  /** Statements a request runs, prepared once (store/sqlite-kept.ts keeps each). */
  private rowRead: Database.Statement | undefined;
  private countRead: Database.Statement | undefined;

  /** The last step observed; its statement prepared once (the service's plans read it every request). */
  lastStep(): number | null {
    const read = (this.lastStepRead ??= lastStepReader(this.db));
    return this.sync(read);
  }

  private lastStepRead: (() => number | null) | undefined;

  /**
   * Prompts with evidence (a prompt only planned, store/meta.ts, is not counted): the pooled
   * `all` row's count, which every observe keeps (store/pooled.ts), so `/healthz` reads one row.
   * Counting the prompts took 50–100 ms of the service's one event loop on a 10⁶-prompt state,
   * and 8 token-less `/healthz` pollers held a trainer's 5 ms plan to 1.5 s. A state whose
   * pooled rows were never built (opened read-only) is counted row by row.
   */
  count(): number {
    const read = (this.countRead ??= this.db.prepare(
      `SELECT CASE WHEN EXISTS (SELECT 1 FROM meta WHERE key = '${POOLED_META_KEY}') THEN (SELECT coalesce(sum(count), 0) FROM pooled WHERE scope = '${ALL_SCOPE}') ELSE (SELECT COUNT(*) FROM prompts WHERE rollouts > 0) END`,
    ).pluck());
    return this.sync(() => Math.round(read.get() as number));
  }

  /** Throws the read-only state's error (a plan that must record into it fails before its plan is delivered). */
  requireWritable(): void {
    if (this.readOnly !== undefined) throw readOnlyError(this.readOnly);
  }

  /**
   * Records prompts' group and hint (store/meta.ts) in one BEGIN IMMEDIATE transaction, waiting
   * (asleep) for the write lock as apply() does: evidence untouched, idempotent; the pooled rows
   * follow an observed prompt whose group changes. O(changes).
   */
  recordPrompts(meta: readonly PromptMeta[]): void {
    if (meta.length === 0) return;
    this.sync(this.recorder(meta));
  }

  /** The same, waiting for the write lock on timers. */
  async recordPromptsAsync(meta: readonly PromptMeta[]): Promise<void> {
    if (meta.length === 0) return;
    await this.waiting(this.recorder(meta));
  }

  private recorder(meta: readonly PromptMeta[]): () => void {
    const run = this.db.transaction(() => this.writer.record(meta));
    return () => run.immediate();
  }

  /**
   * A consistent read view (one read transaction). Without `ids`: every prompt, the pooled
   * figures summed over them (the CLI's plan: the same numbers as ever). With `ids`: those
   * prompts and the pooled rows (store/pooled.ts), so the cost follows the ids, not the state
   * (the service's plan); and, when `hinted` is set or a prompt read carries a hint, every
   * observed hinted prompt (the hint calibration is fitted on them, posterior/hints.ts).
   */
  snapshot(ids?: readonly string[], groups: readonly string[] = [], hinted = false): StateSnapshot {
    const read = this.db.transaction(() => {
      if (ids === undefined) {
        const scanned = this.scanned;
        this.scanned = undefined;
        if (scanned !== undefined) return scanned.columns.snapshot(scanned.lastStep);
        // Columns (store/sqlite-scan.ts), else row by row through a SQL function
        // (store/sqlite-partial.ts): no array a row, where a list of a million of them lived
        // through the plan and made every collection slow.
        const columns = (this.scanner ??= new PromptScan(this.db)).read();
        if (columns !== undefined) return columns.snapshot(this.lastStep());
        return snapshotOf((this.partial ??= new PartialRead(this.db)).all(), this.lastStep());
      }
      return (this.partial ??= new PartialRead(this.db)).read(ids, groups, hinted);
    });
    return this.sync(() => read());
  }

  /** The largest rowid of the prompts table: the prompts it holds, or more after deletes. O(log N). */
  promptsAtMost(): number {
    return (this.maxRowid ??= this.db.prepare('SELECT max(rowid) FROM prompts').pluck()).get() as number | null ?? 0;
  }

  private maxRowid: Database.Statement | undefined;

  /**
   * The next full snapshot() is `scanned`, this file's prompts and last step read by another
   * connection (store/scan-ahead.ts readStateAhead) since this command began, instead of a read
   * of its own: the state at that moment, as any read is the state at some moment. Once.
   */
  useScan(scanned: ScannedState): void {
    this.scanned = scanned;
  }

  private scanned: ScannedState | undefined;

  /** snapshot()'s read of the whole table, prepared on first use. */
  private scanner: PromptScan | undefined;

  /** snapshot(ids)'s read (store/sqlite-partial.ts), prepared on first use. */
  private partial: PartialRead | undefined;

  /**
   * Checks the pooled rows against the prompts and rebuilds them when they no longer sum them
   * (store/sqlite-pooled.ts mendPooledRows: a writer that does not keep them, another program or
   * a rollout-budget older than the rows); returns a note saying so, or undefined. At `serve`'s
   * start and for `inspect`'s summary. A read-only state is checked and left as it is, with a note.
   */
  mendPooled(): string | undefined {
    return this.sync(() => mendPooledRows(this.db, this.path, this.readOnly));
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
    return this.waiting(this.applier(sourceOfBatch(batch), decay));
  }

  /**
   * One transaction, hopeful first (store/sqlite-apply.ts): when a key was stored before, it
   * is rolled back and the batch applied again, asking which keys each statement took.
   */
  private applier(source: ResultSource, decay: DecayOptions): () => ObserveSummary {
    checkDecay(decay);
    const run = this.db.transaction((hopeful: boolean) => this.writer.apply(source, decay, hopeful));
    return () => {
      try {
        return run.immediate(true);
      } catch (error) {
        if (!(error instanceof ClaimConflict)) throw error;
        return run.immediate(false);
      }
    };
  }

  /** The statements of observe (store/sqlite-apply.ts), prepared on first use. */
  private get writer(): SqliteWriter {
    return (this.writerStatements ??= new SqliteWriter(this.db));
  }

  private writerStatements: SqliteWriter | undefined;

  /**
   * What an operator should know about this state file: that it is on a network file system
   * (store/network-fs.ts), that it has other names (file-identity.ts linkedStateNote). Read when
   * asked (a statfs, a stat), not by the commands that never print it.
   */
  get notes(): readonly string[] {
    return sqliteStateNotes(this.path);
  }

  /**
   * Writes a consistent copy of the state to `file`, which must not exist: SQLite's VACUUM INTO,
   * one read transaction (writers go on meanwhile; what they commit after it starts is not in the
   * copy), compacted. O(state size), without holding the state in memory.
   */
  copyTo(file: string, name = file): void {
    this.sync(() => {
      // A read-only state's query_only stops VACUUM INTO too, which writes only the new file.
      if (this.readOnly !== undefined) this.db.exec('PRAGMA query_only = OFF');
      try {
        vacuumInto(this.db, file, name);
      } finally {
        if (this.readOnly !== undefined) this.db.exec('PRAGMA query_only = ON');
      }
    });
  }

  close(): void {
    this.db.close();
    // The state file was removed while open: its -wal and -shm are left, and a new state made at
    // the path would read that WAL as its own (sqlite.org/howtocorrupt.html, 1.4). They go too.
    if (this.file !== undefined && fileIdentity(this.path) === undefined) {
      for (const suffix of ['-wal', '-shm']) rmSync(`${this.path}${suffix}`, { force: true });
    }
  }
}
