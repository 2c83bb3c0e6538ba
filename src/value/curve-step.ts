import type { Slots } from './slots.js';

// One rollout's step of a prompt's value curve (value/curves.ts MonomialCurves), as free
// functions of the prompt's parameters: its moments, the factors that move them one rollout, and
// the gain of that rollout. curve-walk.ts runs many steps in one loop with the same arithmetic.

/**
 * E[p^A (1−p)^B] = Π_{x<A}(α+x)/(α+β+x) · Π_{y<B}(β+y)/(α+β+A+y) in beta mode (every factor in
 * (0, 1]: no overflow), p^A (1−p)^B in point mode. `betaMoment` in math/beta.ts is the log-space
 * reference it is tested against. O(A + B).
 */
export function monomialMoment(isBeta: boolean, al: number, be: number, p: number, A: number, B: number): number {
  if (!isBeta) return Math.pow(p, A) * Math.pow(1 - p, B);
  let r = 1;
  for (let x = 0; x < A; x++) r *= (al + x) / (al + be + x);
  for (let y = 0; y < B; y++) r *= (be + y) / (al + be + A + y);
  return r;
}

/**
 * Fills s.fac[t] = T_t(n+1)/T_t(n) for a prompt at n, every slot at once, and returns s.fac.
 * Beta mode: a p-slot gains (α+A)/(α+β+A+B), a (1−p)-slot (β+B)/(α+β+A+B), written 1 − (β+B)·inv
 * and 1 − (α+A)·inv with inv = 1/(α+β+a+b+n) (the same number for slots of one group, so up to
 * WIDE slots compute it per slot, straight-line); point mode: p or 1 − p. O(slots).
 */
export function stepFactors(slots: Slots, s: { readonly inv: Float64Array; readonly fac: Float64Array }, isBeta: boolean, al: number, be: number, p: number, n: number): Float64Array {
  const fac = s.fac;
  const { k, u, a, b } = slots;
  if (!isBeta) {
    for (let t = 0; t < k; t++) fac[t] = u[t] === 1 ? p : 1 - p;
    return fac;
  }
  const sum = al + be + n;
  const w = slots.wide;
  if (w !== undefined) {
    // Straight-line, as in walkWide: 1/(sum + a + b) per slot is its group's reciprocal.
    fac[0] = 1 - (w.u[0] === 1 ? be + w.b[0] : al + w.a[0]) * (1 / (sum + w.ab[0]));
    fac[1] = 1 - (w.u[1] === 1 ? be + w.b[1] : al + w.a[1]) * (1 / (sum + w.ab[1]));
    fac[2] = 1 - (w.u[2] === 1 ? be + w.b[2] : al + w.a[2]) * (1 / (sum + w.ab[2]));
    fac[3] = 1 - (w.u[3] === 1 ? be + w.b[3] : al + w.a[3]) * (1 / (sum + w.ab[3]));
    fac[4] = 1 - (w.u[4] === 1 ? be + w.b[4] : al + w.a[4]) * (1 / (sum + w.ab[4]));
    fac[5] = 1 - (w.u[5] === 1 ? be + w.b[5] : al + w.a[5]) * (1 / (sum + w.ab[5]));
    return fac;
  }
  const inv = s.inv;
  const { group, groupAb } = slots;
  for (let g = 0; g < inv.length; g++) inv[g] = 1 / (sum + groupAb[g]!);
  for (let t = 0; t < k; t++) {
    const x = inv[group[t]!]!;
    fac[t] = u[t] === 1 ? 1 - (be + b[t]!) * x : 1 - (al + a[t]!) * x;
  }
  return fac;
}

/**
 * v(n+1) − v(n) from the moments T(n) at `term[at ..]` and the factors `fac` (stepFactors). Slot
 * t contributes (c0 + c1·n)·T(n) with T(n+1) = T(n)·f: its gain is T·(c0·(f − 1) + c1·((n+1)·f −
 * n)); the constant terms add `perN` (0 without one). At n = 0 the value is v(1) whole: `base` +
 * `perN` + Σ (c0 + c1)·T·f. O(slots).
 */
export function stepGain(slots: Slots, term: Float64Array, at: number, fac: Float64Array, base: number, perN: number, n: number): number {
  const { k, c0, c1 } = slots;
  if (n <= 0) {
    let total = base + perN;
    for (let t = 0; t < k; t++) total += (c0[t]! + c1[t]!) * term[at + t]! * fac[t]!;
    return total;
  }
  let gain = perN;
  for (let t = 0; t < k; t++) {
    const f = fac[t]!;
    const d = c1[t]!;
    gain += term[at + t]! * (c0[t]! * (f - 1) + (d === 0 ? 0 : d * ((n + 1) * f - n)));
  }
  return gain;
}
