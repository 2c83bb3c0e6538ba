import { describe, expect, it } from 'vitest';
import {
  MonomialCurves, balancedValue, conditionalValue, hitValue, informativeValue, knapsackValue, partialGroupOf, valueAt, varianceValue,
  type ValueFunction,
} from '../src/index.js';

/**
 * Each value as the expectation of a statistic of the group's outcomes, written from its
 * definition (not from its monomials): the independent reference for the conditional values.
 */
const statistics: Record<string, (outcomes: number[], p: number) => number> = {
  informative: (o) => (varies(o) ? 1 : 0),
  knapsack: (o, p) => (varies(o) ? p * (1 - p) ** 2 : 0),
  variance: (o, p) => (varies(o) ? p * (1 - p) : 0),
  hit: (o) => (o.some((x) => x === 1) ? 1 : 0),
  balanced: (o, p) => (varies(o) ? 1 + 2.5 * (1 - p) ** 3 + 0.65 * p * (1 - p) ** 2 + 0.05 * o.length : 0),
};
const functions: ValueFunction[] = [informativeValue, knapsackValue, varianceValue, hitValue, balancedValue];

function varies(o: number[]): boolean {
  return o.some((x) => x !== o[0]);
}

/** E[stat(first ++ m more) − stat(first)] at pass rate p, by enumerating the 2^m outcomes. */
function enumerated(stat: (o: number[], p: number) => number, first: number[], m: number, p: number): number {
  let total = 0;
  for (let mask = 0; mask < 1 << m; mask++) {
    const more = Array.from({ length: m }, (_, j) => (mask >> j) & 1);
    const ones = more.reduce((a, x) => a + x, 0);
    total += p ** ones * (1 - p) ** (m - ones) * stat([...first, ...more], p);
  }
  return total - stat(first, p);
}

describe('conditional values (a later round of the same step)', () => {
  const partials = [[0], [0, 0, 0], [1, 1], [0, 1], [1, 0, 0, 1], [1]];
  it('equal the enumerated expectation of the group statistic given the rollouts already generated', () => {
    let checked = 0;
    for (const fn of functions) {
      for (const first of partials) {
        const cond = conditionalValue(fn, partialGroupOf(first));
        for (const p of [0, 0.07, 0.3, 0.5, 0.81, 1]) {
          for (let m = 0; m <= 7; m++) {
            const want = enumerated(statistics[fn.name]!, first, m, p);
            expect(valueAt(cond, p, m), `${fn.name} after [${first}] p=${p} m=${m}`).toBeCloseTo(want, 12);
            checked++;
          }
        }
      }
    }
    expect(checked).toBe(functions.length * partials.length * 6 * 8);
  });

  it('is the function itself when nothing was generated, and zero for informative after a mixed group', () => {
    expect(conditionalValue(informativeValue, partialGroupOf([]))).toBe(informativeValue);
    const mixed = conditionalValue(informativeValue, partialGroupOf([0, 1, 1]));
    expect(mixed.terms).toHaveLength(0);
  });

  it('reads non-binary rewards as successes from 0.5: equal rewards form a degenerate group', () => {
    expect(partialGroupOf([0.2, 0.2])).toEqual({ rollouts: 2, sawSuccess: false, sawFailure: true });
    expect(partialGroupOf([0.5, 0.5])).toEqual({ rollouts: 2, sawSuccess: true, sawFailure: false });
    expect(partialGroupOf([0.2, 0.3])).toEqual({ rollouts: 2, sawSuccess: true, sawFailure: true });
  });

  it('under a Beta posterior equals the integral of the point values (MonomialCurves, beta mode)', () => {
    const alpha = 1.7;
    const beta = 4.2;
    const cond = conditionalValue(balancedValue, partialGroupOf([0, 0, 0]));
    const curves = new MonomialCurves(cond, { kind: 'beta', alpha: Float64Array.of(alpha), beta: Float64Array.of(beta) });
    // Midpoint rule on the Beta density, normalised numerically.
    const steps = 20000;
    for (const m of [1, 3, 9]) {
      let num = 0;
      let den = 0;
      for (let s = 0; s < steps; s++) {
        const p = (s + 0.5) / steps;
        const w = p ** (alpha - 1) * (1 - p) ** (beta - 1);
        num += w * valueAt(cond, p, m);
        den += w;
      }
      expect(curves.value(0, m)).toBeCloseTo(num / den, 6);
    }
  });
});
