import type { PromptState } from '../posterior/state.js';

/** A row of the SQLite `prompts` table. */
export interface Row {
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

export const fromRow = (r: Row): PromptState => ({
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

/** The row's columns in the order fromRawRow reads them. */
export const ROW_COLUMNS = 'id, grp, successes, failures, last_step, rollouts, reward_sum, correct_count, correct_tokens, wrong_count, wrong_tokens, prior_pass_rate, prior_samples';

/** A row read as an array (better-sqlite3 raw mode) of ROW_COLUMNS. */
export type RawRow = [string, string | null, number, number, number, number, number, number, number, number, number, number | null, number | null];

/** A RawRow followed by one more column (SqliteWriter's reads: the id's index in the ids read). */
export type KeyedRawRow = [...RawRow, number];

export const fromRawRow = (r: RawRow | KeyedRawRow): PromptState => ({
  id: r[0],
  group: r[1],
  successes: r[2],
  failures: r[3],
  lastStep: r[4],
  rollouts: r[5],
  rewardSum: r[6],
  correctCount: r[7],
  correctTokens: r[8],
  wrongCount: r[9],
  wrongTokens: r[10],
  ...(r[11] === null ? {} : { priorPassRate: r[11] }),
  ...(r[12] === null ? {} : { priorSamples: r[12] }),
});
