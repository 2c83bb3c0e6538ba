import type Database from 'better-sqlite3';
import type { GroupStats, PromptState, StateSnapshot } from '../posterior/state.js';
import { ALL_SCOPE, groupScope, partialSnapshot, POOLED_COLUMNS, statsOfValues } from './pooled.js';
import { lastStepReader } from './sqlite-last-step.js';
import { ROW_COLUMNS } from './sqlite-rows.js';
import { stateOfValues } from './state-values.js';

/** Ids a statement reads at most (one JSON array parameter each). */
const IDS_A_READ = 1000;

/**
 * The service's read of some prompts (store/pooled.ts): the rows of `ids`, the pooled rows of
 * their groups and of `groups`, the last step and, when asked or a row read carries a hint, every
 * observed hinted prompt. The rows come through a SQL function registered on the connection,
 * which makes each row's PromptState from its values (store/state-values.ts, as fromRawRow
 * does): better-sqlite3 makes no array per row then (256 rows of a 10⁶-prompt state: 0.87 →
 * 0.60 ms here). The values are the ones a row read gives (the same conversion of each
 * column), and the rows come in the same order, the index's (the statement's WHERE is the
 * row read's), so the snapshot is the one a row-by-row read makes. The same function reads
 * the hinted rows and, for the store's careful path, every row, so no statement iterates
 * (store/sqlite-kept.ts). Call inside a read transaction; one read at a time per connection.
 */
export class PartialRead {
  private rows: PromptState[] | undefined;
  private readonly prompts: Database.Statement;
  private readonly pooled: Database.Statement;
  private readonly hinted: Database.Statement;
  private readonly every: Database.Statement;
  private readonly lastStep: () => number | null;

  constructor(db: Database.Database) {
    // Thirteen named parameters: better-sqlite3 takes a function's arity from its length.
    db.function('rollout_budget_partial_row', { directOnly: true }, (id: unknown, grp: unknown, successes: unknown, failures: unknown, lastStep: unknown, rollouts: unknown, rewardSum: unknown,
      correctCount: unknown, correctTokens: unknown, wrongCount: unknown, wrongTokens: unknown, priorPassRate: unknown, priorSamples: unknown) => {
      this.rows!.push(stateOfValues(id, grp, successes, failures, lastStep, rollouts, rewardSum, correctCount, correctTokens, wrongCount, wrongTokens, priorPassRate, priorSamples));
      return null;
    });
    this.prompts = db.prepare(`SELECT count(rollout_budget_partial_row(${ROW_COLUMNS})) FROM prompts WHERE id IN (SELECT value FROM json_each(?))`).pluck();
    this.pooled = db.prepare(`SELECT scope, ${POOLED_COLUMNS.join(', ')} FROM pooled WHERE scope IN (SELECT value FROM json_each(?))`).raw();
    this.hinted = db.prepare(`SELECT count(rollout_budget_partial_row(${ROW_COLUMNS})) FROM prompts WHERE prior_pass_rate IS NOT NULL AND successes + failures > 0`).pluck();
    this.every = db.prepare(`SELECT count(rollout_budget_partial_row(${ROW_COLUMNS})) FROM prompts`).pluck();
    this.lastStep = lastStepReader(db);
  }

  read(ids: readonly string[], groups: readonly string[], hinted: boolean): StateSnapshot {
    const states = this.collect(() => {
      for (let k = 0; k < ids.length; k += IDS_A_READ) this.prompts.get(JSON.stringify(ids.length <= IDS_A_READ ? ids : ids.slice(k, k + IDS_A_READ)));
    });
    const scopes = new Set([ALL_SCOPE, ...groups.map(groupScope)]);
    for (const s of states) if (s.group !== null) scopes.add(groupScope(s.group));
    const pooled = new Map<string, GroupStats>();
    for (const [scope, ...values] of this.pooled.all(JSON.stringify([...scopes])) as [string, ...number[]][]) pooled.set(scope, statsOfValues(values));
    const calibration = hinted || states.some((st) => st.priorPassRate !== undefined) ? this.collect(() => this.hinted.get()) : undefined;
    return partialSnapshot(states, pooled, this.lastStep(), calibration);
  }

  /** Every row of the table, in its order (a plain scan's). */
  all(): PromptState[] {
    return this.collect(() => this.every.get());
  }

  /** The states of the rows `read` passes through rollout_budget_partial_row, in its order. */
  private collect(read: () => void): PromptState[] {
    const states: PromptState[] = [];
    this.rows = states;
    try {
      read();
    } finally {
      this.rows = undefined;
    }
    return states;
  }
}
