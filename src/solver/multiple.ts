import { lowerOf, startNeeds, startOf, upperOf } from './bounds.js';
import { SLACK } from './fill.js';
import { MaxHeap } from './heap.js';
import { fixedTokensOf, type Solver, type SolverInput, type SolverResult } from './types.js';

/**
 * Solves with Σ n_i a multiple of k = `input.multipleOf` (trainers split a step's rollouts
 * evenly over k workers or data-parallel ranks), placing the constraint where it costs the
 * least value:
 *
 * 1. `solve` with the rollout budget lowered to k·⌊B_r/k⌋: Σ n ≤ B_r and k | Σ n imply
 *    Σ n ≤ k·⌊B_r/k⌋, so that solve's LP upper bound is a bound of the constrained problem.
 * 2. If its Σ n = R is still not a multiple (a token budget, max_n or the saturation stopped it
 *    short), two repairs of that allocation compete and the larger objective wins (a tie goes
 *    up, which spends more of the budget):
 *    - up: add exactly k − (R mod k) rollouts, best gain per rollout first, each within the
 *      budgets and max_n (a left-out prompt enters by its smallest group);
 *    - down: remove exactly R mod k rollouts, least value lost per rollout first, each within
 *      the lower bounds (a prompt that may be left out can drop its whole group).
 *    Where only whole groups larger than the count are left, a second try lets a move pass
 *    the next multiple and continues to the one after (count + k, + 2k, ...).
 *    If neither reaches a multiple, the result is `budget-infeasible`.
 *
 * With unit costs and values concave in n, each repair is exact for its target (the last
 * rollout of a concave curve is its least valuable, the next its most), and the best value at
 * Σ n = m is concave in m, so the best multiple is one of the two next to R: the result
 * equals the exact DP restricted to multiples of k (`exactDp` with multipleOf; tested).
 *
 * Complexity: one solve, plus for a repair O(N·n̄) to seek each prompt's curve to its n and
 * O(k log N) heap steps.
 */
export function solveMultipleOf(input: SolverInput, solve: Solver): SolverResult {
  const k = input.multipleOf ?? 1;
  const capped = Number.isFinite(input.rollouts) ? k * Math.floor(input.rollouts / k) : input.rollouts;
  const base = solve({ ...input, rollouts: capped, multipleOf: undefined });
  if (base.status !== 'optimal') return roundNeeded(base, k);
  const r = base.usedRollouts % k;
  if (r === 0) return base;
  // Exact counts first; where whole groups are too large for them (a prompt entering or
  // leaving with min_n rollouts), a move may pass the next multiple and go on to the one after.
  const up = repairUp(input, base, k - r, capped, 0) ?? repairUp(input, base, k - r, capped, k);
  const down = repairDown(input, base, r, 0) ?? repairDown(input, base, r, k);
  const best = up !== undefined && (down === undefined || up.objective >= down.objective) ? up : down;
  if (best === undefined) {
    const need = startNeeds(input);
    return {
      status: 'budget-infeasible', n: new Int32Array(input.curves.size), objective: 0, upperBound: 0,
      usedRollouts: 0, usedTokens: 0, needed: { rollouts: k * Math.ceil(need.rollouts / k), tokens: need.tokens },
      surplusRollouts: 0,
    };
  }
  return { ...best, upperBound: Math.max(base.upperBound, best.objective) };
}

function roundNeeded(result: SolverResult, k: number): SolverResult {
  if (result.needed === undefined) return result;
  return { ...result, needed: { ...result.needed, rollouts: k * Math.ceil(result.needed.rollouts / k) } };
}

/** The smallest group a left-out prompt may enter with. */
function entryOf(input: SolverInput, i: number): number {
  return Math.max(1, lowerOf(input, i));
}

/** Prompt i may go back to 0 (skip, or its own lower bound is 0). */
function mayLeave(input: SolverInput, i: number): boolean {
  return startOf(input, i) === 0;
}

/** Tokens prompt i uses at n. */
function tokensAt(input: SolverInput, i: number, n: number): number {
  return n === 0 ? 0 : n * input.tokensPerRollout[i]! + fixedTokensOf(input, i);
}

/** What is left to the next multiple of `wrap` after taking s of `left` (0 < wrap: may pass it). */
function remaining(left: number, s: number, wrap: number): number {
  return s <= left ? left - s : (((left - s) % wrap) + wrap) % wrap;
}

/**
 * Adds `count` rollouts to `base` (count + a multiple of `wrap` when wrap > 0), best primary
 * gain per rollout first, each move within max_n, the rollout budget `limitR` and the token
 * budget; undefined if no such moves reach the count. A move that does not fit never fits
 * later (the room only shrinks).
 */
function repairUp(input: SolverInput, base: SolverResult, count: number, limitR: number, wrap: number): SolverResult | undefined {
  const { curves } = input;
  const size = curves.size;
  const n = Int32Array.from(base.n);
  const heap = new MaxHeap(size, input.tieBreak);
  const gain = new Float64Array(size);
  const step = new Int32Array(size);
  const pending = (i: number): number => {
    const x = n[i]!;
    if (x >= upperOf(input, i)) return NaN;
    if (x > 0) {
      step[i] = 1;
      gain[i] = curves.nextGain(i);
      return gain[i]!;
    }
    const s = entryOf(input, i);
    if (s > upperOf(input, i)) return NaN;
    step[i] = s;
    gain[i] = curves.seek(i, s);
    return gain[i]! / s;
  };
  for (let i = 0; i < size; i++) {
    if (n[i]! > 0) curves.seek(i, n[i]!);
    const key = pending(i);
    if (key === key) heap.append(key, i);
  }
  heap.heapify();
  let left = count;
  let usedR = base.usedRollouts;
  let usedT = base.usedTokens;
  let objective = base.objective;
  const roomT = input.tokens * (1 + SLACK);
  while (left > 0 && heap.size > 0) {
    const i = heap.topItem();
    const s = step[i]!;
    const t = tokensAt(input, i, n[i]! + s) - tokensAt(input, i, n[i]!);
    if ((s > left && wrap === 0) || usedR + s > limitR || usedT + t > roomT) {
      heap.pop();
      continue;
    }
    objective += gain[i]!;
    usedR += s;
    usedT += t;
    left = remaining(left, s, wrap);
    if (n[i]! > 0) curves.advance(i);
    n[i] = n[i]! + s;
    const key = pending(i);
    if (key === key) heap.replaceTop(key, i);
    else heap.pop();
  }
  if (left > 0) return undefined;
  return { status: 'optimal', n, objective, upperBound: base.upperBound, usedRollouts: usedR, usedTokens: usedT, surplusRollouts: base.surplusRollouts };
}

/**
 * Removes `count` rollouts from `base` (count + a multiple of `wrap` when wrap > 0), least
 * primary value lost per rollout first, each within the prompt's lower bound (or its whole
 * group, where it may be left out); undefined if no such removals reach the count.
 */
function repairDown(input: SolverInput, base: SolverResult, count: number, wrap: number): SolverResult | undefined {
  const { curves } = input;
  const size = curves.size;
  const n = Int32Array.from(base.n);
  const heap = new MaxHeap(size, input.tieBreak);
  const loss = new Float64Array(size);
  const step = new Int32Array(size);
  const pending = (i: number): number => {
    const x = n[i]!;
    if (x === 0) return NaN;
    if (x - 1 >= entryOf(input, i) || (x === 1 && mayLeave(input, i))) {
      step[i] = 1;
      curves.seek(i, x - 1);
      loss[i] = curves.nextGain(i);
      return -loss[i]!;
    }
    if (!mayLeave(input, i)) return NaN;
    step[i] = x;
    loss[i] = curves.value(i, x);
    return -loss[i]! / x;
  };
  for (let i = 0; i < size; i++) {
    const key = pending(i);
    if (key === key) heap.append(key, i);
  }
  heap.heapify();
  let left = count;
  let usedR = base.usedRollouts;
  let usedT = base.usedTokens;
  let objective = base.objective;
  let surplus = base.surplusRollouts;
  while (left > 0 && heap.size > 0) {
    const i = heap.topItem();
    const s = step[i]!;
    if (s > left && wrap === 0) {
      heap.pop();
      continue;
    }
    objective -= loss[i]!;
    usedR -= s;
    usedT -= tokensAt(input, i, n[i]!) - tokensAt(input, i, n[i]! - s);
    surplus = Math.max(0, surplus - s);
    left = remaining(left, s, wrap);
    n[i] = n[i]! - s;
    const key = pending(i);
    if (key === key) heap.replaceTop(key, i);
    else heap.pop();
  }
  if (left > 0) return undefined;
  return { status: 'optimal', n, objective, upperBound: base.upperBound, usedRollouts: usedR, usedTokens: Math.max(0, usedT), surplusRollouts: surplus };
}
