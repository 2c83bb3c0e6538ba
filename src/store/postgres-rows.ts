import type pg from 'pg';
import type { PromptState } from '../posterior/state.js';
import { fromRow, stateOfValues, type Row } from './state-values.js';

/** The prompts table's columns as read into a Row (counts as float8: JavaScript numbers, not strings). */
export const COLUMNS = `id, grp, successes, failures, last_step::float8 AS last_step, rollouts::float8 AS rollouts, reward_sum,
  correct_count::float8 AS correct_count, correct_tokens, wrong_count::float8 AS wrong_count, wrong_tokens,
  prior_pass_rate, prior_samples::float8 AS prior_samples`;

/**
 * The prompts whose ids are in the array $1 (distinct ids), as a join of the array with the
 * table: PostgreSQL plans it as one primary-key lookup per id, whatever its statistics say.
 * `WHERE id = ANY($1)` was planned as a parallel scan of the whole table while the statistics
 * were missing or stale (a state just written in bulk, before autovacuum's ANALYZE caught up:
 * 4,096 ids in a 10⁶-prompt state took ~300 ms, ~90 ms as a join); with fresh ones both cost
 * the same.
 */
export const promptsOf = (s: string) => `FROM unnest($1::text[]) AS k(id) JOIN ${s}.prompts AS p USING (id)`;

export { fromRow, type Row } from './state-values.js';

/**
 * Locks the prompts of `keys` that have a row (id order, FOR UPDATE) and puts their states in
 * `into`: how observe (postgres-apply.ts applyIn) and a plan's record (PostgresStore.recordPrompts)
 * take their rows, in one order, so the two never deadlock.
 */
export async function lockPrompts(c: pg.PoolClient, s: string, keys: readonly string[], into: Map<string, PromptState>): Promise<void> {
  const { rows } = await c.query<Row>(`SELECT ${COLUMNS} ${promptsOf(s)} ORDER BY id COLLATE "C" FOR UPDATE OF p`, [keys]);
  for (const row of rows) into.set(row.id, fromRow(row));
}

/** A prompt's state from a row read in COLUMNS order as an array (pg's rowMode 'array'), its id at `at`. */
export const fromValues = (v: readonly unknown[], at: number): PromptState =>
  stateOfValues(v[at], v[at + 1], v[at + 2], v[at + 3], v[at + 4], v[at + 5], v[at + 6], v[at + 7], v[at + 8], v[at + 9], v[at + 10], v[at + 11], v[at + 12]);
