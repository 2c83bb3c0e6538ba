import { startNeeds } from './bounds.js';
import { Filler, SLACK } from './fill.js';
import { solveMultipleOf } from './multiple.js';
import type { SolverInput, SolverResult } from './types.js';

/**
 * Greedy on marginal value per unit cost over each prompt's concave hull of options.
 *
 * Every prompt starts at min_n (or 0 with skip, or its own bounds: solver/bounds.ts). A move is one more rollout (value
 * v(n+1) − v(n)), or, from 0, the hull's first segment 0 → m* where m* maximizes the chord
 * v(m)/cost(m) (v is concave for n ≥ 1, so the chord rises while the next marginal exceeds
 * it). Moves are taken in order of value per normalized cost, cost = 1/B_r + c_i/B_t per
 * rollout (+ f_i/B_t on inclusion); a move that does not fit is dropped (a jump is first
 * shrunk to the largest size that fits). Exact for unit costs and concave values; with token
 * costs it is within one prompt's marginal value of the optimum on the instances we test.
 *
 * When the best remaining move's value per unit cost falls below `saturation` × the best
 * first move's, the primary values are saturated and the rest of the budget goes by the
 * `surplus` curves (the planner passes pass@n: where a first success is most likely still
 * missing).
 *
 * upperBound: LP relaxation bound. With one finite budget it is read off this run (objective
 * at the first dropped move or stop + residual capacity × that move's ratio); with two it is
 * the smaller of the two single-budget LP bounds (valid, looser when both bind).
 *
 * With `multipleOf` k > 1, Σ n_i is a multiple of k: solver/multiple.ts solves under
 * k·⌊B_r/k⌋ rollouts and repairs the remainder up or down, whichever keeps more value.
 *
 * Complexity: O((N + B) log N) time, B = rollouts placed; large instances take most moves in
 * linear precommit passes (fill.ts), so the heap orders only the last few percent. Memory:
 * 24 bytes a prompt (n, pending gain, heap; 36 with skip), beside the curves.
 */
export function greedySolve(input: SolverInput): SolverResult {
  if ((input.multipleOf ?? 1) > 1) return solveMultipleOf(input, greedyOnce);
  return greedyOnce(input);
}

function greedyOnce(input: SolverInput): SolverResult {
  const size = input.curves.size;
  const need = startNeeds(input);
  if (need.rollouts > input.rollouts || need.tokens > input.tokens * (1 + SLACK)) {
    return {
      status: 'budget-infeasible',
      n: new Int32Array(size),
      objective: 0,
      upperBound: 0,
      usedRollouts: 0,
      usedTokens: 0,
      needed: need,
      surplusRollouts: 0,
    };
  }
  const main = runGreedy(input, input.rollouts, input.tokens, true);
  let upperBound = main.bound;
  if (Number.isFinite(input.rollouts) && Number.isFinite(input.tokens)) {
    const onlyRollouts = runGreedy(input, input.rollouts, Infinity, false).bound;
    const onlyTokens = runGreedy(input, Infinity, input.tokens, false).bound;
    upperBound = Math.min(onlyRollouts, onlyTokens);
  }
  return {
    status: 'optimal',
    n: main.n,
    objective: main.objective,
    upperBound: Math.max(upperBound, main.objective),
    usedRollouts: main.usedR,
    usedTokens: main.usedT,
    surplusRollouts: main.surplusRollouts,
  };
}

function runGreedy(input: SolverInput, budgetR: number, budgetT: number, withSurplus: boolean): Filler['state'] {
  const fill = new Filler(input, budgetR, budgetT);
  fill.phase(input.curves, undefined, input.saturation ?? 1e-6);
  const surplus = input.surplus;
  if (withSurplus && surplus !== undefined && !fill.spent()) {
    for (let i = 0; i < input.curves.size; i++) surplus.seek(i, fill.state.n[i]!);
    fill.phase(surplus, input.curves, 0);
  }
  return fill.state;
}

