import type { ValueCurves } from '../value/types.js';
import { startOf } from './bounds.js';
import { MaxHeap } from './heap.js';
import { drainPlateau } from './plateau.js';
import { PRECOMMIT_MIN, precommitRounds } from './precommit.js';
import { fixedTokensOf, moveRatio, SLACK, type SolverInput } from './types.js';

export { SLACK } from './types.js';
/** Fewest moves sharing the top key that drainPlateau takes at once (and at least 1/16 of the heap). */
const PLATEAU_MIN = 256;

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
  readonly size: number;
  private readonly wr: number;
  private readonly wt: number;
  /** Per-prompt bounds when the input has them (solver/bounds.ts). */
  private readonly lower: Int32Array | undefined;
  readonly upper: Int32Array | undefined;
  /** Pending move per item: gain of the next rollout, or the jump 0 → jumpTo worth jumpValue. */
  readonly gain: Float64Array;
  readonly jumpTo: Int32Array;
  private readonly jumpValue: Float64Array;
  readonly heap: MaxHeap;
  private readonly cheapest: number;
  cv: ValueCurves;
  track: ValueCurves | undefined;
  primary = true;

  constructor(
    readonly input: SolverInput,
    readonly budgetR: number,
    readonly budgetT: number,
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
    return this.spentAt(this.state.usedR, this.state.usedT);
  }

  /** spent() had the state used usedR rollouts and usedT tokens. */
  spentAt(usedR: number, usedT: number): boolean {
    return usedR + 1 > this.budgetR || usedT + this.cheapest > this.budgetT * (1 + SLACK);
  }

  fits(r: number, t: number): boolean {
    return this.fitsAt(this.state.usedR, this.state.usedT, r, t);
  }

  /** fits(r, t) had the state used usedR rollouts and usedT tokens. */
  fitsAt(usedR: number, usedT: number, r: number, t: number): boolean {
    return usedR + r <= this.budgetR && usedT + t <= this.budgetT * (1 + SLACK);
  }

  maxOf(i: number): number {
    return this.upper === undefined ? this.input.maxN : this.upper[i]!;
  }

  /** The smallest group a jump from 0 may make. */
  private jumpMin(i: number): number {
    return this.lower === undefined ? this.input.minN : Math.max(1, this.lower[i]!);
  }

  /** f_i: tokens charged once when item i gets n > 0. */
  fixed(i: number): number {
    return fixedTokensOf(this.input, i);
  }

  unitCost(i: number): number {
    return this.wr + this.wt * this.input.tokensPerRollout[i]!;
  }

  static ratio(g: number, cost: number): number {
    return moveRatio(g, cost);
  }

  /** Key of item i's pending move on the phase's curves, or NaN when it has none. */
  keyOf(i: number): number {
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
  take(i: number): void {
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

  collect(i: number): void {
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
    if (size >= PRECOMMIT_MIN && this.input.precommit !== false) precommitRounds(this, saturated); // solver/precommit.ts
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

  noteBound(key: number): void {
    const s = this.state;
    if (!this.primary || (this.wr > 0 && this.wt > 0) || !Number.isNaN(s.bound)) return;
    const left = this.wr > 0 ? 1 - s.usedR * this.wr : 1 - s.usedT * this.wt;
    s.bound = s.objective + Math.max(0, left) * key;
  }

  /**
   * The heap loop: pop the best move, take it if it fits, push the item's next move. Where
   * many moves share the top key (a fresh state: every prompt has the same prior), they are
   * taken by drainPlateau in the heap's own order without a pop each.
   */
  private drain(saturated: number): void {
    const { heap, input } = this;
    const c = input.tokensPerRollout;
    let checked = NaN;
    while (heap.size > 0) {
      const key = heap.topKey();
      if (key !== checked) {
        checked = key;
        if (key > 0 && key >= saturated && this.input.plateau !== false && heap.plateauAtLeast(Math.max(PLATEAU_MIN, heap.size >> 4))) {
          // Spent: drainPlateau would stop at its first move (without ordering the plateau).
          if (this.spent()) {
            this.noteBound(key);
            return;
          }
          if (drainPlateau(this, key)) return; // solver/plateau.ts
          continue;
        }
      }
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
}
