import jstatPkg from 'jstat';
import seedrandom from 'seedrandom';
import { describe, expect, it } from 'vitest';
import { betaQuantile, betaQuantileFast, lgamma } from '../src/index.js';
import { betaIntervalFast } from '../src/math/beta.js';

const { jStat } = jstatPkg;

/**
 * math/incomplete-beta.ts is jStat's gammaln / ibeta / ibetainv copied so that a plan does not
 * load jStat: the plans' numbers must stay the same bits, so the check is exact equality.
 */
describe('the port of jStat\'s incomplete beta', () => {
  it('gives jStat\'s bits for ln Γ and the Beta quantile on 20,000 random arguments', () => {
    const random = seedrandom('incomplete-beta');
    let checked = 0;
    for (let k = 0; k < 20_000; k++) {
      // shapes from 0.01 to ~2,000 (posteriors of small counts, decayed evidence, large pools)
      const a = Math.exp(-4.6 + random() * 12.2);
      const b = Math.exp(-4.6 + random() * 12.2);
      const q = k % 5 === 0 ? [0.05, 0.95, 1e-9, 1 - 1e-9, 0.5][k % 25 / 5]! : random();
      expect(lgamma(a), `lgamma(${a})`).toBe(jStat.gammaln(a));
      expect(betaQuantile(q, a, b), `betaQuantile(${q}, ${a}, ${b})`).toBe(jStat.beta.inv(q, a, b));
      checked++;
    }
    for (const [q, a, b] of [[0, 1, 1], [1, 2, 3], [0.3, 1, 1], [0.05, 0.349, 0.693], [0.95, 1e-3, 5]] as const) {
      expect(betaQuantile(q, a, b)).toBe(jStat.beta.inv(q, a, b));
      checked++;
    }
    expect(checked).toBe(20_005);
  });

  it('a plan\'s interval, both quantiles at once (betaIntervalFast), gives the bits of each alone, jStat\'s where exact', () => {
    const random = seedrandom('beta-interval');
    let exact = 0;
    let expanded = 0;
    for (let k = 0; k < 20_000; k++) {
      const a = Math.exp(-4.6 + random() * 9);
      const b = Math.exp(-4.6 + random() * 9);
      const q = k % 4 === 0 ? 0.05 : random();
      const [low, high] = betaIntervalFast(q, a, b);
      expect(low, `betaIntervalFast(${q}, ${a}, ${b})[0]`).toBe(betaQuantileFast(q, a, b));
      expect(high, `betaIntervalFast(${q}, ${a}, ${b})[1]`).toBe(betaQuantileFast(1 - q, a, b));
      if (a < 5 || b < 5) {
        expect(low).toBe(jStat.beta.inv(q, a, b));
        expect(high).toBe(jStat.beta.inv(1 - q, a, b));
        exact++;
      } else expanded++;
    }
    expect(exact).toBeGreaterThan(5_000);
    expect(expanded).toBeGreaterThan(1_000);
  });
});
