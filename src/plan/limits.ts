import { badOption } from '../errors.js';
import type { Budget } from './types.js';

/**
 * The most rollouts one prompt can get in one plan. The solver's work grows with the rollouts
 * it places, Σ n_i ≤ N · max_n, so a bound on max_n bounds a plan's work by the candidates:
 * O(N · MAX_N_LIMIT · log N) at worst, whatever numbers a request holds (measured: 1,000
 * prompts at max_n 4,096, ~3 s). GRPO-style trainers use groups of 4 to 64 rollouts a
 * prompt; 4,096 leaves room for pass@k-style studies.
 */
export const MAX_N_LIMIT = 4_096;

/** The bounds the solver works with, and a warning for each one that differs from the request. */
export interface PlanLimits {
  readonly maxN: number;
  /** Σ n_i ≤ rollouts; Infinity when unbounded. */
  readonly rollouts: number;
  /** Σ (n_i·c_i + f_i·[n_i > 0]) ≤ tokens; Infinity when unbounded. */
  readonly tokens: number;
  readonly warnings: string[];
}

/**
 * min_n above MAX_N_LIMIT is refused: a promise no plan could keep. The one rule for the
 * library's options (resolvePlanOptions, so the service's 400 names the field) and planLimits,
 * which the library exports on its own.
 */
export function checkMinNLimit(minN: number): void {
  if (minN > MAX_N_LIMIT) {
    throw badOption(`min_n must be at most ${MAX_N_LIMIT} (the most rollouts one prompt can get in a plan), got ${minN}`, ['min_n']);
  }
}

/**
 * Clamps a plan's bounds to what `size` candidates can use:
 * - max_n to MAX_N_LIMIT (min_n above it is refused: it is a promise the plan could not keep);
 * - a rollouts budget alone to N · max_n (less the rollouts prompts had this step: `had`, their
 *   partial_rewards), a tokens budget alone to ⌈Σ_i (max_n·c_i + f_i)⌉,
 *   the most all candidates at max_n can spend. With one budget this changes no allocation
 *   (the solver places the same moves; its costs only scale; tested against the unclamped
 *   solve). With both budgets, or with `multipleOf` > 1, no budget is clamped: the greedy
 *   weighs each budget by its size and the multiple's repairs compare candidates by it, so a
 *   clamp would change the plan, and the work is already bounded by max_n.
 * `tokensPerRollout` (c_i) and `fixedTokens` (f_i) are the planner's per-candidate costs. O(N).
 */
export function planLimits(
  size: number,
  budget: Budget,
  minN: number,
  maxN: number,
  tokensPerRollout: Float64Array,
  fixedTokens?: Float64Array,
  multipleOf = 1,
  had?: readonly { readonly rollouts: number }[],
): PlanLimits {
  checkMinNLimit(minN);
  const warnings: string[] = [];
  const n = Math.min(maxN, MAX_N_LIMIT);
  if (n < maxN) warnings.push(`max_n ${maxN} is above the limit of ${MAX_N_LIMIT} rollouts a prompt: planned with max_n ${n}`);
  let rollouts = budget.rollouts ?? Infinity;
  let tokens = budget.tokens ?? Infinity;
  if (multipleOf > 1) return { maxN: n, rollouts, tokens, warnings };
  // Prompts with partial rewards take max_n less what they had this step (the plan spent 188 of
  // a "planned with 192" when one of 3 prompts had 4 rollouts).
  let taken = 0;
  if (had !== undefined) for (const g of had) taken += Math.min(g.rollouts, n);
  if (budget.tokens === undefined && rollouts > size * n - taken) {
    rollouts = size * n - taken;
    const less = taken > 0 ? ` less the ${taken} rollouts they had this step` : '';
    warnings.push(`a budget of ${budget.rollouts} rollouts is more than ${size} prompts × max_n ${n}${less} can use: planned with ${rollouts}`);
  }
  if (budget.rollouts === undefined) {
    let most = 0;
    for (let i = 0; i < size; i++) most += n * tokensPerRollout[i]! + (fixedTokens === undefined ? 0 : fixedTokens[i]!);
    const usable = Math.ceil(most);
    if (tokens > usable) {
      tokens = usable;
      warnings.push(`a budget of ${budget.tokens} tokens is more than ${size} prompts × max_n ${n} can use (~${usable}): planned with ${usable}`);
    }
  }
  return { maxN: n, rollouts, tokens, warnings };
}
