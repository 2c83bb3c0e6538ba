import type { PromptState } from '../posterior/state.js';

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

/** A row of the PostgreSQL `prompts` table, as COLUMNS reads it. */
export interface Row {
  id: string; grp: string | null; successes: number; failures: number; last_step: number; rollouts: number;
  reward_sum: number; correct_count: number; correct_tokens: number; wrong_count: number; wrong_tokens: number;
  prior_pass_rate: number | null; prior_samples: number | null;
}

/** A prompt's state from a row read in COLUMNS order as an array (pg's rowMode 'array'), its id at `at`. */
export function fromValues(v: readonly unknown[], at: number): PromptState {
  const n = (k: number) => v[at + k] as number;
  const rate = v[at + 11] as number | null;
  const samples = v[at + 12] as number | null;
  return {
    id: v[at] as string, group: v[at + 1] as string | null, successes: n(2), failures: n(3), lastStep: n(4), rollouts: n(5),
    rewardSum: n(6), correctCount: n(7), correctTokens: n(8), wrongCount: n(9), wrongTokens: n(10),
    ...(rate === null ? {} : { priorPassRate: rate }),
    ...(samples === null ? {} : { priorSamples: samples }),
  };
}

export const fromRow = (r: Row): PromptState => ({
  id: r.id, group: r.grp, successes: r.successes, failures: r.failures, lastStep: r.last_step, rollouts: r.rollouts,
  rewardSum: r.reward_sum, correctCount: r.correct_count, correctTokens: r.correct_tokens, wrongCount: r.wrong_count,
  wrongTokens: r.wrong_tokens,
  ...(r.prior_pass_rate === null ? {} : { priorPassRate: r.prior_pass_rate }),
  ...(r.prior_samples === null ? {} : { priorSamples: r.prior_samples }),
});

