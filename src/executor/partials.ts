import type Database from 'better-sqlite3';
import { lastStepReader } from '../store/sqlite-last-step.js';
import { RolloutBudgetError } from '../errors.js';
import { requireWritable } from '../store/sqlite-read-only.js';
import { sqliteDriver } from '../store/sqlite-driver.js';
import { checkStateKind } from '../store/state-kind.js';
import { isPostgresUrl, redactUrl } from '../store/url.js';

/**
 * Unfinished (or finished-but-unused) generations kept between steps for partial rollouts
 * (APRIL): their own table in the state file, next to the Store's tables but outside the Store
 * interface, so any Store backend works with it. `finish_reason` null: the text is a prefix
 * to continue; "stop"/"length": a complete response that arrived after its group was full,
 * used as is next time.
 */
export interface PartialRollout {
  readonly rollout_id: string;
  readonly prompt_id: string;
  /** Step the rollout was launched in. */
  readonly step: number;
  readonly seed: number;
  readonly text: string;
  /** Tokens generated so far, or null when the server did not report them. */
  readonly tokens: number | null;
  readonly finish_reason: 'stop' | 'length' | null;
}

/** Where execute reads the partials it resumes and puts back what it consumed and kept: a PartialStore, or a step's view of one (loop.ts). */
export interface PartialSource {
  /** Stored partials of the given prompts, oldest step first, then by rollout id. */
  forPrompts(ids: readonly string[]): Map<string, PartialRollout[]>;
  /** Deletes the consumed rollout ids and stores (or replaces) the new partials. */
  replace(consumed: readonly string[], keep: readonly PartialRollout[]): void;
}

/**
 * A step's view of a PartialStore (`loop`'s rounds): what each round consumed and kept is held
 * here, read back by the later rounds as if stored, and written to the store only by commit(),
 * after the step's results are observed. A step that fails or is killed after its first round
 * so leaves the stored partials as they were: a partial it resumed is resumed again by the next
 * run (never lost, never observed twice: its results were not observed), as for `execute`.
 */
export class StepPartials implements PartialSource {
  private readonly consumed = new Set<string>();
  private readonly kept = new Map<string, PartialRollout>();

  constructor(private readonly store: PartialSource) {}

  forPrompts(ids: readonly string[]): Map<string, PartialRollout[]> {
    const out = new Map<string, PartialRollout[]>();
    const wanted = new Set(ids);
    for (const [id, rows] of this.store.forPrompts(ids)) {
      const left = rows.filter((p) => !this.consumed.has(p.rollout_id) && !this.kept.has(p.rollout_id));
      if (left.length > 0) out.set(id, left);
    }
    for (const p of this.kept.values()) {
      if (!wanted.has(p.prompt_id)) continue;
      const rows = out.get(p.prompt_id);
      if (rows === undefined) out.set(p.prompt_id, [p]);
      else rows.push(p);
    }
    for (const rows of out.values()) rows.sort((a, b) => a.step - b.step || (a.rollout_id < b.rollout_id ? -1 : a.rollout_id > b.rollout_id ? 1 : 0));
    return out;
  }

  replace(consumed: readonly string[], keep: readonly PartialRollout[]): void {
    for (const id of consumed) {
      this.consumed.add(id);
      this.kept.delete(id);
    }
    for (const p of keep) {
      this.kept.set(p.rollout_id, p);
      this.consumed.delete(p.rollout_id);
    }
  }

  /** Partials the step keeps so far: each once, however many rounds aborted it again. */
  get keptCount(): number {
    return this.kept.size;
  }

  /** Writes the step's changes to the store, in one transaction. */
  commit(): void {
    this.store.replace([...this.consumed], [...this.kept.values()]);
    this.consumed.clear();
    this.kept.clear();
  }
}

const SCHEMA = `CREATE TABLE IF NOT EXISTS partial_rollouts (
  rollout_id TEXT PRIMARY KEY,
  prompt_id TEXT NOT NULL,
  step INTEGER NOT NULL,
  seed INTEGER NOT NULL,
  text TEXT NOT NULL,
  tokens INTEGER,
  finish_reason TEXT
);
CREATE INDEX IF NOT EXISTS partial_rollouts_prompt ON partial_rollouts (prompt_id, step);`;

export class PartialStore implements PartialSource {
  private readonly db: Database.Database;

  /** Opens (and creates the table in) the state file at `path`, or ':memory:'. */
  constructor(readonly path: string) {
    if (isPostgresUrl(path)) {
      throw new RolloutBudgetError('BAD_OPTION', `--state ${redactUrl(path)}: execute and loop keep partial rollouts in a SQLite state file; a PostgreSQL state is not supported there (execute's results go into it with observe --state postgres://...)`);
    }
    // A state this user cannot write would keep the -wal and -shm files this connection makes (store/sqlite-read-only.ts).
    requireWritable(path, 'execute and loop keep partial rollouts in it');
    try {
      const driver = sqliteDriver();
      this.db = new driver.Database(path, driver.options);
      checkStateKind(this.db, path); // another program's database, or a newer format, before anything is written
      if (path !== ':memory:') this.db.exec('PRAGMA journal_mode = WAL');
      this.db.exec('PRAGMA busy_timeout = 10000');
      this.db.exec(SCHEMA);
    } catch (error) {
      if (error instanceof RolloutBudgetError) throw error;
      throw new RolloutBudgetError('STATE_ERROR', `${path}: cannot open the partial-rollout table (${(error as Error).message})`);
    }
  }

  /** The state's last observed step (its `meta` row), or null: none observed, or a file of partials only. */
  lastObservedStep(): number | null {
    const there = this.db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").pluck().get();
    return there === undefined ? null : lastStepReader(this.db)();
  }

  /** Stored partials of the given prompts, oldest step first, then by rollout id. */
  forPrompts(ids: readonly string[]): Map<string, PartialRollout[]> {
    const out = new Map<string, PartialRollout[]>();
    const select = this.statement('SELECT * FROM partial_rollouts WHERE prompt_id = ? ORDER BY step, rollout_id');
    for (const id of ids) {
      const rows = select.all(id) as PartialRollout[];
      if (rows.length > 0) out.set(id, rows);
    }
    return out;
  }

  /** In one transaction: deletes the consumed rollout ids and stores (or replaces) the new partials. */
  replace(consumed: readonly string[], keep: readonly PartialRollout[]): void {
    const del = this.statement('DELETE FROM partial_rollouts WHERE rollout_id = ?');
    const put = this.statement(`INSERT OR REPLACE INTO partial_rollouts VALUES
      (@rollout_id, @prompt_id, @step, @seed, @text, @tokens, @finish_reason)`);
    this.db.transaction(() => {
      for (const id of consumed) del.run(id);
      for (const p of keep) put.run(p);
    }).immediate();
  }

  count(): number {
    return (this.statement('SELECT COUNT(*) AS n FROM partial_rollouts').get() as { n: number }).n;
  }

  /**
   * Whether the file holds no partial rollout and no prompt with evidence (in the state's
   * `prompts` table, when the file is also a plan's state): nothing a command should keep.
   */
  holdsNothing(): boolean {
    if (this.count() > 0) return false;
    if (this.statement("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'prompts'").get() === undefined) return true;
    return (this.statement('SELECT COUNT(*) AS n FROM prompts WHERE rollouts > 0').get() as { n: number }).n === 0;
  }

  all(): PartialRollout[] {
    return this.statement('SELECT * FROM partial_rollouts ORDER BY step, rollout_id').all() as PartialRollout[];
  }

  /**
   * The statement of `sql`, prepared once a store: an execute runs these a batch, and each
   * statement is kept until the process ends (store/sqlite-kept.ts). All run in the default mode.
   */
  private statement(sql: string): Database.Statement {
    let statement = this.statements.get(sql);
    if (statement === undefined) this.statements.set(sql, (statement = this.db.prepare(sql)));
    return statement;
  }

  private readonly statements = new Map<string, Database.Statement>();

  close(): void {
    this.db.close();
  }
}
