import { stateOfValues, type PromptState } from '../posterior/state.js';

// The one maker of a prompt state from its row's values lives beside PromptState (posterior/state.ts).
export { stateOfValues };

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
