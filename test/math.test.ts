import { describe, expect, it } from 'vitest';
import seedrandom from 'seedrandom';
import jstatPkg from 'jstat';
import {
  MonomialCurves, betaDraw, betaMoment, betaQuantile, betaQuantileFast, createValueRegistry, knapsackValue, valueAt, type ValueFunction,
} from '../src/index.js';

const { jStat } = jstatPkg;

/** ∫ f(p) Beta(p; a, b) dp by the midpoint rule on a fine grid (independent reference). */
function integrate(f: (p: number) => number, a: number, b: number, steps = 200_000): number {
  let total = 0;
  const lb = jStat.betaln(a, b);
  for (let k = 0; k < steps; k++) {
    const p = (k + 0.5) / steps;
    total += f(p) * Math.exp((a - 1) * Math.log(p) + (b - 1) * Math.log(1 - p) - lb);
  }
  return total / steps;
}

describe('Beta moments', () => {
  it('E[p^a (1-p)^b] matches numeric integration', () => {
    for (const [al, be, a, b] of [[2, 3, 1, 2], [1.5, 4.2, 5, 0], [3.3, 2.1, 0, 7], [5, 5, 4, 4]] as const) {
      const exact = betaMoment(al, be, a, b);
      const numeric = integrate((p) => p ** a * (1 - p) ** b, al, be);
      expect(Math.abs(exact - numeric)).toBeLessThan(1e-6);
    }
  });

  it('stays finite and accurate in log space for large α, β (where a pdf would underflow)', () => {
    const m = betaMoment(4000, 6000, 3, 2);
    // E[p^3 (1-p)^2] ≈ 0.4^3 · 0.6^2 for a posterior this concentrated.
    expect(m).toBeGreaterThan(0);
    expect(Math.abs(m / (0.4 ** 3 * 0.6 ** 2) - 1)).toBeLessThan(2e-3);
  });

  it('the curves product form equals the log-space reference for exponents up to 70', () => {
    const curves = new MonomialCurves(knapsackValue, { kind: 'beta', alpha: Float64Array.of(0.35, 40), beta: Float64Array.of(0.7, 3) });
    for (const i of [0, 1]) {
      const al = i === 0 ? 0.35 : 40;
      const be = i === 0 ? 0.7 : 3;
      for (const [A, B] of [[0, 0], [1, 2], [65, 2], [1, 66], [70, 0]] as const) {
        const ref = betaMoment(al, be, A, B);
        expect(Math.abs(curves.moment(i, A, B) - ref)).toBeLessThanOrEqual(1e-12 + 1e-9 * ref);
      }
    }
  });
});

describe('value curves', () => {
  const registry = createValueRegistry();
  it('bayes value equals ∫ v(p, n) Beta(p) dp for every registered value', () => {
    for (const name of registry.names()) {
      const fn = registry.get(name);
      const curves = new MonomialCurves(fn, { kind: 'beta', alpha: Float64Array.of(1.3), beta: Float64Array.of(2.7) });
      for (const n of [1, 2, 5, 16]) {
        const numeric = integrate((p) => valueAt(fn, p, n), 1.3, 2.7, 50_000);
        expect(Math.abs(curves.value(0, n) - numeric), `${name} n=${n}`).toBeLessThan(1e-6);
      }
    }
  });

  it('point value matches the published formulas', () => {
    const p = 0.3;
    const q = 0.7;
    for (const n of [1, 2, 8]) {
      expect(valueAt(registry.get('knapsack'), p, n)).toBeCloseTo((1 - p ** n - q ** n) * p * q * q, 12);
      expect(valueAt(registry.get('informative'), p, n)).toBeCloseTo(1 - p ** n - q ** n, 12);
      expect(valueAt(registry.get('variance'), p, n)).toBeCloseTo((1 - p ** n - q ** n) * p * q, 12);
      expect(valueAt(registry.get('hit'), p, n)).toBeCloseTo(1 - q ** n, 12);
    }
  });

  it('seek/nextGain/advance walk the same curve as value(); gains are concave for n ≥ 1 except balanced', () => {
    let concaveChecked = 0;
    for (const name of registry.names()) {
      const curves = new MonomialCurves(registry.get(name), { kind: 'beta', alpha: Float64Array.of(0.4), beta: Float64Array.of(3.1) });
      let v = curves.seek(0, 1);
      let lastGain = Infinity;
      for (let n = 1; n < 64; n++) {
        const g = curves.nextGain(0);
        // `balanced` has a term n·I(n) that grows with n: documented as not concave.
        if (name !== 'balanced') {
          expect(g, name).toBeLessThanOrEqual(lastGain + 1e-15);
          concaveChecked++;
        }
        lastGain = g;
        curves.advance(0);
        v += g;
        expect(Math.abs(v - curves.value(0, n + 1)), name).toBeLessThan(1e-12);
      }
    }
    expect(concaveChecked).toBe(4 * 63);
  });

  it('advanceWhile walks exactly as nextGain → advance does, in both modes', () => {
    const random = seedrandom('walk');
    let walks = 0;
    // Eight moving slots: past the six advanceWhile keeps in locals, so the loop over slots runs too.
    const eight: ValueFunction = {
      name: 'eight', formula: 'test only',
      terms: [[0, 0], [0, 1], [1, 0], [1, 1]].flatMap(([a, b]) => [
        { coef: 0.5 + a!, a: a!, b: b!, u: 1 as const, w: 0 as const },
        { coef: -0.25 - b!, a: a!, b: b!, u: 0 as const, w: 1 as const, e: 1 as const },
      ]),
    };
    const functions = [...registry.names().map((name) => registry.get(name)), eight];
    for (const fn of functions) {
      const name = fn.name;
      for (const kind of ['beta', 'point'] as const) {
        const alpha = Float64Array.from({ length: 20 }, () => 0.3 + random() * 20);
        const beta = Float64Array.from({ length: 20 }, () => 0.3 + random() * 20);
        const mode = kind === 'beta' ? { kind, alpha, beta } : { kind, p: Float64Array.from(alpha, (a, i) => a / (a + beta[i]!)) };
        const fast = new MonomialCurves(fn, mode);
        const slow = new MonomialCurves(fn, mode);
        for (let i = 0; i < 20; i++) {
          const lambda = random() * 0.05;
          fast.seek(i, 2);
          slow.seek(i, 2);
          const taken = fast.advanceWhile(i, 1, lambda, 64);
          let n = 2;
          let sum = 0;
          let next = NaN;
          while (n < 64) {
            const g = slow.nextGain(i);
            if (!(g > lambda)) {
              next = g;
              break;
            }
            sum += g;
            slow.advance(i);
            n++;
          }
          expect(taken, `${name} ${kind} ${i}`).toBe(n - 2);
          expect(fast.walkGain).toBe(sum);
          expect(Object.is(fast.walkNext, next) || fast.walkNext === next).toBe(true);
          expect(fast.current(i)).toBe(slow.current(i));
          walks++;
        }
      }
    }
    expect(walks).toBe(functions.length * 40);
  });

  it('registry: unknown names list the registered ones; duplicates throw', () => {
    expect(() => registry.get('nope')).toThrow(/unknown value function "nope"; registered: knapsack, balanced, informative, variance, hit/);
    expect(() => registry.register('hit', registry.get('hit'))).toThrow(/already registered/);
  });
});

describe('Beta quantiles and draws', () => {
  it('the fast credible bound is within 1e-3 of jStat for α, β ≥ 5 and exact below', () => {
    const random = seedrandom('quantiles');
    let checked = 0;
    for (let k = 0; k < 2000; k++) {
      const a = 0.2 + random() * 200;
      const b = 0.2 + random() * 200;
      for (const q of [0.05, 0.95]) {
        const diff = Math.abs(betaQuantileFast(q, a, b) - betaQuantile(q, a, b));
        expect(diff, `a=${a} b=${b} q=${q}`).toBeLessThan(a >= 5 && b >= 5 ? 1e-3 : 1e-12);
        checked++;
      }
    }
    expect(checked).toBe(4000);
  });

  it('Beta draws have the right mean and variance', () => {
    const random = seedrandom('draws');
    const [a, b] = [0.6, 2.4];
    let s = 0;
    let s2 = 0;
    const N = 40_000;
    for (let k = 0; k < N; k++) {
      const x = betaDraw(a, b, random);
      s += x;
      s2 += x * x;
    }
    const mean = s / N;
    const variance = s2 / N - mean * mean;
    expect(Math.abs(mean - a / (a + b))).toBeLessThan(0.005);
    expect(Math.abs(variance - (a * b) / ((a + b) ** 2 * (a + b + 1)))).toBeLessThan(0.003);
  });
});
