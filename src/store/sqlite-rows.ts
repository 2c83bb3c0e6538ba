import type { PromptState } from '../posterior/state.js';
import { stateOfValues } from './state-values.js';

export { fromRow, type Row } from './state-values.js';

/** The row's columns in the order fromRawRow reads them. */
export const ROW_COLUMNS = 'id, grp, successes, failures, last_step, rollouts, reward_sum, correct_count, correct_tokens, wrong_count, wrong_tokens, prior_pass_rate, prior_samples';

/** A row read as an array (better-sqlite3 raw mode) of ROW_COLUMNS. */
export type RawRow = [string, string | null, number, number, number, number, number, number, number, number, number, number | null, number | null];

/** A RawRow followed by one more column (SqliteWriter's reads: the id's index in the ids read). */
export type KeyedRawRow = [...RawRow, number];

export const fromRawRow = (r: RawRow | KeyedRawRow): PromptState => stateOfValues(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12]);
