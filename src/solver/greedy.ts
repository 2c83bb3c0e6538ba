import type { ValueCurves } from '../value/curves.js';
import { MaxHeap } from './heap.js';
import type { SolverInput, SolverResult } from './types.js';

const SLACK = 1e-9;

interface CoreState {
  n: Int32Array;
  usedR: number;
  usedT: number;
  objective: number;
  /** LP bound of the primary phase; valid when one budget is finite. */
  bound: number;
  surplusRollouts: number;
}

/**
 * Greedy on marginal value per unit cost over each prompt's concave hull of options.
 *
 * Every prompt starts at min_n (or 0 with skip). A move is one more rollout (value
 * v(n+1) − v(n)), or, from 0, the hull's first segment 0 → m* where m* maximizes the chord
 * v(m)/cost(m) (v is concave for n ≥ 1, so the chord rises while the next marginal exceeds
 * it). Moves are taken in order of value per normalized cost, cost = 1/B_r + c_i/B_t per
 * rollout (+ f_i/B_t on inclusion); a move that does not fit is dropped (a jump is first
 * shrunk to the largest size that fits). Exact for unit costs and concave values; with token
 * costs it is within one prompt's marginal value of the optimum on the instances we test.
 *
 * When the best remaining move is worth less than `saturation` (absolute, per rollout;
 * default 1e-6) the primary values are saturated and the rest of the budget goes by the
 * `surplus` curves (the planner passes pass@n: where a first success is most likely still
 * missing).
 *
 * upperBound: LP relaxation bound. With one finite budget it is read off this run (objective
 * at the first dropped move or stop + residual capacity × that move's ratio); with two it is
 * the smaller of the two single-budget LP bounds (valid, looser when both bind).
 *
 * Complexity: O((N + B) log N) time, B = rollouts placed; 16 bytes a prompt of heap plus 8 of
 * jump targets, beside the curves.
 */
export function greedySolve(input: SolverInput): SolverResult {
  const size = input.curves.size;
  const start = input.skip ? 0 : input.minN;
  let needR = size * start;
  let needT = 0;
  if (start > 0) for (let i = 0; i < size; i++) needT += start * input.tokensPerRollout[i]! + input.fixedTokens[i]!;
  if (needR > input.rollouts || needT > input.tokens * (1 + SLACK)) {
    return {
      status: 'budget-infeasible',
      n: new Int32Array(size),
      objective: 0,
      upperBound: 0,
      usedRollouts: 0,
      usedTokens: 0,
      needed: { rollouts: needR, tokens: needT },
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

function runGreedy(input: SolverInput, budgetR: number, budgetT: number, withSurplus: boolean): CoreState {
  const { curves, minN, maxN, skip } = input;
  const c = input.tokensPerRollout;
  const f = input.fixedTokens;
  const size = curves.size;
  const wr = Number.isFinite(budgetR) ? 1 / Math.max(budgetR, 1) : 0;
  const wt = Number.isFinite(budgetT) ? 1 / Math.max(budgetT, 1) : 0;
  const singleBudget = wr === 0 || wt === 0;
  const start = skip ? 0 : minN;
  const state: CoreState = { n: new Int32Array(size), usedR: 0, usedT: 0, objective: 0, bound: NaN, surplusRollouts: 0 };
  const jumpTo = new Int32Array(size);
  const jumpValue = new Float64Array(skip ? size : 0);
  const fits = (r: number, t: number) => state.usedR + r <= budgetR && state.usedT + t <= budgetT * (1 + SLACK);
  const unitCost = (i: number) => wr + wt * c[i]!;
  const ratio = (gain: number, cost: number) => (cost > 0 ? gain / cost : gain > 0 ? Infinity : 0);

  /** Key of item i's next move on `cv`, or NaN when it has none. Sets jumpTo for jumps. */
  const keyOf = (cv: ValueCurves, i: number): number => {
    const n = state.n[i]!;
    if (n >= maxN) return NaN;
    if (n > 0) return ratio(cv.nextGain(i), unitCost(i));
    let m = minN;
    let v = cv.seek(i, m);
    let cost = m * unitCost(i) + wt * f[i]!;
    while (m < maxN) {
      const g = cv.nextGain(i);
      if (!(ratio(g, unitCost(i)) > ratio(v, cost))) break;
      cv.advance(i);
      v += g;
      cost += unitCost(i);
      m++;
    }
    jumpTo[i] = m;
    jumpValue[i] = v;
    return ratio(v, cost);
  };

  for (let i = 0; i < size; i++) {
    state.n[i] = start;
    if (start > 0) {
      state.objective += curves.seek(i, start);
      state.usedR += start;
      state.usedT += start * c[i]! + f[i]!;
    }
  }

  const heap = new MaxHeap(size, input.tieBreak);
  for (let i = 0; i < size; i++) {
    const key = keyOf(curves, i);
    if (key === key) heap.push(key, i);
  }
  const saturation = input.saturation ?? 1e-6;
  /** Value per rollout of item i's pending move. */
  const perRollout = (i: number) => (state.n[i]! === 0 ? jumpValue[i]! / jumpTo[i]! : curves.nextGain(i));
  const capacityLeft = () => (wr > 0 ? 1 - state.usedR * wr : 1 - state.usedT * wt);
  const noteBound = (key: number) => {
    if (singleBudget && Number.isNaN(state.bound)) state.bound = state.objective + Math.max(0, capacityLeft()) * key;
  };

  // Phase 1: primary values.
  while (heap.size > 0) {
    const key = heap.topKey();
    const i = heap.topItem();
    if (!(key > 0) || perRollout(i) < saturation) {
      noteBound(Math.max(key, 0));
      break;
    }
    const n = state.n[i]!;
    if (n === 0) {
      let m = jumpTo[i]!;
      if (!fits(m, m * c[i]! + f[i]!)) {
        noteBound(key);
        const roomR = budgetR - state.usedR;
        const roomT = c[i]! > 0 ? (budgetT * (1 + SLACK) - state.usedT - f[i]!) / c[i]! : Infinity;
        m = Math.min(m - 1, Math.floor(roomR), Math.floor(roomT));
        if (m < minN) {
          heap.pop();
          continue;
        }
        const v = curves.seek(i, m);
        jumpTo[i] = m;
        jumpValue[i] = v;
        heap.replaceTop(ratio(v, m * unitCost(i) + wt * f[i]!), i);
        continue;
      }
      state.n[i] = m;
      state.objective += jumpValue[i]!;
      state.usedR += m;
      state.usedT += m * c[i]! + f[i]!;
    } else {
      if (!fits(1, c[i]!)) {
        noteBound(key);
        heap.pop();
        continue;
      }
      state.objective += curves.nextGain(i);
      curves.advance(i);
      state.n[i] = n + 1;
      state.usedR += 1;
      state.usedT += c[i]!;
    }
    const next = keyOf(curves, i);
    if (next === next) heap.replaceTop(next, i);
    else heap.pop();
  }
  if (Number.isNaN(state.bound)) state.bound = state.objective;

  const surplus = input.surplus;
  if (withSurplus && surplus !== undefined) spendSurplus(input, surplus, state, heap, fits, unitCost);
  return state;
}

/** Phase 2: what the primary values leave goes by the surplus curves; v stays primary. */
function spendSurplus(
  input: SolverInput,
  surplus: ValueCurves,
  state: CoreState,
  heap: MaxHeap,
  fits: (r: number, t: number) => boolean,
  unitCost: (i: number) => number,
): void {
  const { curves, maxN, minN } = input;
  const c = input.tokensPerRollout;
  const f = input.fixedTokens;
  // A move from 0 here takes only min_n: the point of the surplus is coverage, not depth.
  const keyOf = (i: number): number => {
    const n = state.n[i]!;
    if (n >= maxN) return NaN;
    if (n === 0) return surplus.value(i, minN) / (minN * unitCost(i) || 1);
    return surplus.nextGain(i) / (unitCost(i) || 1);
  };
  while (heap.size > 0) heap.pop();
  for (let i = 0; i < curves.size; i++) {
    if (state.n[i]! > 0) surplus.seek(i, state.n[i]!);
    const key = keyOf(i);
    if (key > 0) heap.push(key, i);
  }
  while (heap.size > 0) {
    const i = heap.topItem();
    const n = state.n[i]!;
    const m = n === 0 ? minN : n + 1;
    const r = m - n;
    const t = r * c[i]! + (n === 0 ? f[i]! : 0);
    if (!fits(r, t)) {
      heap.pop();
      continue;
    }
    if (n === 0) {
      state.objective += curves.seek(i, m);
      surplus.seek(i, m);
    } else {
      state.objective += curves.nextGain(i);
      curves.advance(i);
      surplus.advance(i);
    }
    state.n[i] = m;
    state.usedR += r;
    state.usedT += t;
    state.surplusRollouts += r;
    const next = keyOf(i);
    if (next > 0) heap.replaceTop(next, i);
    else heap.pop();
  }
}
