import type Database from 'better-sqlite3';
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

export class PartialStore {
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
