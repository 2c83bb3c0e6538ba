import { join } from 'node:path';
import { SqliteStore } from '../src/index.js';
import { tempDir } from './temp.js';

/** The prompts table's columns, in the order the state-file tests give a row's values. */
export const STATE_COLUMNS = 'id, grp, successes, failures, last_step, rollouts, reward_sum, correct_count, correct_tokens, wrong_count, wrong_tokens, prior_pass_rate, prior_samples';

type Db = InstanceType<ReturnType<typeof SqliteStore.driver>>;

/**
 * A new SQLite state file (in a temp folder named from `prefix`, removed after the tests)
 * holding `rows` as they are, any value SQLite takes, `last_step` in meta when given, and
 * whatever `more` writes in the same transaction.
 */
export function stateFileOf(prefix: string, rows: readonly unknown[][], lastStep?: number, more?: (db: Db) => void): string {
  const path = join(tempDir(prefix), 'state.db');
  new SqliteStore(path).close();
  const db = new (SqliteStore.driver())(path);
  const insert = db.prepare(`INSERT INTO prompts (${STATE_COLUMNS}) VALUES (${STATE_COLUMNS.split(', ').map(() => '?').join(', ')})`);
  db.transaction(() => {
    for (const row of rows) insert.run(...row);
    if (lastStep !== undefined) db.prepare("INSERT INTO meta (key, value) VALUES ('last_step', ?)").run(String(lastStep));
    more?.(db);
  })();
  db.close();
  return path;
}

/**
 * A SQLite state's prompts, every row, and the rows `more` selects (the claimed keys' count, the
 * meta table, ...), as text: what a test compares before and after a command that must change
 * nothing. Read on its own read-only connection.
 */
export function dumpState(path: string, more: string): string {
  const db = new (SqliteStore.driver())(path, { readonly: true });
  try {
    return JSON.stringify([db.prepare('SELECT * FROM prompts ORDER BY id').all(), db.prepare(more).all()]);
  } finally {
    db.close();
  }
}
