import seedrandom from 'seedrandom';
import { describe, expect, it } from 'vitest';
import { MonomialCurves, balancedValue, exactDp, fnv1a, greedySolve, valueAt, type CurveMode } from '../src/index.js';

describe('balanced value', () => {
  it('matches its formula at a known p, including the n·I(n) term', () => {
    for (const p of [0, 0.05, 0.3, 0.5, 0.9, 1]) {
      for (const n of [1, 2, 8, 33]) {
        const inf = 1 - p ** n - (1 - p) ** n;
        const expected = inf * (1 + 2.5 * (1 - p) ** 3 + 0.65 * p * (1 - p) ** 2) + 0.05 * n * inf;
        expect(valueAt(balancedValue, p, n)).toBeCloseTo(expected, 12);
        const curves = new MonomialCurves(balancedValue, { kind: 'point', p: Float64Array.of(p) });
        expect(curves.value(0, n)).toBeCloseTo(expected, 12);
        // cursor path: seek then step up one rollout at a time
        let v = curves.seek(0, 1);
        for (let m = 1; m < n; m++) {
          v += curves.nextGain(0);
          curves.advance(0);
        }
        expect(v, `p=${p} n=${n}`).toBeCloseTo(expected, 10);
      }
    }
  });

  it('is not concave in n everywhere, yet the greedy solver stays within 0.5% of the exact DP', () => {
    let ran = 0;
    for (let t = 0; t < 120; t++) {
      const r = seedrandom(`balanced-dp/${t}`);
      const size = 4 + Math.floor(r() * 16);
      const mode: () => CurveMode = t % 2 === 0
        ? () => ({ kind: 'beta', alpha: Float64Array.from({ length: size }, (_, i) => 0.2 + seedrandom(`${t}/a/${i}`)() * 8), beta: Float64Array.from({ length: size }, (_, i) => 0.2 + seedrandom(`${t}/b/${i}`)() * 8) })
        : () => ({ kind: 'point', p: Float64Array.from({ length: size }, (_, i) => seedrandom(`${t}/p/${i}`)()) });
      const input = {
        tokensPerRollout: new Float64Array(size), fixedTokens: new Float64Array(size),
        tieBreak: Uint32Array.from({ length: size }, (_, i) => fnv1a(String(i))),
        minN: 2, maxN: 24, skip: false, rollouts: size * (2 + Math.floor(r() * 10)), tokens: Infinity, saturation: 1e-9,
      };
      const greedy = greedySolve({ ...input, curves: new MonomialCurves(balancedValue, mode()) });
      const dp = exactDp({ ...input, curves: new MonomialCurves(balancedValue, mode()) });
      expect(dp.status).toBe('optimal');
      expect(greedy.usedRollouts, `seed ${t}`).toBeLessThanOrEqual(input.rollouts);
      expect(greedy.objective, `seed balanced-dp/${t}`).toBeGreaterThanOrEqual(0.995 * dp.objective);
      ran++;
    }
    expect(ran).toBe(120);
  });
});
