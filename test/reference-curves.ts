import type { Monomial, ValueFunction } from '../src/value/functions.js';
import { slotsOf, WIDE, type Slots } from '../src/value/slots.js';
import type { CurveMode, ValueCurves } from '../src/value/types.js';

/**
 * Value curves of one value function for N prompts. Memory: 8·(slots + 1 (+ 1 with a per-n
 * constant)) + 4 bytes a prompt beside the inputs, allocated on the first seek or value, so
 * curves a solver never reads (surplus curves when nothing saturates) cost none.
 *
 * Beta mode uses E[p^A (1−p)^B] = Π_{i<A}(α+i)·Π_{j<B}(β+j) / Π_{k<A+B}(α+β+k) for integer
 * A, B (the ratio B(α+A, β+B)/B(α, β) expanded): every factor lies in (0, 1], so the product
 * never overflows, and raising A or B by one is one multiplication. `betaMoment` in
 * math/beta.ts is the log-space reference it is tested against.
 */
export class ReferenceCurves implements ValueCurves {
  readonly size: number;
  /** Moving slots (slots.ts): one per distinct moment p^(a+u·n)·q^(b+w·n), weighted (c0 + c1·n). */
  private readonly k: number;
  private readonly c0: Float64Array;
  private readonly c1: Float64Array;
  private readonly a: Int32Array;
  private readonly b: Int32Array;
  private readonly u: Uint8Array;
  private readonly constTerms: readonly Monomial[];
  private readonly hasPerN: boolean;
  private readonly isBeta: boolean;
  private readonly alpha: Float64Array;
  private readonly beta: Float64Array;
  private readonly p: Float64Array;
  /** Per-prompt storage, empty until storage() runs. */
  private term = new Float64Array(0);
  private base = new Float64Array(0);
  private perN = new Float64Array(0);
  private cursor = new Int32Array(0);
  private readonly group: Int32Array;
  private readonly groupAb: Int32Array;
  private readonly inv: Float64Array;
  /** Factors 1 + s of every slot for (facItem, facN), shared by nextGain and advance. */
  private readonly fac: Float64Array;
  private facItem = -1;
  private facN = -1;
  private readonly scratch: Float64Array;
  private readonly nums: Float64Array;
  private readonly wide: Slots['wide'];
  walkGain = 0;
  walkNext = NaN;

  constructor(fn: ValueFunction, mode: CurveMode) {
    this.isBeta = mode.kind === 'beta';
    this.alpha = mode.kind === 'beta' ? mode.alpha : new Float64Array(0);
    this.beta = mode.kind === 'beta' ? mode.beta : new Float64Array(0);
    this.p = mode.kind === 'point' ? mode.p : new Float64Array(0);
    this.size = mode.kind === 'beta' ? mode.alpha.length : mode.p.length;
    const slots = slotsOf(fn);
    this.k = slots.k;
    this.c0 = slots.c0;
    this.c1 = slots.c1;
    this.a = slots.a;
    this.b = slots.b;
    this.u = slots.u;
    this.group = slots.group;
    this.groupAb = slots.groupAb;
    this.constTerms = slots.constTerms;
    this.hasPerN = slots.hasPerN;
    this.wide = slots.wide;
    this.inv = new Float64Array(slots.groupAb.length);
    this.fac = new Float64Array(Math.max(this.k, WIDE));
    this.scratch = new Float64Array(this.k);
    this.nums = new Float64Array(this.k);
  }

  /** Allocates the per-prompt storage on first use. */
  private storage(): void {
    if (this.base.length === this.size) return;
    this.term = new Float64Array(this.size * this.k);
    this.base = new Float64Array(this.size).fill(NaN);
    this.perN = new Float64Array(this.hasPerN ? this.size : 0);
    this.cursor = new Int32Array(this.size);
  }

  /** E[p^A (1−p)^B] (beta mode) or p^A (1−p)^B (point mode) for prompt i. O(A + B). */
  moment(i: number, A: number, B: number): number {
    if (!this.isBeta) {
      const p = this.p[i]!;
      return Math.pow(p, A) * Math.pow(1 - p, B);
    }
    const al = this.alpha[i]!;
    const be = this.beta[i]!;
    let r = 1;
    for (let x = 0; x < A; x++) r *= (al + x) / (al + be + x);
    for (let y = 0; y < B; y++) r *= (be + y) / (al + be + A + y);
    return r;
  }

  /** Folds prompt i's constant terms once. */
  private constants(i: number): void {
    this.storage();
    if (this.base[i] === this.base[i]) return;
    let base = 0;
    let perN = 0;
    for (const t of this.constTerms) {
      const v = t.coef * this.moment(i, t.a, t.b);
      if (t.e === 1) perN += v;
      else base += v;
    }
    this.base[i] = base;
    if (this.hasPerN) this.perN[i] = perN;
  }

  value(i: number, n: number): number {
    if (n <= 0) return 0;
    this.constants(i);
    let total = this.base[i]! + (this.hasPerN ? n * this.perN[i]! : 0);
    for (let t = 0; t < this.k; t++) {
      const u = this.u[t]!;
      total += (this.c0[t]! + this.c1[t]! * n) * this.moment(i, this.a[t]! + u * n, this.b[t]! + (1 - u) * n);
    }
    return total;
  }

  seek(i: number, n: number): number {
    this.constants(i);
    const at = i * this.k;
    for (let t = 0; t < this.k; t++) {
      const u = this.u[t]!;
      this.term[at + t] = this.moment(i, this.a[t]! + u * n, this.b[t]! + (1 - u) * n);
    }
    this.cursor[i] = n;
    return this.current(i);
  }

  cursorOf(i: number): number {
    return this.cursor[i] ?? 0;
  }

  current(i: number): number {
    const n = this.cursorOf(i);
    if (n <= 0) return 0;
    const at = i * this.k;
    let total = this.base[i]! + (this.hasPerN ? n * this.perN[i]! : 0);
    for (let t = 0; t < this.k; t++) total += (this.c0[t]! + this.c1[t]! * n) * this.term[at + t]!;
    return total;
  }

  /**
   * Fills fac[t] = T_t(n+1)/T_t(n) for prompt i at n, every slot at once. Beta mode: a p-slot
   * gains (α+A)/(α+β+A+B), a (1−p)-slot (β+B)/(α+β+A+B), written 1 − (β+B)·inv and
   * 1 − (α+A)·inv with inv = 1/(α+β+a+b+n) (the same number for slots of one group, so
   * up to WIDE slots compute it per slot, straight-line); point mode: p or 1 − p.
   */
  private factors(i: number, n: number): Float64Array {
    const fac = this.fac;
    if (this.facItem === i && this.facN === n) return fac;
    this.facItem = i;
    this.facN = n;
    if (!this.isBeta) {
      const p = this.p[i]!;
      for (let t = 0; t < this.k; t++) fac[t] = this.u[t] === 1 ? p : 1 - p;
      return fac;
    }
    const al = this.alpha[i]!;
    const be = this.beta[i]!;
    const sum = al + be + n;
    const w = this.wide;
    if (w !== undefined) {
      // Straight-line, as in walkWide: 1/(sum + a + b) per slot is its group's reciprocal.
      const { u, a, b, ab } = w;
      fac[0] = 1 - (u[0] === 1 ? be + b[0] : al + a[0]) * (1 / (sum + ab[0]));
      fac[1] = 1 - (u[1] === 1 ? be + b[1] : al + a[1]) * (1 / (sum + ab[1]));
      fac[2] = 1 - (u[2] === 1 ? be + b[2] : al + a[2]) * (1 / (sum + ab[2]));
      fac[3] = 1 - (u[3] === 1 ? be + b[3] : al + a[3]) * (1 / (sum + ab[3]));
      fac[4] = 1 - (u[4] === 1 ? be + b[4] : al + a[4]) * (1 / (sum + ab[4]));
      fac[5] = 1 - (u[5] === 1 ? be + b[5] : al + a[5]) * (1 / (sum + ab[5]));
      return fac;
    }
    for (let g = 0; g < this.inv.length; g++) this.inv[g] = 1 / (sum + this.groupAb[g]!);
    for (let t = 0; t < this.k; t++) {
      const inv = this.inv[this.group[t]!]!;
      fac[t] = this.u[t] === 1 ? 1 - (be + this.b[t]!) * inv : 1 - (al + this.a[t]!) * inv;
    }
    return fac;
  }

  /**
   * v(n+1) − v(n). Slot t contributes (c0 + c1·n)·T(n) with T(n+1) = T(n)·f: its gain is
   * T·(c0·(f − 1) + c1·((n+1)·f − n)); constants add perN. O(slots).
   */
  nextGain(i: number): number {
    const n = this.cursor[i]!;
    const at = i * this.k;
    const fac = this.factors(i, n);
    if (n <= 0) {
      let total = this.base[i]! + (this.hasPerN ? this.perN[i]! : 0);
      for (let t = 0; t < this.k; t++) total += (this.c0[t]! + this.c1[t]!) * this.term[at + t]! * fac[t]!;
      return total;
    }
    let gain = this.hasPerN ? this.perN[i]! : 0;
    for (let t = 0; t < this.k; t++) {
      const f = fac[t]!;
      const c1 = this.c1[t]!;
      gain += this.term[at + t]! * (this.c0[t]! * (f - 1) + (c1 === 0 ? 0 : c1 * ((n + 1) * f - n)));
    }
    return gain;
  }

  /**
   * nextGain → advance in one tight loop for n ≥ 1 (see ValueCurves.advanceWhile): the
   * prompt's slots stay in a scratch buffer, and in beta mode each slot's numerator (β+b or
   * α+a) is fixed, so a step costs one reciprocal per denominator group and a few
   * multiply-adds a slot.
   */
  advanceWhile(i: number, unitCost: number, lambda: number, maxN: number): number {
    const start = this.cursor[i]!;
    this.walkGain = 0;
    this.walkNext = NaN;
    if (start <= 0) return 0;
    if (this.wide !== undefined) return this.walkWide(i, start, unitCost, lambda, maxN);
    const k = this.k;
    const at = i * k;
    const T = this.scratch;
    const nums = this.nums;
    const fac = this.fac;
    const c0 = this.c0;
    const c1 = this.c1;
    const term = this.term;
    for (let t = 0; t < k; t++) T[t] = term[at + t]!;
    const perN = this.hasPerN ? this.perN[i]! : 0;
    let n = start;
    let total = 0;
    let next = NaN;
    if (this.isBeta) {
      const al = this.alpha[i]!;
      const be = this.beta[i]!;
      const group = this.group;
      const groupAb = this.groupAb;
      const inv = this.inv;
      const groups = inv.length;
      for (let t = 0; t < k; t++) nums[t] = this.u[t] === 1 ? be + this.b[t]! : al + this.a[t]!;
      while (n < maxN) {
        const sum = al + be + n;
        for (let g = 0; g < groups; g++) inv[g] = 1 / (sum + groupAb[g]!);
        let gain = perN;
        for (let t = 0; t < k; t++) {
          const f = 1 - nums[t]! * inv[group[t]!]!;
          fac[t] = f;
          gain += T[t]! * (c0[t]! * (f - 1) + c1[t]! * ((n + 1) * f - n));
        }
        if (!((unitCost > 0 ? gain / unitCost : gain > 0 ? Infinity : 0) > lambda)) {
          next = gain;
          break;
        }
        total += gain;
        for (let t = 0; t < k; t++) T[t] = T[t]! * fac[t]!;
        n++;
      }
    } else {
      const p = this.p[i]!;
      for (let t = 0; t < k; t++) nums[t] = this.u[t] === 1 ? p : 1 - p;
      while (n < maxN) {
        let gain = perN;
        for (let t = 0; t < k; t++) {
          const f = nums[t]!;
          gain += T[t]! * (c0[t]! * (f - 1) + c1[t]! * ((n + 1) * f - n));
        }
        if (!((unitCost > 0 ? gain / unitCost : gain > 0 ? Infinity : 0) > lambda)) {
          next = gain;
          break;
        }
        total += gain;
        for (let t = 0; t < k; t++) T[t] = T[t]! * nums[t]!;
        n++;
      }
    }
    for (let t = 0; t < k; t++) term[at + t] = T[t]!;
    this.cursor[i] = n;
    this.facItem = -1;
    this.walkGain = total;
    this.walkNext = next;
    return n - start;
  }

  /**
   * advanceWhile for up to WIDE slots, each slot in its own local: the same arithmetic in the
   * same order as the loop over slots (padding slots add exactly 0), about 3× as fast in V8,
   * which keeps the locals in registers but reloads and bounds-checks typed arrays each step.
   */
  private walkWide(i: number, start: number, unitCost: number, lambda: number, maxN: number): number {
    const { c0, c1, ab, u, a, b } = this.wide!;
    const k = this.k;
    const at = i * k;
    const term = this.term;
    let T0 = term[at]!;
    let T1 = k > 1 ? term[at + 1]! : 0;
    let T2 = k > 2 ? term[at + 2]! : 0;
    let T3 = k > 3 ? term[at + 3]! : 0;
    let T4 = k > 4 ? term[at + 4]! : 0;
    let T5 = k > 5 ? term[at + 5]! : 0;
    // Indexed reads: array destructuring takes V8's iterator path, a quarter of a short walk.
    const a0 = c0[0], a1 = c0[1], a2 = c0[2], a3 = c0[3], a4 = c0[4], a5 = c0[5];
    const b0 = c1[0], b1 = c1[1], b2 = c1[2], b3 = c1[3], b4 = c1[4], b5 = c1[5];
    const g0 = ab[0], g1 = ab[1], g2 = ab[2], g3 = ab[3], g4 = ab[4], g5 = ab[5];
    const beta = this.isBeta;
    const al = beta ? this.alpha[i]! : 0;
    const be = beta ? this.beta[i]! : 0;
    const p = beta ? 0 : this.p[i]!;
    // Numerators (beta mode: f = 1 − num/(α+β+a+b+n)) or the factors themselves (point mode).
    const num = (t: number) => (beta ? (u[t] === 1 ? be + b[t]! : al + a[t]!) : u[t] === 1 ? p : 1 - p);
    const m0 = num(0), m1 = num(1), m2 = num(2), m3 = num(3), m4 = num(4), m5 = num(5);
    const perN = this.hasPerN ? this.perN[i]! : 0;
    let n = start;
    let total = 0;
    let next = NaN;
    while (n < maxN) {
      let f0 = m0, f1 = m1, f2 = m2, f3 = m3, f4 = m4, f5 = m5;
      if (beta) {
        const sum = al + be + n;
        f0 = 1 - m0 * (1 / (sum + g0));
        f1 = 1 - m1 * (1 / (sum + g1));
        f2 = 1 - m2 * (1 / (sum + g2));
        f3 = 1 - m3 * (1 / (sum + g3));
        f4 = 1 - m4 * (1 / (sum + g4));
        f5 = 1 - m5 * (1 / (sum + g5));
      }
      const n1 = n + 1;
      let gain = perN;
      gain += T0 * (a0 * (f0 - 1) + b0 * (n1 * f0 - n));
      gain += T1 * (a1 * (f1 - 1) + b1 * (n1 * f1 - n));
      gain += T2 * (a2 * (f2 - 1) + b2 * (n1 * f2 - n));
      gain += T3 * (a3 * (f3 - 1) + b3 * (n1 * f3 - n));
      gain += T4 * (a4 * (f4 - 1) + b4 * (n1 * f4 - n));
      gain += T5 * (a5 * (f5 - 1) + b5 * (n1 * f5 - n));
      if (!((unitCost > 0 ? gain / unitCost : gain > 0 ? Infinity : 0) > lambda)) {
        next = gain;
        break;
      }
      total += gain;
      T0 *= f0;
      T1 *= f1;
      T2 *= f2;
      T3 *= f3;
      T4 *= f4;
      T5 *= f5;
      n++;
    }
    term[at] = T0;
    if (k > 1) term[at + 1] = T1;
    if (k > 2) term[at + 2] = T2;
    if (k > 3) term[at + 3] = T3;
    if (k > 4) term[at + 4] = T4;
    if (k > 5) term[at + 5] = T5;
    this.cursor[i] = n;
    this.facItem = -1;
    this.walkGain = total;
    this.walkNext = next;
    return n - start;
  }

  advance(i: number): void {
    const n = this.cursor[i]!;
    const at = i * this.k;
    const fac = this.factors(i, n);
    for (let t = 0; t < this.k; t++) this.term[at + t] = this.term[at + t]! * fac[t]!;
    this.cursor[i] = n + 1;
    this.facItem = -1;
  }
}
