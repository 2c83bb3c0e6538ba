import { lowerOf, startNeeds, startOf, upperOf } from './bounds.js';
import { SLACK } from './fill.js';
import { MaxHeap } from './heap.js';
import { exactDp } from './reference.js';
import { fixedTokensOf, type Solver, type SolverInput, type SolverResult } from './types.js';

/**
 * Solves with Σ n_i a multiple of k = `input.multipleOf` (trainers split a step's rollouts
 * evenly over k workers or data-parallel ranks), placing the constraint where it costs the
 * least value:
 *
 * 1. `solve` with the rollout budget lowered to k·⌊B_r/k⌋: Σ n ≤ B_r and k | Σ n imply
 *    Σ n ≤ k·⌊B_r/k⌋, so that solve's LP upper bound is a bound of the constrained problem.
 * 2. If its Σ n = R is still not a multiple (a token budget, max_n or the saturation stopped it
 *    short), candidates compete and the largest objective wins (a tie goes to the first):
 *    - up: add exactly k − (R mod k) rollouts, best gain per unit cost first, each within the
 *      budgets and max_n (a left-out prompt enters by its smallest group);
 *    - down: remove exactly R mod k rollouts, least value lost per rollout first, each within
 *      the lower bounds (a prompt that may be left out can drop its whole group).
 *    Where only whole groups larger than the count are left, a second try lets a move pass
 *    the next multiple and continues to the one after (count + k, + 2k, ...).
 *    - the greedy again under k·⌊R/k⌋ rollouts (repaired the same way if a token budget stops
 *      it short again): with token costs it may find a cheaper mix than removing rollouts;
 *    a candidate below R then takes k more rollouts at a time, up to k·⌈R/k⌉, while they fit
 *    and gain (tokens a removal freed may pay for a cheaper group).
 *    If no candidate reaches a multiple, the result is `budget-infeasible`.
 *
 * With unit costs and values concave in n, each repair is exact for its target (the last
 * rollout of a concave curve is its least valuable, the next its most), and the best value at
 * Σ n = m is concave in m, so the best multiple is one of the two next to R: the result
 * equals the exact DP restricted to multiples of k (`exactDp` with multipleOf; tested).
 *
 * Domain: k an integer ≥ 1 (the planner validates `multiple_of`); budgets as for `solve`.
 * Complexity: one solve when the first one lands on a multiple (a rollout budget that binds);
 * otherwise two, plus for each repair O(N·n̄) to seek each prompt's curve to its n and
 * O(k log N) heap steps.
 */
export function solveMultipleOf(input: SolverInput, solve: Solver): SolverResult {
  const k = input.multipleOf ?? 1;
  const capped = Number.isFinite(input.rollouts) ? k * Math.floor(input.rollouts / k) : input.rollouts;
  const base = solve({ ...input, rollouts: capped, multipleOf: undefined });
  if (base.status !== 'optimal') return roundNeeded(base, k);
  const r = base.usedRollouts % k;
  if (r === 0) return base;
  const fix = (from: SolverResult, rest: number): (SolverResult | undefined)[] => [
    repair(input, from, k - rest, 0, 1, capped) ?? repair(input, from, k - rest, k, 1, capped),
    repair(input, from, rest, 0, -1, capped) ?? repair(input, from, rest, k, -1, capped),
  ];
  const candidates = fix(base, r);
  // The greedy again under the multiple below: with token costs it may spend the tokens the
  // repairs cannot move (a whole group that no exact count fits, a cheaper mix of prompts).
  const below = k * Math.floor(base.usedRollouts / k);
  const lower = solve({ ...input, rollouts: below, multipleOf: undefined });
  if (lower.status === 'optimal') {
    const rest = lower.usedRollouts % k;
    candidates.push(...(rest === 0 ? [lower] : fix(lower, rest)));
  }
  // A candidate below R may then take k more rollouts at a time, up to the multiple above R
  // (no further: the first solve decided how much is worth spending), where they fit and gain.
  const above = k * Math.ceil(base.usedRollouts / k);
  let best: SolverResult | undefined;
  for (const start of candidates) {
    let c = start;
    while (c !== undefined && c.usedRollouts + k <= above) {
      const more = repair(input, c, k, 0, 1, capped);
      if (more === undefined || !(more.objective > c.objective)) break;
      c = more;
    }
    if (c !== undefined && (best === undefined || c.objective > best.objective)) best = c;
  }
  const exact = smallExact(input, k, above);
  if (exact !== undefined && (best === undefined || exact.objective > best.objective + 1e-12 * Math.abs(best.objective))) best = exact;
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

/** The most work smallExact takes on: the DP's cells × options, and the values it computes. */
const SMALL_WORK = 2_000_000;

/**
 * The exact DP restricted to multiples of k, up to `above` rollouts (reference.ts exactDp), on
 * a small instance whose plan fits its token budget; else undefined. The repairs above are
 * exact for concave values; a non-concave one (`balanced`, `variance` with skip: a prompt's
 * hull jumps 0 → max_n) could leave them short. `--skip --min-n 2 --max-n 3 --multiple-of 4`
 * with 4 rollouts on 3 prompts planned nothing, where 2 + 2 fit (a statistician's review:
 * 8 empty plans and 24 more than 25% below the DP in 3,000 small instances). O(N·B·max_n)
 * for at most SMALL_WORK steps: a few milliseconds.
 */
function smallExact(input: SolverInput, k: number, above: number): SolverResult | undefined {
  const size = input.curves.size;
  const options = Math.min(input.maxN, above) + 1;
  // The DP's steps (cells × options) and its values (each O(n): Σ n ≤ options²/2 a prompt).
  if (!Number.isFinite(above) || size * (above + 1) * options > SMALL_WORK || (size * options * options) / 2 > SMALL_WORK) return undefined;
  // Ties between prompts go by their tie-break (a hash of the id), so the candidates' order never matters.
  const order = Array.from({ length: size }, (_, i) => i).sort((a, b) => input.tieBreak[a]! - input.tieBreak[b]! || a - b);
  const exact = exactDp({ ...input, rollouts: above, multipleOf: k }, SMALL_WORK, order);
  return exact.status === 'optimal' && exact.usedTokens <= input.tokens ? exact : undefined;
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

/** The upward repair (+1) or the downward one (−1). */
type Direction = 1 | -1;

/**
 * Moves `count` rollouts (count + a multiple of `wrap` when wrap > 0) into `base` (dir +1) or
 * out of it (dir −1), one move at a time, best first; undefined if the moves run out before
 * the count.
 * - up: one more rollout (its primary gain), or a left-out prompt's smallest group, ordered by
 *   gain per normalised cost as the greedy orders its moves; each within max_n, the rollout
 *   budget `limitR` and the token budget;
 * - down: one rollout less (its primary loss) down to the prompt's lower bound, or the whole
 *   group where the prompt may be left out, least loss per rollout first.
 * A move that does not fit never fits later (the room only shrinks, and so does the count).
 */
function repair(input: SolverInput, base: SolverResult, count: number, wrap: number, dir: Direction, limitR: number): SolverResult | undefined {
  const { curves } = input;
  const size = curves.size;
  const n = Int32Array.from(base.n);
  const heap = new MaxHeap(size, input.tieBreak);
  /** Change of the primary objective of item i's pending move, and its rollouts. */
  const delta = new Float64Array(size);
  const step = new Int32Array(size);
  const pending = dir > 0 ? pendingUp : pendingDown;
  // Up moves are ordered as the greedy orders them: value per normalised cost.
  const wr = Number.isFinite(input.rollouts) ? 1 / Math.max(input.rollouts, 1) : 0;
  const wt = Number.isFinite(input.tokens) ? 1 / Math.max(input.tokens, 1) : 0;
  const per = (v: number, cost: number) => (cost > 0 ? v / cost : v);
  function pendingUp(i: number): number {
    const x = n[i]!;
    if (x >= upperOf(input, i)) return NaN;
    const unit = wr + wt * input.tokensPerRollout[i]!;
    if (x > 0) {
      step[i] = 1;
      delta[i] = curves.nextGain(i);
      return per(delta[i]!, unit);
    }
    const s = entryOf(input, i);
    if (s > upperOf(input, i)) return NaN;
    step[i] = s;
    delta[i] = curves.seek(i, s);
    return per(delta[i]!, s * unit + wt * fixedTokensOf(input, i));
  }
  function pendingDown(i: number): number {
    const x = n[i]!;
    if (x === 0) return NaN;
    if (x - 1 >= entryOf(input, i) || (x === 1 && mayLeave(input, i))) {
      step[i] = 1;
      curves.seek(i, x - 1);
      delta[i] = -curves.nextGain(i);
      return delta[i]!;
    }
    if (!mayLeave(input, i)) return NaN;
    step[i] = x;
    delta[i] = -curves.value(i, x);
    return delta[i]! / x;
  }
  for (let i = 0; i < size; i++) {
    if (dir > 0 && n[i]! > 0) curves.seek(i, n[i]!);
    const key = pending(i);
    if (key === key) heap.append(key, i);
  }
  heap.heapify();
  let left = count;
  let usedR = base.usedRollouts;
  let usedT = base.usedTokens;
  let objective = base.objective;
  let surplus = base.surplusRollouts;
  const roomT = input.tokens * (1 + SLACK);
  while (left > 0 && heap.size > 0) {
    const i = heap.topItem();
    const s = step[i]!;
    const x = n[i]!;
    const t = tokensAt(input, i, x + dir * s) - tokensAt(input, i, x);
    if ((s > left && wrap === 0) || (dir > 0 && (usedR + s > limitR || usedT + t > roomT))) {
      heap.pop();
      continue;
    }
    objective += delta[i]!;
    usedR += dir * s;
    usedT += t;
    if (dir < 0) surplus = Math.max(0, surplus - s);
    else if (x > 0) curves.advance(i);
    n[i] = x + dir * s;
    left = remaining(left, s, wrap);
    const key = pending(i);
    if (key === key) heap.replaceTop(key, i);
    else heap.pop();
  }
  if (left > 0) return undefined;
  return {
    status: 'optimal', n, objective, upperBound: base.upperBound, usedRollouts: usedR, usedTokens: Math.max(0, usedT), surplusRollouts: surplus,
  };
}
