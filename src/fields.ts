import { badInput, quote } from './errors.js';
import { stepTooLarge } from './posterior/decay.js';
import { checkHint } from './posterior/hints.js';
import { MAX_TOKEN_COUNT } from './posterior/length.js';

// The field checks the input formats (io/), the planner's partial groups (plan/), the replay's
// logs and the service share, below all of them (a lower layer never imports a higher one: plan/
// took them from io/jsonl.ts).

/**
 * Whether a rollout's reward counts as a correct answer: reward ≥ 0.5 (a reward is a number in
 * [0, 1]; a fractional one adds its value to the evidence, but a group's correct answers, the
 * length model's correct class, a hard prompt's positive and a partial group's first success
 * all count it whole at 0.5). One rule for every place that counts. O(1).
 */
export function isCorrect(reward: number): boolean {
  return reward >= 0.5;
}

/**
 * The longest id, rollout id or group the state takes: a 100 MB prompt id was stored (a 210 MB
 * state), and every plan after it took 0.6 GB and seconds. Long enough for a prompt's text as
 * its id.
 */
export const MAX_STORED_TEXT = 65_536;

/**
 * What is wrong with text that a store keeps (ids, groups), or undefined: no NUL character
 * (PostgreSQL text cannot hold it) and no lone surrogate (it has no UTF-8 form, so two such
 * ids would be stored as one). Both backends refuse the same strings. O(length).
 */
export function storedTextProblem(v: string, max = MAX_STORED_TEXT): string | undefined {
  if (v.length > max) return `is ${v.length} characters long: at most ${max} are stored`;
  if (v.includes('\u0000')) return 'must not contain the NUL character \\u0000';
  if (/\p{Cs}/u.test(v)) return 'must be well-formed Unicode (a lone surrogate \\ud800-\\udfff cannot be stored)';
  return undefined;
}

function tooManyTokens(key: string, v: number): string {
  return `"${key}" must be at most ${MAX_TOKEN_COUNT} (10⁷ tokens, longer than any model's context), got ${v}`;
}

/** Field checks shared by the input formats; each names the place, field and bad value. */
export const field = {
  string(where: string, obj: Record<string, unknown>, key: string, required: boolean, max = MAX_STORED_TEXT): string | undefined {
    const v = obj[key];
    if (v === undefined && !required) return undefined;
    if (typeof v !== 'string' || v.length === 0) throw badInput(where, `"${key}" must be a non-empty string, got ${quote(v)}`);
    const problem = storedTextProblem(v, max);
    if (problem !== undefined) throw badInput(where, `"${key}" ${problem}, got ${quote(v)}`);
    return v;
  },
  int(where: string, obj: Record<string, unknown>, key: string, min: number): number | undefined {
    const v = obj[key];
    if (v === undefined) return undefined;
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min) {
      throw badInput(where, `"${key}" must be ${min > 0 ? 'a positive' : 'a non-negative'} integer, got ${quote(v)}`);
    }
    return v;
  },
  /** A token count (a rollout's `tokens`, a prompt's `prompt_tokens` or `max_tokens`): an integer in [min, MAX_TOKEN_COUNT]. */
  tokens(where: string, obj: Record<string, unknown>, key: string, min: number): number | undefined {
    const v = field.int(where, obj, key, min);
    if (v !== undefined && v > MAX_TOKEN_COUNT) throw badInput(where, tooManyTokens(key, v));
    return v;
  },
  /** An optional step: an integer in [0, MAX_STEP]. */
  step(where: string, obj: Record<string, unknown>): number | undefined {
    const v = field.int(where, obj, 'step', 0);
    const large = v === undefined ? undefined : stepTooLarge(v);
    if (large !== undefined) throw badInput(where, `"step" ${large}`);
    return v;
  },
  /** An optional array of rewards, numbers in [0, 1] (e.g. `partial_rewards`). */
  rewards(where: string, obj: Record<string, unknown>, key: string): readonly number[] | undefined {
    const v = obj[key];
    if (v === undefined) return undefined;
    if (!Array.isArray(v)) throw badInput(where, `"${key}" must be an array of rewards in [0, 1], got ${quote(v)}`);
    v.forEach((r, j) => {
      if (typeof r !== 'number' || !(r >= 0 && r <= 1)) throw badInput(where, `"${key}[${j}]" must be a number in [0, 1], got ${quote(r)}`);
    });
    return v as number[];
  },
  /** An offline difficulty hint (`prior_pass_rate`, `prior_samples`): posterior/hints.ts checkHint. */
  hint: checkHint,
  /**
   * A results line's group (`rewards`, with `tokens` beside them): each rollout's reward (a
   * number in [0, 1] or a boolean) and token count (a non-negative integer, or undefined) to
   * `each`, in order, after checking it. Throws on `reward` given too, an empty or non-array
   * `rewards`, or `tokens` not an array as long.
   */
  group(where: string, obj: Record<string, unknown>, each: (reward: number, tokens: number | undefined, j: number) => void): void {
    if (obj.reward !== undefined) throw badInput(where, 'give "reward" (one rollout) or "rewards" (a group), not both');
    const rewards = obj.rewards;
    if (!Array.isArray(rewards) || rewards.length === 0) throw badInput(where, `"rewards" must be a non-empty array, got ${quote(rewards)}`);
    const tokens = obj.tokens;
    if (tokens !== undefined && (!Array.isArray(tokens) || tokens.length !== rewards.length)) {
      throw badInput(where, `"tokens" must be an array as long as "rewards" (${rewards.length}), got ${quote(tokens)}`);
    }
    for (let j = 0; j < rewards.length; j++) {
      const reward = field.reward(where, `rewards[${j}]`, rewards[j]);
      const t: unknown = tokens === undefined ? undefined : tokens[j];
      if (t !== undefined && (typeof t !== 'number' || !Number.isSafeInteger(t) || t < 0)) {
        throw badInput(where, `"tokens[${j}]" must be a non-negative integer, got ${quote(t)}`);
      }
      if (typeof t === 'number' && t > MAX_TOKEN_COUNT) {
        throw badInput(where, tooManyTokens(`tokens[${j}]`, t));
      }
      each(reward, t as number | undefined, j);
    }
  },
  reward(where: string, key: string, v: unknown): number {
    if (typeof v === 'boolean') return v ? 1 : 0;
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || v > 1) {
      throw badInput(where, `"${key}" must be a number in [0, 1], got ${quote(v)}`);
    }
    return v;
  },
};
