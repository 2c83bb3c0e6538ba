import type { ValueFunction } from './functions.js';

/**
 * Per-prompt value curves v_i(n), read by a solver through a cursor. This is the whole
 * interface between policy (what a rollout is worth) and mechanism (how the budget is filled).
 */
export interface ValueCurves {
  readonly size: number;
  /** v_i(n) from scratch, without touching the cursor. O(n). */
  value(i: number, n: number): number;
  /** Moves item i's cursor to n and returns v_i(n). O(n). */
  seek(i: number, n: number): number;
  /** v_i(cursor + 1) − v_i(cursor). O(terms). */
  nextGain(i: number): number;
  /** Moves the cursor one rollout up. O(terms). */
  advance(i: number): void;
  /** Where item i's cursor is. */
  cursorOf(i: number): number;
  /** v_i(cursor). O(terms). */
  current(i: number): number;
}

/**
 * How each prompt's pass rate enters the value: `beta` takes the exact expectation under
 * Beta(α_i, β_i); `point` plugs in one number p_i (a posterior mean or a Thompson draw).
 */
export type CurveMode = { kind: 'beta'; alpha: Float64Array; beta: Float64Array } | { kind: 'point'; p: Float64Array };

/**
 * Value curves of one value function for N prompts. Memory: 8·(terms + 1) + 4 bytes a prompt
 * beside the inputs.
 *
 * Beta mode uses E[p^A (1−p)^B] = Π_{i<A}(α+i)·Π_{j<B}(β+j) / Π_{k<A+B}(α+β+k) for integer
 * A, B (the ratio B(α+A, β+B)/B(α, β) expanded): every factor lies in (0, 1], so the product
 * never overflows, and raising A or B by one is one multiplication. `betaMoment` in
 * math/beta.ts is the log-space reference it is tested against.
 */
export class MonomialCurves implements ValueCurves {
  readonly size: number;
  private readonly k: number;
  private readonly coef: Float64Array;
  private readonly a: Int32Array;
  private readonly b: Int32Array;
  private readonly u: Uint8Array;
  private readonly w: Uint8Array;
  /** 1 where the term is multiplied by n (values that count rollouts). */
  private readonly e: Uint8Array;
  /** Indices of the terms that change with n (u, w or e set); constant terms never move. */
  private readonly moving: Int32Array;
  private readonly isBeta: boolean;
  private readonly alpha: Float64Array;
  private readonly beta: Float64Array;
  private readonly p: Float64Array;
  private readonly term: Float64Array;
  private readonly cursor: Int32Array;

  constructor(fn: ValueFunction, mode: CurveMode) {
    this.isBeta = mode.kind === 'beta';
    this.alpha = mode.kind === 'beta' ? mode.alpha : new Float64Array(0);
    this.beta = mode.kind === 'beta' ? mode.beta : new Float64Array(0);
    this.p = mode.kind === 'point' ? mode.p : new Float64Array(0);
    this.size = mode.kind === 'beta' ? mode.alpha.length : mode.p.length;
    this.k = fn.terms.length;
    this.coef = Float64Array.from(fn.terms, (t) => t.coef);
    this.a = Int32Array.from(fn.terms, (t) => t.a);
    this.b = Int32Array.from(fn.terms, (t) => t.b);
    this.u = Uint8Array.from(fn.terms, (t) => t.u);
    this.w = Uint8Array.from(fn.terms, (t) => t.w);
    this.e = Uint8Array.from(fn.terms, (t) => t.e ?? 0);
    if (fn.terms.some((t) => t.u === 1 && t.w === 1)) throw new Error(`${fn.name}: a term may grow in p or in 1−p with n, not both`);
    this.moving = Int32Array.from(fn.terms.flatMap((t, i) => (t.u === 1 || t.w === 1 || t.e === 1 ? [i] : [])));
    this.term = new Float64Array(this.size * this.k);
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

  value(i: number, n: number): number {
    if (n <= 0) return 0;
    let total = 0;
    for (let t = 0; t < this.k; t++) {
      total += this.coef[t]! * (this.e[t] === 1 ? n : 1) * this.moment(i, this.a[t]! + this.u[t]! * n, this.b[t]! + this.w[t]! * n);
    }
    return total;
  }

  seek(i: number, n: number): number {
    const base = i * this.k;
    for (let t = 0; t < this.k; t++) {
      this.term[base + t] = this.moment(i, this.a[t]! + this.u[t]! * n, this.b[t]! + this.w[t]! * n);
    }
    this.cursor[i] = n;
    return this.current(i);
  }

  cursorOf(i: number): number {
    return this.cursor[i]!;
  }

  current(i: number): number {
    const n = this.cursor[i]!;
    if (n <= 0) return 0;
    const base = i * this.k;
    let total = 0;
    for (let t = 0; t < this.k; t++) total += this.coef[t]! * (this.e[t] === 1 ? n : 1) * this.term[base + t]!;
    return total;
  }

  /**
   * Relative change of moving term t of prompt i from n to n + 1, factor − 1:
   * beta mode, p-term: (α+A)/(α+β+A+B) − 1 = −(β+B)/(α+β+A+B); (1−p)-term: −(α+A)/(…);
   * point mode: p − 1 or −p.
   */
  private step(i: number, t: number, n: number): number {
    const u = this.u[t]!;
    if (u === 0 && this.w[t] === 0) return 0;
    if (!this.isBeta) {
      const p = this.p[i]!;
      return u === 1 ? p - 1 : -p;
    }
    const al = this.alpha[i]!;
    const be = this.beta[i]!;
    const A = this.a[t]! + u * n;
    const B = this.b[t]! + (1 - u) * n;
    return -(u === 1 ? be + B : al + A) / (al + be + A + B);
  }

  nextGain(i: number): number {
    const n = this.cursor[i]!;
    const base = i * this.k;
    if (n <= 0) {
      let total = 0;
      for (let t = 0; t < this.k; t++) total += this.coef[t]! * this.term[base + t]! * (1 + this.step(i, t, n));
      return total;
    }
    // Term t contributes coef·n^e·T(n); with T(n+1) = T(n)·(1 + s): gain coef·T·s, or
    // coef·T·((n+1)(1 + s) − n) when the term is multiplied by n.
    let gain = 0;
    for (let j = 0; j < this.moving.length; j++) {
      const t = this.moving[j]!;
      const s = this.step(i, t, n);
      gain += this.coef[t]! * this.term[base + t]! * (this.e[t] === 1 ? (n + 1) * (1 + s) - n : s);
    }
    return gain;
  }

  advance(i: number): void {
    const n = this.cursor[i]!;
    const base = i * this.k;
    for (let j = 0; j < this.moving.length; j++) {
      const t = this.moving[j]!;
      this.term[base + t] = this.term[base + t]! * (1 + this.step(i, t, n));
    }
    this.cursor[i] = n + 1;
  }
}
