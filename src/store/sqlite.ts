import Database from 'better-sqlite3';
import { RolloutBudgetError } from '../errors.js';
import type { ResultBatch } from '../io/formats.js';
import type { DecayOptions } from '../posterior/decay.js';
import { snapshotOf, type PromptState, type StateSnapshot } from '../posterior/state.js';
import { accumulate, applyEvidence } from './accumulate.js';
import { ATTEMPT_MS, LOCK_WAIT_ENV, lockWaitMs, retryAsync, retrySync } from './busy.js';
import { withMeta, type PromptMeta } from './meta.js';
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
  wrong_tokens REAL NOT NULL,
  prior_pass_rate REAL,
  prior_samples INTEGER
);
CREATE TABLE IF NOT EXISTS seen (rollout_id TEXT PRIMARY KEY) WITHOUT ROWID;
`;

/** Columns added after the first release: a state file made before them gains them on open. */
const ADDED_COLUMNS: readonly [string, string][] = [['prior_pass_rate', 'REAL'], ['prior_samples', 'INTEGER']];

interface Row {
  id: string;
  grp: string | null;
  successes: number;
  failures: number;
  last_step: number;
  rollouts: number;
  reward_sum: number;
  correct_count: number;
  correct_tokens: number;
  wrong_count: number;
  wrong_tokens: number;
  prior_pass_rate: number | null;
  prior_samples: number | null;
}

const fromRow = (r: Row): PromptState => ({
  id: r.id,
  group: r.grp,
  successes: r.successes,
  failures: r.failures,
  lastStep: r.last_step,
  rollouts: r.rollouts,
  rewardSum: r.reward_sum,
  correctCount: r.correct_count,
  correctTokens: r.correct_tokens,
  wrongCount: r.wrong_count,
  wrongTokens: r.wrong_tokens,
  ...(r.prior_pass_rate === null ? {} : { priorPassRate: r.prior_pass_rate }),
  ...(r.prior_samples === null ? {} : { priorSamples: r.prior_samples }),
});

const toRow = (s: PromptState): Row => ({
  id: s.id,
  grp: s.group,
  successes: s.successes,
  failures: s.failures,
  last_step: s.lastStep,
  rollouts: s.rollouts,
  reward_sum: s.rewardSum,
  correct_count: s.correctCount,
  correct_tokens: s.correctTokens,
  wrong_count: s.wrongCount,
  wrong_tokens: s.wrongTokens,
  prior_pass_rate: s.priorPassRate ?? null,
  prior_samples: s.priorSamples ?? null,
});

/** One prompt's row, whole (its state as withMeta or applyEvidence computed it). */
const UPSERT = `INSERT INTO prompts (id, grp, successes, failures, last_step, rollouts, reward_sum, correct_count, correct_tokens,
  wrong_count, wrong_tokens, prior_pass_rate, prior_samples)
  VALUES (@id, @grp, @successes, @failures, @last_step, @rollouts, @reward_sum, @correct_count, @correct_tokens, @wrong_count,
  @wrong_tokens, @prior_pass_rate, @prior_samples)
  ON CONFLICT(id) DO UPDATE SET grp = excluded.grp, successes = excluded.successes, failures = excluded.failures,
  last_step = excluded.last_step, rollouts = excluded.rollouts, reward_sum = excluded.reward_sum,
  correct_count = excluded.correct_count, correct_tokens = excluded.correct_tokens,
  wrong_count = excluded.wrong_count, wrong_tokens = excluded.wrong_tokens,
  prior_pass_rate = excluded.prior_pass_rate, prior_samples = excluded.prior_samples`;

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
        const have = new Set((this.db.prepare('PRAGMA table_info(prompts)').all() as { name: string }[]).map((c) => c.name));
        for (const [name, type] of ADDED_COLUMNS) if (!have.has(name)) this.db.exec(`ALTER TABLE prompts ADD COLUMN ${name} ${type}`);
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

  /** Prompts with evidence (a prompt only planned, store/meta.ts, is not counted). */
  count(): number {
    return this.sync(() => (this.db.prepare('SELECT COUNT(*) AS n FROM prompts WHERE rollouts > 0').get() as { n: number }).n);
  }

  /**
   * Records prompts' group and hint (store/meta.ts) in one BEGIN IMMEDIATE transaction, waiting
   * (asleep) for the write lock as apply() does: evidence untouched, idempotent. O(changes).
   */
  recordPrompts(meta: readonly PromptMeta[]): void {
    if (meta.length === 0) return;
    this.sync(this.recorder(meta));
  }

  /** The same, waiting for the write lock on timers. */
  async recordPromptsAsync(meta: readonly PromptMeta[]): Promise<void> {
    if (meta.length === 0) return;
    await retryAsync(this.recorder(meta), this.lockWaitMs, this.busy);
  }

  private recorder(meta: readonly PromptMeta[]): () => void {
    const select = this.db.prepare('SELECT * FROM prompts WHERE id = ?');
    const upsert = this.db.prepare(UPSERT);
    const run = this.db.transaction(() => {
      for (const m of meta) {
        const row = select.get(m.id) as Row | undefined;
        upsert.run(toRow(withMeta(row === undefined ? undefined : fromRow(row), m)));
      }
    });
    return () => run.immediate();  }

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
    const run = this.applier(batch, decay);
    return this.sync(run);
  }

  /** The same, waiting for the write lock on timers: the event loop keeps serving meanwhile. */
  applyAsync(batch: ResultBatch, decay: DecayOptions): Promise<ObserveSummary> {
    return retryAsync(this.applier(batch, decay), this.lockWaitMs, this.busy);
  }

  private applier(batch: ResultBatch, decay: DecayOptions): () => ObserveSummary {
    const markSeen = this.db.prepare('INSERT OR IGNORE INTO seen (rollout_id) VALUES (?)');
    const select = this.db.prepare('SELECT * FROM prompts WHERE id = ?');
    const upsert = this.db.prepare(UPSERT);
    const setStep = this.db.prepare("INSERT INTO meta (key, value) VALUES ('last_step', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value");
    const run = this.db.transaction((): ObserveSummary => {
      const before = this.lastStep();
      const acc = accumulate(batch, before === null ? 0 : before + 1, (key) => markSeen.run(key).changes > 0);
      const touched = new Set<string>();
      let last = before;
      for (const e of acc.evidence) {
        const row = select.get(e.prompt_id) as Row | undefined;
        upsert.run(toRow(applyEvidence(row === undefined ? undefined : fromRow(row), e, decay)));
        touched.add(e.prompt_id);
        if (last === null || e.step > last) last = e.step;
      }
      if (last !== null && last !== before) setStep.run(String(last));
      return { applied: acc.applied, duplicates: acc.duplicates, aborted: acc.aborted, prompts: touched.size, last_step: last };
    });
    return () => run.immediate();
  }

  close(): void {
    this.db.close();
  }
}
