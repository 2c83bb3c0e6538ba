import type { ValueCurves } from '../value/types.js';

/** What a solver fills: N prompts, their value curves and costs, under two budgets. */
export interface SolverInput {
  readonly curves: ValueCurves;
  /** Curves that spend budget the primary curves leave (saturated gains); optional. */
  readonly surplus?: ValueCurves;
  /** Expected generated tokens per rollout, c_i ≥ 0. */
  readonly tokensPerRollout: Float64Array;
  /**
   * Tokens charged once when a prompt gets n > 0 (prefill weight · prompt tokens), f_i ≥ 0;
   * absent when every f_i is 0 (read it through fixedTokensOf).
   */
  readonly fixedTokens?: Float64Array;
  /** Stable tie-break per prompt (a hash of its id), so candidate order never matters. */
  readonly tieBreak: Uint32Array;
  readonly minN: number;
  readonly maxN: number;
  /**
   * Per-prompt bounds overriding min_n and max_n (solver/bounds.ts). A lower bound of 0 lets
   * the prompt stay at 0 and grow one rollout at a time: a prompt that already has rollouts
   * at this step, topped up in a later round.
   */
  readonly promptMinN?: Int32Array;
  readonly promptMaxN?: Int32Array;
  /** n_i may be 0 (the prompt is left out of the step). */
  readonly skip: boolean;
  /** Σ n_i ≤ rollouts; Infinity when unbounded. */
  readonly rollouts: number;
  /** Σ (n_i·c_i + f_i·[n_i > 0]) ≤ tokens; Infinity when unbounded. */
  readonly tokens: number;
  /**
   * Σ n_i must be a multiple of this (an integer ≥ 1; absent or 1: no constraint): the number
   * of rollout workers or the data-parallel size a trainer splits the step over
   * (solver/multiple.ts).
   */
  readonly multipleOf?: number;
  /**
   * Large instances first take every move above an estimated ratio threshold in one pass
   * (the same moves the heap would pop first); false forces the heap alone. Default true.
   */
  readonly precommit?: boolean;
  /**
   * Many moves with exactly the same ratio (a fresh state: every prompt has the same prior)
   * are taken in one pass, in the heap's order (fill.ts drainPlateau); false pops every move.
   * The same allocation and the same arithmetic either way. Default true.
   */
  readonly plateau?: boolean;
  /**
   * The primary values are saturated when the best remaining move's value per unit cost is
   * below this share of the best first move's (0: never).
   */
  readonly saturation?: number;
}

/** f_i of `input`: its fixed tokens, 0 when it has none. */
export function fixedTokensOf(input: SolverInput, i: number): number {
  return input.fixedTokens === undefined ? 0 : input.fixedTokens[i]!;
}

/**
 * A solver's answer. Per status:
 * - `optimal`: n holds the allocation; objective = Σ v_i(n_i) on the primary curves;
 *   upperBound ≥ the best integer objective (an LP relaxation bound).
 * - `budget-infeasible`: even every prompt at its lower bound overspends (with `multipleOf`:
 *   or no allocation whose Σ n_i is a multiple of it fits); n is all zeros, objective and
 *   upperBound are 0, and `needed` holds what the lower bounds would use (their rollouts
 *   rounded up to the multiple).
 * - `truncated`: a reference solver gave up (instance too large); n is all zeros.
 */
export interface SolverResult {
  readonly status: 'optimal' | 'budget-infeasible' | 'truncated';
  readonly n: Int32Array;
  readonly objective: number;
  readonly upperBound: number;
  readonly usedRollouts: number;
  readonly usedTokens: number;
  readonly needed?: { rollouts: number; tokens: number };
  /** Rollouts placed by the surplus curves after the primary values saturated. */
  readonly surplusRollouts: number;
}

export type Solver = (input: SolverInput) => SolverResult;

/** Relative slack on the token budget (float sums of expected tokens). */
export const SLACK = 1e-9;

/** A move's value per unit cost; a free move with value is worth any other (Infinity). */
export function moveRatio(g: number, cost: number): number {
  return cost > 0 ? g / cost : g > 0 ? Infinity : 0;
}
