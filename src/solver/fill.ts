import type { ValueCurves } from '../value/types.js';
import { startOf } from './bounds.js';
import { MaxHeap } from './heap.js';
import { ratioWhereBudgetRunsOut } from './threshold.js';
import { fixedTokensOf, type SolverInput } from './types.js';

/** Relative slack on the token budget (float sums of expected tokens). */
export const SLACK = 1e-9;
/** Most prompts sampled to estimate the precommit threshold. */
const SAMPLE = 1024;
/** Below this many prompts the heap alone is fast enough. */
const PRECOMMIT_MIN = 6 * SAMPLE;

export interface CoreState {
  n: Int32Array;
  usedR: number;
  usedT: number;
  objective: number;
  /** LP bound of the primary phase; valid when one budget is finite. */
  bound: number;
  surplusRollouts: number;
}

/**
 * The greedy's state and one fill phase: moves on `cv` (the key curves) best ratio first,
 * while the objective counts the primary curves (`track`, settled at the end of a phase
 * that keys on the surplus curves).
 */
export class Filler {
  readonly state: CoreState;
  private readonly size: number;
  private readonly wr: number;
  private readonly wt: number;
  /** Per-prompt bounds when the input has them (solver/bounds.ts). */
  private readonly lower: Int32Array | undefined;
  private readonly upper: Int32Array | undefined;
  /** Pending move per item: gain of the next rollout, or the jump 0 → jumpTo worth jumpValue. */
  private readonly gain: Float64Array;
  private readonly jumpTo: Int32Array;
  private readonly jumpValue: Float64Array;
  private readonly heap: MaxHeap;
  private readonly cheapest: number;
  private cv: ValueCurves;
  private track: ValueCurves | undefined;
  private primary = true;

  constructor(
    private readonly input: SolverInput,
    private readonly budgetR: number,
    private readonly budgetT: number,
  ) {
    const size = input.curves.size;
    this.size = size;
    this.wr = Number.isFinite(budgetR) ? 1 / Math.max(budgetR, 1) : 0;
    this.wt = Number.isFinite(budgetT) ? 1 / Math.max(budgetT, 1) : 0;
    this.lower = input.promptMinN;
    this.upper = input.promptMaxN;
    this.state = { n: new Int32Array(size), usedR: 0, usedT: 0, objective: 0, bound: NaN, surplusRollouts: 0 };
    this.gain = new Float64Array(size);
    const jumps = input.skip || this.lower !== undefined;
    this.jumpTo = new Int32Array(jumps ? size : 0);
    this.jumpValue = new Float64Array(jumps ? size : 0);
    this.heap = new MaxHeap(size, input.tieBreak);
    let cheapest = Infinity;
    for (let i = 0; i < size; i++) if (input.tokensPerRollout[i]! < cheapest) cheapest = input.tokensPerRollout[i]!;
    this.cheapest = cheapest;
    this.cv = input.curves;
    const c = input.tokensPerRollout;
    for (let i = 0; i < size; i++) {
      const start = startOf(input, i);
      this.state.n[i] = start;
      const v = input.curves.seek(i, start);
      if (start > 0) {
        this.state.objective += v;
        this.state.usedR += start;
        this.state.usedT += start * c[i]! + this.fixed(i);
      }
    }
  }

  /** No move of any prompt can fit any more. */
  spent(): boolean {
    return this.state.usedR + 1 > this.budgetR || this.state.usedT + this.cheapest > this.budgetT * (1 + SLACK);
  }

  private fits(r: number, t: number): boolean {
    return this.state.usedR + r <= this.budgetR && this.state.usedT + t <= this.budgetT * (1 + SLACK);
  }

  private maxOf(i: number): number {
    return this.upper === undefined ? this.input.maxN : this.upper[i]!;
  }

  /** The smallest group a jump from 0 may make. */
  private jumpMin(i: number): number {
    return this.lower === undefined ? this.input.minN : Math.max(1, this.lower[i]!);
  }

  /** f_i: tokens charged once when item i gets n > 0. */
  private fixed(i: number): number {
    return fixedTokensOf(this.input, i);
  }

  private unitCost(i: number): number {
    return this.wr + this.wt * this.input.tokensPerRollout[i]!;
  }

  private static ratio(g: number, cost: number): number {
    return cost > 0 ? g / cost : g > 0 ? Infinity : 0;
  }

  /** Key of item i's pending move on the phase's curves, or NaN when it has none. */
  private keyOf(i: number): number {
    const n = this.state.n[i]!;
    const maxN = this.maxOf(i);
    if (n >= maxN) return NaN;
    const cv = this.cv;
    const uc = this.unitCost(i);
    if (n > 0) {
      const g = cv.nextGain(i);
      this.gain[i] = g;
      return Filler.ratio(g, uc);
    }
    let m = this.jumpMin(i);
    if (m > maxN) return NaN;
    let v = cv.seek(i, m);
    let cost = m * uc + this.wt * this.fixed(i);
    while (m < maxN) {
      const g = cv.nextGain(i);
      if (!(Filler.ratio(g, uc) > Filler.ratio(v, cost))) break;
      cv.advance(i);
      v += g;
      cost += uc;
      m++;
    }
    this.jumpTo[i] = m;
    this.jumpValue[i] = v;
    return Filler.ratio(v, cost);
  }

  /** Takes item i's pending move (which must fit). */
  private take(i: number): void {
    const s = this.state;
    const n = s.n[i]!;
    const c = this.input.tokensPerRollout[i]!;
    if (n === 0) {
      const m = this.jumpTo[i]!;
      s.n[i] = m;
      if (this.track === undefined) s.objective += this.jumpValue[i]!;
      s.usedR += m;
      s.usedT += m * c + this.fixed(i);
      if (!this.primary) s.surplusRollouts += m;
    } else {
      if (this.track === undefined) s.objective += this.gain[i]!;
      this.cv.advance(i);
      s.n[i] = n + 1;
      s.usedR += 1;
      s.usedT += c;
      if (!this.primary) s.surplusRollouts += 1;
    }
  }

  private collect(i: number): void {
    const key = this.keyOf(i);
    if (key === key) {
      this.heap.append(key, i);
    }
  }

  /**
   * Fills the budget by `cv`'s moves, best value per unit cost first, counting the objective on
   * `track` (or `cv`). Stops when the best move's key falls below `saturation` × the best
   * first move's key, or nothing fits. The primary phase also notes the LP bound.
   */
  phase(cv: ValueCurves, track: ValueCurves | undefined, saturation: number): void {
    this.cv = cv;
    this.track = track;
    this.primary = track === undefined;
    const size = this.size;
    this.heap.clear();
    for (let i = 0; i < size; i++) this.collect(i);
    const saturated = saturation * this.heap.maxKey();
    if (size >= PRECOMMIT_MIN && this.input.precommit !== false) {
      // Above max(estimate, saturated) the heap would take every move in turn: commit them in
      // one pass (no move there is saturated, so the heap order could not have stopped
      // sooner). On large instances up to three rounds, each on the budget the last left,
      // so the heap only orders the last few percent. The sample walk leaves sampled items' pending moves
      // stale, so every round rebuilds them; a round that overspends is undone.
      let fresh = true;
      // Extra rounds pay only where the heap would be large (each re-walks the sample).
      const rounds = size >= 16 * PRECOMMIT_MIN ? 3 : 1;
      for (let round = 0; round < rounds && !this.spent(); round++) {
        const estimate = this.estimateThreshold(saturated);
        fresh = false;
        // NaN: by the sample, every move above the saturation floor fits; then the heap would
        // take them all, one pop each, and stop at the floor: take them in one pass instead.
        const lambda = estimate > 0 ? Math.max(estimate, saturated) : estimate !== estimate ? saturated : NaN;
        if (!(lambda > 0)) break;
        const checkpoint = this.checkpoint();
        this.heap.clear();
        if (!this.precommit(lambda)) {
          this.restore(checkpoint);
          break;
        }
        fresh = true;
        if (this.budgetR - this.state.usedR < size / 16) break;
      }
      if (!fresh) {
        this.heap.clear();
        for (let i = 0; i < size; i++) this.collect(i);
      }
    }
    this.heap.heapify();
    this.drain(saturated);
    if (this.primary && Number.isNaN(this.state.bound)) this.state.bound = this.state.objective;
    if (track !== undefined) this.settle(track);
  }

  /**
   * The objective on the primary curves after a phase keyed on others: each prompt's value at
   * its final n, from its cursor where it did not move (O(slots)), else by a seek (O(n)).
   */
  private settle(track: ValueCurves): void {
    const n = this.state.n;
    let total = 0;
    for (let i = 0; i < this.size; i++) {
      const x = n[i]!;
      if (x === 0) continue;
      total += track.cursorOf(i) === x ? track.current(i) : track.seek(i, x);
    }
    this.state.objective = total;
  }

  private noteBound(key: number): void {
    const s = this.state;
    if (!this.primary || (this.wr > 0 && this.wt > 0) || !Number.isNaN(s.bound)) return;
    const left = this.wr > 0 ? 1 - s.usedR * this.wr : 1 - s.usedT * this.wt;
    s.bound = s.objective + Math.max(0, left) * key;
  }

  /** The heap loop: pop the best move, take it if it fits, push the item's next move. */
  private drain(saturated: number): void {
    const { heap, input } = this;
    const c = input.tokensPerRollout;
    while (heap.size > 0) {
      const key = heap.topKey();
      const i = heap.topItem();
      if (!(key > 0) || key < saturated || this.spent()) {
        this.noteBound(Math.max(key, 0));
        break;
      }
      if (this.state.n[i]! === 0) {
        const m = this.jumpTo[i]!;
        if (!this.fits(m, m * c[i]! + this.fixed(i))) {
          this.noteBound(key);
          const roomR = this.budgetR - this.state.usedR;
          const roomT = c[i]! > 0 ? (this.budgetT * (1 + SLACK) - this.state.usedT - this.fixed(i)) / c[i]! : Infinity;
          const smaller = Math.min(m - 1, Math.floor(roomR), Math.floor(roomT));
          if (smaller < this.jumpMin(i)) {
            heap.pop();
            continue;
          }
          const v = this.cv.seek(i, smaller);
          this.jumpTo[i] = smaller;
          this.jumpValue[i] = v;
          heap.replaceTop(Filler.ratio(v, smaller * this.unitCost(i) + this.wt * this.fixed(i)), i);
          continue;
        }
      } else if (!this.fits(1, c[i]!)) {
        this.noteBound(key);
        heap.pop();
        continue;
      }
      this.take(i);
      const next = this.keyOf(i);
      if (next === next) heap.replaceTop(next, i);
      else heap.pop();
    }
  }

  private checkpoint(): { n: Int32Array; usedR: number; usedT: number; objective: number; surplusRollouts: number } {
    const s = this.state;
    return { n: Int32Array.from(s.n), usedR: s.usedR, usedT: s.usedT, objective: s.objective, surplusRollouts: s.surplusRollouts };
  }

  private restore(cp: ReturnType<Filler['checkpoint']>): void {
    const s = this.state;
    s.n.set(cp.n);
    s.usedR = cp.usedR;
    s.usedT = cp.usedT;
    s.objective = cp.objective;
    s.surplusRollouts = cp.surplusRollouts;
    for (let i = 0; i < this.size; i++) this.cv.seek(i, s.n[i]!);
  }

  /**
   * A ratio λ such that the moves above it very likely fit both budgets: where a
   * deterministic sample's cumulative cost, scaled to all prompts, reaches 90% of what is
   * left. Sampled items are walked down to the saturation `floor` and put back where they
   * were. O(sample · moves).
   */
  private estimateThreshold(floor: number): number {
    const { size, state, input } = this;
    const c = input.tokensPerRollout;
    // About size/16 prompts (256 to SAMPLE), each walked to max_n: a value that keeps paying
    // for deep groups (knapsack on hard prompts) is then counted in full.
    const stride = Math.ceil(size / Math.min(SAMPLE, Math.max(256, size >> 4)));
    const sampled = Math.ceil(size / stride);
    let most = input.maxN;
    if (this.upper !== undefined) for (let i = 0; i < size; i += stride) most = Math.max(most, this.upper[i]!);
    const room = sampled * (most + 1);
    const logRatios = new Float64Array(room);
    const costR = new Float64Array(room);
    const costT = new Float64Array(room);
    let m = 0;
    for (let i = 0; i < size; i += stride) {
      const n0 = state.n[i]!;
      while (state.n[i]! < this.maxOf(i)) {
        const key = this.keyOf(i);
        // Moves under the saturation floor are never taken in this phase: stop there.
        if (!(key > 0) || key < floor) break;
        const n = state.n[i]!;
        const r = n === 0 ? this.jumpTo[i]! : 1;
        logRatios[m] = Math.log(key);
        costR[m] = r;
        costT[m++] = r * c[i]! + (n === 0 ? this.fixed(i) : 0);
        if (n === 0) state.n[i] = this.jumpTo[i]!;
        else {
          this.cv.advance(i);
          state.n[i] = n + 1;
        }
      }
      state.n[i] = n0;
      this.cv.seek(i, n0);
    }
    const share = (sampled / size) * 0.9;
    const sample = { logRatios, costR, costT, count: m };
    return ratioWhereBudgetRunsOut(sample, (this.budgetR - state.usedR) * share, (this.budgetT - state.usedT) * share);
  }

  /**
   * Takes, for every item, all pending moves with a ratio above λ: exactly the moves the heap
   * would pop first, and collects each item's next move for the heap. Returns false (the
   * caller restores the checkpoint) if they overspend a budget, where the heap would have
   * dropped moves.
   */
  private precommit(lambda: number): boolean {
    const { state, cv, input } = this;
    const tracked = this.track !== undefined;
    const c = input.tokensPerRollout;
    for (let i = 0; i < this.size; i++) {
      while (state.n[i]! === 0) {
        const key = this.keyOf(i);
        if (!(key > lambda)) break;
        this.take(i);
      }
      let n = state.n[i]!;
      if (n === 0) {
        this.collect(i);
        continue;
      }
      const uc = this.unitCost(i);
      let g = NaN;
      let taken = 0;
      if (cv.advanceWhile !== undefined) {
        taken = cv.advanceWhile(i, uc, lambda, this.maxOf(i));
        if (!tracked) state.objective += cv.walkGain!;
        g = cv.walkNext!;
        n += taken;
      } else {
        const maxN = this.maxOf(i);
        while (n < maxN) {
          g = cv.nextGain(i);
          if (!(Filler.ratio(g, uc) > lambda)) break;
          if (!tracked) state.objective += g;
          cv.advance(i);
          n++;
          taken++;
          g = NaN;
        }
      }
      state.n[i] = n;
      state.usedR += taken;
      state.usedT += taken * c[i]!;
      if (!this.primary) state.surplusRollouts += taken;
      if (g === g) {
        this.gain[i] = g;
        this.heap.append(Filler.ratio(g, uc), i);
      }
    }
    return state.usedR <= this.budgetR && state.usedT <= this.budgetT * (1 + SLACK);
  }
}
