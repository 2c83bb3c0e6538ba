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
  private readonly e: Uint8Array;
  private readonly term: Float64Array;
  private readonly cursor: Int32Array;

  constructor(
    fn: ValueFunction,
    private readonly mode: CurveMode,
  ) {
    this.size = mode.kind === 'beta' ? mode.alpha.length : mode.p.length;
    this.k = fn.terms.length;
    this.coef = Float64Array.from(fn.terms, (t) => t.coef);
    this.a = Int32Array.from(fn.terms, (t) => t.a);
    this.b = Int32Array.from(fn.terms, (t) => t.b);
    this.u = Uint8Array.from(fn.terms, (t) => t.u);
    this.w = Uint8Array.from(fn.terms, (t) => t.w);
    this.e = Uint8Array.from(fn.terms, (t) => t.e ?? 0);
    this.term = new Float64Array(this.size * this.k);
    this.cursor = new Int32Array(this.size);
  }

  /** E[p^A (1−p)^B] (beta mode) or p^A (1−p)^B (point mode) for prompt i. O(A + B). */
  moment(i: number, A: number, B: number): number {
    if (this.mode.kind === 'point') {
      const p = this.mode.p[i]!;
      return Math.pow(p, A) * Math.pow(1 - p, B);
    }
    const al = this.mode.alpha[i]!;
    const be = this.mode.beta[i]!;
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
    return this.currentValue(i);
  }

  private currentValue(i: number): number {
    const n = this.cursor[i]!;
    if (n <= 0) return 0;
    const base = i * this.k;
    let total = 0;
    for (let t = 0; t < this.k; t++) total += this.coef[t]! * (this.e[t] === 1 ? n : 1) * this.term[base + t]!;
    return total;
  }

  /** The factor that takes term t of prompt i from n to n + 1. */
  private factor(i: number, t: number, n: number): number {
    const u = this.u[t]!;
    const w = this.w[t]!;
    if (u === 0 && w === 0) return 1;
    if (this.mode.kind === 'point') {
      const p = this.mode.p[i]!;
      return u === 1 ? p : 1 - p;
    }
    const al = this.mode.alpha[i]!;
    const be = this.mode.beta[i]!;
    const A = this.a[t]! + u * n;
    const B = this.b[t]! + w * n;
    return u === 1 ? (al + A) / (al + be + A + B) : (be + B) / (al + be + A + B);
  }

  nextGain(i: number): number {
    const n = this.cursor[i]!;
    const base = i * this.k;
    let next = 0;
    for (let t = 0; t < this.k; t++) next += this.coef[t]! * (this.e[t] === 1 ? n + 1 : 1) * this.term[base + t]! * this.factor(i, t, n);
    return next - this.currentValue(i);
  }

  advance(i: number): void {
    const n = this.cursor[i]!;
    const base = i * this.k;
    for (let t = 0; t < this.k; t++) this.term[base + t] = this.term[base + t]! * this.factor(i, t, n);
    this.cursor[i] = n + 1;
  }
}
