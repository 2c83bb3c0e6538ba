import type { PromptState } from '../posterior/state.js';

/**
 * A prompt's state from its row's values, in the prompts table's column order (id, grp,
 * successes, failures, last_step, rollouts, reward_sum, correct_count, correct_tokens,
 * wrong_count, wrong_tokens, prior_pass_rate, prior_samples): the one place every store's
 * reader makes a state, whether its rows come as objects, as arrays or as a SQL function's
 * arguments. The hint's fields are present only when not null, after the others. O(1).
 */
export function stateOfValues(
  id: unknown, grp: unknown, successes: unknown, failures: unknown, lastStep: unknown, rollouts: unknown, rewardSum: unknown,
  correctCount: unknown, correctTokens: unknown, wrongCount: unknown, wrongTokens: unknown, priorPassRate: unknown, priorSamples: unknown,
): PromptState {
  const s = { id, group: grp, successes, failures, lastStep, rollouts, rewardSum, correctCount, correctTokens, wrongCount, wrongTokens } as {
    -readonly [K in keyof PromptState]: PromptState[K];
  };
  if (priorPassRate !== null) s.priorPassRate = priorPassRate as number;
  if (priorSamples !== null) s.priorSamples = priorSamples as number;
  return s;
}

/** A row of the `prompts` table read as an object of its columns (SQLite, and PostgreSQL's COLUMNS). */
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

export const fromRow = (r: Row): PromptState =>
  stateOfValues(r.id, r.grp, r.successes, r.failures, r.last_step, r.rollouts, r.reward_sum, r.correct_count, r.correct_tokens, r.wrong_count, r.wrong_tokens, r.prior_pass_rate, r.prior_samples);
