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
 * When the best remaining move's value per unit cost falls below `saturation` × the best
 * first move's, the primary values are saturated and the rest of the budget goes by the
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

/** Sampled prompts used to estimate the pre-commit threshold. */
const SAMPLE = 1024;
/** Below this many prompts the heap alone is fast enough. */
const PRECOMMIT_MIN = 6 * SAMPLE;

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
  /** Pending move per item: gain of the next rollout, or the jump 0 → jumpTo worth jumpValue. */
  const gain = new Float64Array(size);
  const jumpTo = new Int32Array(skip ? size : 0);
  const jumpValue = new Float64Array(skip ? size : 0);
  const fits = (r: number, t: number) => state.usedR + r <= budgetR && state.usedT + t <= budgetT * (1 + SLACK);
  const unitCost = (i: number) => wr + wt * c[i]!;
  const ratio = (g: number, cost: number) => (cost > 0 ? g / cost : g > 0 ? Infinity : 0);
  const perRollout = (i: number) => (state.n[i]! === 0 ? jumpValue[i]! / jumpTo[i]! : gain[i]!);

  /** Key of item i's pending move on the primary curves, or NaN when it has none. */
  const keyOf = (i: number): number => {
    const n = state.n[i]!;
    if (n >= maxN) return NaN;
    if (n > 0) {
      const g = curves.nextGain(i);
      gain[i] = g;
      return ratio(g, unitCost(i));
    }
    let m = minN;
    let v = curves.seek(i, m);
    let cost = m * unitCost(i) + wt * f[i]!;
    while (m < maxN) {
      const g = curves.nextGain(i);
      if (!(ratio(g, unitCost(i)) > ratio(v, cost))) break;
      curves.advance(i);
      v += g;
      cost += unitCost(i);
      m++;
    }
    jumpTo[i] = m;
    jumpValue[i] = v;
    return ratio(v, cost);
  };

  /** Takes item i's pending move (which must fit). */
  const take = (i: number): void => {
    const n = state.n[i]!;
    if (n === 0) {
      const m = jumpTo[i]!;
      state.n[i] = m;
      state.objective += jumpValue[i]!;
      state.usedR += m;
      state.usedT += m * c[i]! + f[i]!;
    } else {
      state.objective += gain[i]!;
      curves.advance(i);
      state.n[i] = n + 1;
      state.usedR += 1;
      state.usedT += c[i]!;
    }
  };

  const reset = (): void => {
    state.objective = 0;
    state.usedR = 0;
    state.usedT = 0;
    for (let i = 0; i < size; i++) {
      state.n[i] = start;
      const v = curves.seek(i, start);
      if (start > 0) {
        state.objective += v;
        state.usedR += start;
        state.usedT += start * c[i]! + f[i]!;
      }
    }
  };
  reset();

  const keys = new Float64Array(size);
  const items = new Int32Array(size);
  let count = 0;
  const collect = (i: number) => {
    const key = keyOf(i);
    if (key === key) {
      keys[count] = key;
      items[count++] = i;
    }
  };
  for (let i = 0; i < size; i++) collect(i);
  // Saturation: moves below this key (a share of the best first move's) are not worth taking
  // for the primary value; what budget is left then goes by the surplus curves.
  let best = 0;
  for (let k = 0; k < count; k++) if (keys[k]! > best) best = keys[k]!;
  const saturated = (input.saturation ?? 1e-6) * best;
  if (size >= PRECOMMIT_MIN && input.precommit !== false) {
    // Above max(estimate, saturated) the heap would take every move in turn: commit them in
    // one pass (no move there is saturated, so the heap order could not have stopped sooner).
    // The sample walk leaves sampled items' pending moves stale, so the arrays are rebuilt.
    const estimate = estimateThreshold();
    count = 0;
    if (!(estimate > 0 && precommit(Math.max(estimate, saturated)))) {
      if (estimate > 0) reset();
      count = 0;
      for (let i = 0; i < size; i++) collect(i);
    }
  }
  const heap = new MaxHeap(size, input.tieBreak);
  heap.build(keys, items, count);

  const capacityLeft = () => (wr > 0 ? 1 - state.usedR * wr : 1 - state.usedT * wt);
  let cheapest = Infinity;
  for (let i = 0; i < size; i++) if (c[i]! < cheapest) cheapest = c[i]!;
  /** No move of any prompt can fit any more. */
  const spent = () => state.usedR + 1 > budgetR || state.usedT + cheapest > budgetT * (1 + SLACK);
  const noteBound = (key: number) => {
    if (singleBudget && Number.isNaN(state.bound)) state.bound = state.objective + Math.max(0, capacityLeft()) * key;
  };

  // Phase 1: primary values, best ratio first.
  while (heap.size > 0) {
    const key = heap.topKey();
    const i = heap.topItem();
    if (!(key > 0) || key < saturated || spent()) {
      noteBound(Math.max(key, 0));
      break;
    }
    if (state.n[i]! === 0) {
      const m = jumpTo[i]!;
      if (!fits(m, m * c[i]! + f[i]!)) {
        noteBound(key);
        const roomR = budgetR - state.usedR;
        const roomT = c[i]! > 0 ? (budgetT * (1 + SLACK) - state.usedT - f[i]!) / c[i]! : Infinity;
        const smaller = Math.min(m - 1, Math.floor(roomR), Math.floor(roomT));
        if (smaller < minN) {
          heap.pop();
          continue;
        }
        const v = curves.seek(i, smaller);
        jumpTo[i] = smaller;
        jumpValue[i] = v;
        heap.replaceTop(ratio(v, smaller * unitCost(i) + wt * f[i]!), i);
        continue;
      }
    } else if (!fits(1, c[i]!)) {
      noteBound(key);
      heap.pop();
      continue;
    }
    take(i);
    const next = keyOf(i);
    if (next === next) heap.replaceTop(next, i);
    else heap.pop();
  }
  if (Number.isNaN(state.bound)) state.bound = state.objective;

  const surplus = input.surplus;
  if (withSurplus && surplus !== undefined && !spent()) spendSurplus(input, surplus, state, heap, fits, unitCost, spent);
  return state;

  /**
   * A ratio λ such that the moves above it very likely fit both budgets: where a
   * deterministic sample's cumulative cost, scaled to all prompts, reaches 93% of what is
   * left. Sampled items are put back at the start afterwards. O(sample · moves).
   */
  function estimateThreshold(): number {
    const stride = Math.ceil(size / SAMPLE);
    const sampled = Math.ceil(size / stride);
    // Walk each sampled prompt no further than 3× the average allocation left (+2): moves
    // beyond are rarely above the threshold, and an underestimate only costs a fallback.
    const perItem = Math.min((budgetR - state.usedR) / size, wt > 0 ? (budgetT - state.usedT) / size / Math.max(1e-9, meanTokens()) : Infinity);
    const cap = Math.min(maxN, Math.max(minN, start) + Math.ceil(3 * perItem) + 2);
    const room = sampled * (cap - start + 1);
    const ratios = new Float64Array(room);
    const costR = new Float64Array(room);
    const costT = new Float64Array(room);
    let m = 0;
    for (let i = 0; i < size; i += stride) {
      while (state.n[i]! < cap) {
        const key = keyOf(i);
        if (!(key > 0)) break;
        const n = state.n[i]!;
        const r = n === 0 ? jumpTo[i]! : 1;
        ratios[m] = key;
        costR[m] = r;
        costT[m++] = r * c[i]! + (n === 0 ? f[i]! : 0);
        if (n === 0) state.n[i] = jumpTo[i]!;
        else {
          curves.advance(i);
          state.n[i] = n + 1;
        }
      }
      state.n[i] = start;
      curves.seek(i, start);
    }
    // Cumulative cost from the best ratio down, over a histogram of log-ratios: O(m). The
    // threshold is the upper edge of the bucket where the scaled budget runs out, so every
    // move above it sits in a bucket that fit.
    let lo = Infinity;
    let hi = -Infinity;
    for (let k = 0; k < m; k++) {
      const x = Math.log(ratios[k]!);
      if (x < lo) lo = x;
      if (x > hi) hi = x;
    }
    const buckets = 4096;
    const width = (hi - lo) / buckets || 1;
    const sumR = new Float64Array(buckets + 1);
    const sumT = new Float64Array(buckets + 1);
    for (let k = 0; k < m; k++) {
      const b = Math.min(buckets, Math.floor((Math.log(ratios[k]!) - lo) / width));
      sumR[b] = sumR[b]! + costR[k]!;
      sumT[b] = sumT[b]! + costT[k]!;
    }
    const share = (sampled / size) * 0.93;
    const limitR = (budgetR - state.usedR) * share;
    const limitT = (budgetT - state.usedT) * share;
    let accR = 0;
    let accT = 0;
    for (let b = buckets; b >= 0; b--) {
      accR += sumR[b]!;
      accT += sumT[b]!;
      if (accR > limitR || accT > limitT) return Math.exp(lo + (b + 1) * width);
    }
    return NaN; // everything fits: the heap alone is cheap enough then
  }

  function meanTokens(): number {
    let total = 0;
    for (let i = 0; i < size; i++) total += c[i]!;
    return total / size;
  }

  /**
   * Takes, for every item, all pending moves with a ratio above λ: exactly the moves the heap
   * would pop first, and collects each item's next move for the heap. Returns false (and the
   * caller resets) if they overspend a budget, where the heap would have dropped moves.
   */
  function precommit(lambda: number): boolean {
    for (let i = 0; i < size; i++) {
      while (state.n[i]! === 0) {
        const key = keyOf(i);
        if (!(key > lambda)) break;
        take(i);
      }
      let n = state.n[i]!;
      if (n > 0) {
        const uc = unitCost(i);
        let g = NaN;
        let taken = 0;
        while (n < maxN) {
          g = curves.nextGain(i);
          if (!(ratio(g, uc) > lambda)) break;
          state.objective += g;
          curves.advance(i);
          n++;
          taken++;
          g = NaN;
        }
        state.n[i] = n;
        state.usedR += taken;
        state.usedT += taken * c[i]!;
        if (g === g) {
          gain[i] = g;
          keys[count] = ratio(g, uc);
          items[count++] = i;
        }
      } else {
        collect(i);
      }
    }
    return state.usedR <= budgetR && state.usedT <= budgetT * (1 + SLACK);
  }
}

/** Phase 2: what the primary values leave goes by the surplus curves; v stays primary. */
function spendSurplus(
  input: SolverInput,
  surplus: ValueCurves,
  state: CoreState,
  heap: MaxHeap,
  fits: (r: number, t: number) => boolean,
  unitCost: (i: number) => number,
  spent: () => boolean,
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
  const keys = new Float64Array(curves.size);
  const items = new Int32Array(curves.size);
  let count = 0;
  for (let i = 0; i < curves.size; i++) {
    if (state.n[i]! > 0) surplus.seek(i, state.n[i]!);
    const key = keyOf(i);
    if (key > 0) {
      keys[count] = key;
      items[count++] = i;
    }
  }
  heap.clear();
  heap.build(keys, items, count);
  while (heap.size > 0 && !spent()) {
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
