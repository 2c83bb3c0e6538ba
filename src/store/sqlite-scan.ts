import type Database from 'better-sqlite3';
import { StateColumns } from '../posterior/state-columns.js';
import { ROW_COLUMNS } from './sqlite-rows.js';

/**
 * Reads the whole `prompts` table into columns (posterior/state-columns.ts), in the order a
 * plain `SELECT … FROM prompts` gives its rows (the table's), through a SQL function that
 * takes each row's values: better-sqlite3 makes no array or object per row then, which was
 * most of the read (10⁶ rows: iterating them raw took 2.2–3.4 s here, this 0.4–0.7 s).
 * Call inside a read transaction. Undefined when a row does not fit the columns
 * (StateColumns.add, StateColumns.seal): the caller reads the rows the careful way.
 */
export class PromptScan {
  private target: StateColumns | undefined;
  private fits = true;
  private readonly count: Database.Statement;
  private readonly scan: Database.Statement;

  constructor(db: Database.Database) {
    db.function('rollout_budget_scan_row', { directOnly: true }, (id: unknown, grp: unknown, successes: unknown, failures: unknown, lastStep: unknown, rollouts: unknown, rewardSum: unknown,
      correctCount: unknown, correctTokens: unknown, wrongCount: unknown, wrongTokens: unknown, priorPassRate: unknown, priorSamples: unknown) => {
      if (this.fits) this.fits = this.target!.add(id, grp, successes, failures, lastStep, rollouts, rewardSum, correctCount, correctTokens, wrongCount, wrongTokens, priorPassRate, priorSamples);
      return null;
    });
    this.count = db.prepare('SELECT count(*) FROM prompts').pluck();
    this.scan = db.prepare(`SELECT count(rollout_budget_scan_row(${ROW_COLUMNS})) FROM prompts`).pluck();
  }

  read(): StateColumns | undefined {
    const columns = new StateColumns(this.count.get() as number);
    this.target = columns;
    this.fits = true;
    try {
      this.scan.get();
    } finally {
      this.target = undefined;
    }
    return this.fits && columns.size === columns.capacity && columns.seal() ? columns : undefined;
  }
}
