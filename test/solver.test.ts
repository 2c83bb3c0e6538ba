import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MonomialCurves, exactDp, fnv1a, greedySolve, knapsackValue, milpSolve, type SolverInput } from '../src/index.js';
import { objectiveOf, randomInstance, violations } from './helpers.js';

const TOL = 1e-9;

/** Reorders an instance's prompts by `perm` (new i ← old perm[i]). */
function permute(seed: string, input: SolverInput, perm: number[], opts: Parameters<typeof randomInstance>[1]): SolverInput {
  void input;
  const base = randomInstance(seed, opts);
  const alpha = new Float64Array(perm.length);
  const beta = new Float64Array(perm.length);
  // Rebuild curves from the same (α, β) in the new order through the public moment API.
  const probe = base.curves as MonomialCurves;
  for (let i = 0; i < perm.length; i++) {
    // α/(α+β) and the curves are fully determined by (α, β); recover them from moments.
    const m1 = probe.moment(perm[i]!, 1, 0);
    const m2 = probe.moment(perm[i]!, 2, 0);
    const s = (m1 - m2) / (m2 - m1 * m1);
    alpha[i] = m1 * s;
    beta[i] = (1 - m1) * s;
  }
  return {
    ...base,
    curves: new MonomialCurves(knapsackValue, { kind: 'beta', alpha, beta }),
    surplus: undefined,
    tokensPerRollout: Float64Array.from(perm, (j) => base.tokensPerRollout[j]!),
    fixedTokens: Float64Array.from(perm, (j) => base.fixedTokens[j]!),
    tieBreak: Uint32Array.from(perm, (j) => base.tieBreak[j]!),
  };
}

describe('greedy solver', () => {
  it('never violates budgets or bounds (property)', () => {
    let ran = 0;
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 60 }), fc.integer({ min: 1, max: 4 }), fc.integer({ min: 0, max: 30 }),
        fc.boolean(), fc.integer({ min: 0, max: 2000 }), fc.option(fc.integer({ min: 0, max: 400_000 }), { nil: undefined }),
        fc.boolean(), fc.string(),
        (size, minN, extra, skip, rollouts, tokens, prefill, seed) => {
          const input = randomInstance(`v/${seed}`, { size, minN, maxN: minN + extra, skip, rollouts, tokens: tokens ?? Infinity, tokenCosts: true, prefill });
          const result = greedySolve(input);
          if (result.status === 'budget-infeasible') {
            expect(skip).toBe(false);
            expect(result.needed!.rollouts > rollouts || result.needed!.tokens > (tokens ?? Infinity)).toBe(true);
            return;
          }
          ran++;
          expect(violations(input, result.n), `seed v/${seed}`).toEqual([]);
          expect(Math.abs(objectiveOf(input, result.n) - result.objective)).toBeLessThan(1e-9);
          expect(result.upperBound).toBeGreaterThanOrEqual(result.objective - TOL);
        },
      ),
      { numRuns: 300, seed: 42 },
    );
    expect(ran).toBeGreaterThan(100);
  });

  // Values are concave for n ≥ 1, so without skip the greedy is exact. With skip the curve
  // from 0 is not concave (v(0) = v(1) = 0 for knapsack), the hull's first segment may be
  // longer than the budget left, and the greedy is within one prompt's jump of the optimum.
  it('equals the exact DP on unit costs without skip; within one jump of it with skip (property)', () => {
    let ran = 0;
    let ranSkip = 0;
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 25 }), fc.integer({ min: 1, max: 3 }), fc.integer({ min: 0, max: 12 }), fc.boolean(), fc.integer({ min: 0, max: 200 }), fc.constantFrom('knapsack', 'informative', 'variance', 'hit'), fc.string(), (size, minN, extra, skip, rollouts, value, seed) => {
        const input = randomInstance(`dp/${seed}`, { size, minN, maxN: minN + extra, skip, rollouts, tokens: Infinity, value });
        const noSurplus = { ...input, surplus: undefined };
        const g = greedySolve(noSurplus);
        const d = exactDp(noSurplus);
        expect(g.status, `seed dp/${seed}`).toBe(d.status);
        if (g.status !== 'optimal') return;
        expect(g.objective, `seed dp/${seed} ${value}`).toBeLessThanOrEqual(d.objective + 1e-9);
        expect(g.upperBound, `seed dp/${seed} ${value}`).toBeGreaterThanOrEqual(d.objective - 1e-9);
        if (!skip) {
          ran++;
          expect(Math.abs(g.objective - d.objective), `seed dp/${seed} ${value}`).toBeLessThan(1e-9);
          return;
        }
        ranSkip++;
        let maxJump = 0;
        for (let i = 0; i < size; i++) for (let n = minN; n <= minN + extra; n++) maxJump = Math.max(maxJump, input.curves.value(i, n));
        expect(g.objective, `seed dp/${seed} ${value}`).toBeGreaterThanOrEqual(d.objective - maxJump - 1e-9);
      }),
      { numRuns: 400, seed: 7 },
    );
    expect(ran).toBeGreaterThan(100);
    expect(ranSkip).toBeGreaterThan(100);
  });

  // A later round of a step: prompts that already have rollouts may get 0 or a few more (lower
  // bound 0, upper max_n − k); the others keep [min_n, max_n] (or 0 with skip).
  it('keeps per-prompt bounds and stays within one jump of the exact DP (property)', () => {
    let ran = 0;
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 20 }), fc.integer({ min: 1, max: 3 }), fc.integer({ min: 0, max: 10 }), fc.boolean(), fc.integer({ min: 0, max: 150 }), fc.constantFrom('knapsack', 'informative', 'hit'), fc.string(), (size, minN, extra, skip, rollouts, value, seed) => {
        const input = randomInstance(`pb/${seed}`, { size, minN, maxN: minN + extra, skip, rollouts, tokens: Infinity, value });
        const pick = (i: number, k: number) => (fnv1a(`${seed}/${i}/${k}`) % 1000) / 1000;
        const promptMinN = Int32Array.from({ length: size }, (_, i) => (pick(i, 0) < 0.5 ? 0 : minN));
        const promptMaxN = Int32Array.from({ length: size }, (_, i) => Math.floor(pick(i, 1) * (minN + extra + 1)));
        for (let i = 0; i < size; i++) if (promptMinN[i]! > 0) promptMaxN[i] = Math.max(promptMaxN[i]!, minN);
        const bounded = { ...input, surplus: undefined, promptMinN, promptMaxN };
        const g = greedySolve(bounded);
        const d = exactDp(bounded);
        expect(g.status, `seed pb/${seed}`).toBe(d.status);
        if (g.status !== 'optimal') return;
        ran++;
        expect(violations(bounded, g.n), `seed pb/${seed}`).toEqual([]);
        expect(Math.abs(objectiveOf(bounded, g.n) - g.objective)).toBeLessThan(1e-9);
        expect(g.objective, `seed pb/${seed}`).toBeLessThanOrEqual(d.objective + 1e-9);
        let maxJump = 0;
        for (let i = 0; i < size; i++) for (let n = 1; n <= promptMaxN[i]!; n++) maxJump = Math.max(maxJump, input.curves.value(i, n));
        expect(g.objective, `seed pb/${seed} ${value}`).toBeGreaterThanOrEqual(d.objective - maxJump - 1e-9);
      }),
      { numRuns: 400, seed: 11 },
    );
    expect(ran).toBeGreaterThan(150);
  });

  it('is within one prompt\'s marginal value of the MILP optimum with token costs', () => {
    let ran = 0;
    for (let k = 0; k < 25; k++) {
      const seed = `milp/${k}`;
      const size = 6 + (k % 5);
      const input = randomInstance(seed, { size, minN: 1 + (k % 2), maxN: 6, skip: k % 3 === 0, rollouts: 3 * size, tokens: 1500 * size, tokenCosts: true, prefill: k % 2 === 0 });
      const noSurplus = { ...input, surplus: undefined };
      const g = greedySolve(noSurplus);
      const m = milpSolve(noSurplus);
      if (m.status !== 'optimal') continue;
      ran++;
      expect(violations(input, m.n), seed).toEqual([]);
      // Largest single move any prompt has (its best marginal value).
      let maxMove = 0;
      for (let i = 0; i < size; i++) {
        for (let n = 0; n < 6; n++) maxMove = Math.max(maxMove, input.curves.value(i, n + 1) - input.curves.value(i, n), input.curves.value(i, n + 1));
      }
      expect(g.objective, seed).toBeGreaterThanOrEqual(m.objective - maxMove - 1e-9);
      expect(g.objective, seed).toBeLessThanOrEqual(m.objective + 1e-6);
      expect(g.upperBound, seed).toBeGreaterThanOrEqual(m.objective - 1e-6);
    }
    expect(ran).toBeGreaterThanOrEqual(20);
  });

  it('permuting the prompts changes nothing (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 2, max: 40 }), fc.boolean(), fc.boolean(), fc.string(), fc.integer(), (size, skip, tokenCosts, seed, shuffleSeed) => {
        const opts = { size, minN: 2, maxN: 12, skip, rollouts: 5 * size, tokens: tokenCosts ? 3000 * size : Infinity, tokenCosts };
        const identity = Array.from({ length: size }, (_, i) => i);
        const a = permute(seed, randomInstance(seed, opts), identity, opts);
        const perm = [...identity];
        let s = shuffleSeed >>> 0;
        for (let i = size - 1; i > 0; i--) {
          s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
          const j = s % (i + 1);
          [perm[i], perm[j]] = [perm[j]!, perm[i]!];
        }
        const b = permute(seed, a, perm, opts);
        const ra = greedySolve(a);
        const rb = greedySolve(b);
        for (let i = 0; i < size; i++) expect(rb.n[i], `seed ${seed}`).toBe(ra.n[perm[i]!]);
        expect(Math.abs(ra.objective - rb.objective)).toBeLessThan(1e-9);
      }),
      { numRuns: 150, seed: 3 },
    );
  });

  it('more budget never lowers the objective (property, rollouts and tokens)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 40 }), fc.boolean(), fc.boolean(), fc.integer({ min: 0, max: 300 }), fc.integer({ min: 1, max: 50 }), fc.string(), (size, skip, tokens, budget, more, seed) => {
        const opts = (b: number) => ({
          size, minN: 2, maxN: 16, skip, tokenCosts: tokens,
          rollouts: tokens ? Infinity : b, tokens: tokens ? b * 500 : Infinity,
        });
        const small = greedySolve(randomInstance(seed, opts(budget)));
        const large = greedySolve(randomInstance(seed, opts(budget + more)));
        if (small.status !== 'optimal') return;
        expect(large.status).toBe('optimal');
        expect(large.objective, `seed ${seed}`).toBeGreaterThanOrEqual(small.objective - 1e-9);
      }),
      { numRuns: 300, seed: 11 },
    );
  });

  it('a zero-value prompt does not change the others', () => {
    const opts = { size: 12, minN: 2, maxN: 16, skip: false, rollouts: 100, tokens: Infinity };
    const base = randomInstance('zero', opts);
    const alpha = Float64Array.from({ length: 13 }, (_, i) => (i < 12 ? (base.curves as MonomialCurves).moment(i, 1, 0) : 1));
    void alpha;
    // Point curves: a prompt with p = 1 has zero knapsack value for every n.
    const p = Float64Array.from({ length: 12 }, (_, i) => 0.05 + 0.07 * i);
    const withZero = Float64Array.from([...p, 1]);
    const mk = (ps: Float64Array, rollouts: number): SolverInput => ({
      curves: new MonomialCurves(knapsackValue, { kind: 'point', p: ps }),
      tokensPerRollout: new Float64Array(ps.length),
      fixedTokens: new Float64Array(ps.length),
      tieBreak: Uint32Array.from(ps, (_, i) => i),
      minN: 2, maxN: 16, skip: false, rollouts, tokens: Infinity,
    });
    const a = greedySolve(mk(p, 100));
    const b = greedySolve(mk(withZero, 102));
    expect([...b.n].slice(0, 12)).toEqual([...a.n]);
    expect(b.n[12]).toBe(2);
  });

  it('leaving fixedTokens out is the same as every prompt charging 0 fixed tokens', () => {
    let ran = 0;
    for (const skip of [false, true]) {
      const input = randomInstance(`fixed-absent/${skip}`, { size: 300, minN: 2, maxN: 32, skip, rollouts: 2000, tokens: 300 * 6 * 500, tokenCosts: true });
      const { fixedTokens: zeros, ...absent } = input;
      expect(zeros?.every((f) => f === 0)).toBe(true);
      const a = greedySolve(input);
      const b = greedySolve(absent);
      expect([...b.n], `skip ${skip}`).toEqual([...a.n]);
      // The same arithmetic (x + 0 = x): equal exactly, not just within a tolerance.
      expect(b.objective).toBe(a.objective);
      expect(b.usedTokens).toBe(a.usedTokens);
      expect(exactDp(absent).objective).toBe(exactDp(input).objective);
      ran++;
    }
    expect(ran).toBe(2);
  });

  it('the one-pass precommit of large instances gives exactly the heap\'s allocation', () => {
    const cases = [
      { rollouts: 8 * 40_000, tokens: Infinity, skip: false, tokenCosts: false },
      { rollouts: Infinity, tokens: 40_000 * 6 * 500, skip: false, tokenCosts: true },
      { rollouts: 5 * 40_000, tokens: 40_000 * 5 * 520, skip: true, tokenCosts: true, prefill: true },
      { rollouts: 8 * 40_000, tokens: Infinity, skip: false, tokenCosts: false, saturation: 0.1 },
      { rollouts: 8 * 40_000, tokens: Infinity, skip: false, tokenCosts: false, value: 'balanced', saturation: 0.1 },
      // Regression (a budget far above saturation took every move through the heap, ~5× slower):
      // everything above the floor fits, taken in one pass.
      { rollouts: 40 * 40_000, tokens: Infinity, skip: false, tokenCosts: false, value: 'informative', saturation: 0.02 },
    ];
    for (const [k, c] of cases.entries()) {
      const { saturation, ...shape } = c as typeof c & { saturation?: number };
      const input = { ...randomInstance(`big/${k}`, { size: 40_000, minN: 2, maxN: 64, ...shape }), ...(saturation === undefined ? {} : { saturation }) };
      const fast = greedySolve(input);
      const heapOnly = greedySolve({ ...input, precommit: false });
      expect(fast.status).toBe('optimal');
      expect(violations(input, fast.n)).toEqual([]);
      let differing = 0;
      for (let i = 0; i < fast.n.length; i++) if (fast.n[i] !== heapOnly.n[i]) differing++;
      expect(differing, `case ${k}`).toBe(0);
      expect(Math.abs(fast.objective - heapOnly.objective)).toBeLessThan(1e-6);
      expect(fast.usedRollouts).toBe(heapOnly.usedRollouts);
    }
  });

  it('a token budget that does not bind still weighs each move (README: Two budgets): fewer tokens, the same rollouts', () => {
    for (const [k, size] of [1_500, 12_000].entries()) {
      const shape = { size, minN: 2, maxN: 32, skip: false, value: 'balanced', tokenCosts: true };
      const alone = greedySolve(randomInstance(`cap/${k}`, { ...shape, rollouts: 6 * size, tokens: Infinity }));
      const input = randomInstance(`cap/${k}`, { ...shape, rollouts: 6 * size, tokens: Math.ceil(1.5 * alone.usedTokens) });
      const capped = greedySolve(input);
      expect(violations(input, capped.n)).toEqual([]);
      expect(capped.usedRollouts, `cap/${k}`).toBe(alone.usedRollouts);
      expect(capped.usedTokens, `cap/${k}`).toBeLessThan(alone.usedTokens);
      // The rollouts-only plan is the most value for these rollouts (exact on unit costs).
      expect(objectiveOf(input, capped.n)).toBeLessThanOrEqual(alone.objective + 1e-9);
      let moved = 0;
      for (let i = 0; i < size; i++) if (capped.n[i] !== alone.n[i]) moved++;
      expect(moved, `cap/${k}`).toBeGreaterThan(0);
    }
  });

  it('reports infeasible lower bounds with the numbers', () => {
    const input = randomInstance('inf', { size: 10, minN: 4, maxN: 8, skip: false, rollouts: 39, tokens: Infinity });
    const r = greedySolve(input);
    expect(r.status).toBe('budget-infeasible');
    expect(r.needed).toEqual({ rollouts: 40, tokens: 0 });
    const withSkip = greedySolve({ ...input, skip: true });
    expect(withSkip.status).toBe('optimal');
    expect(violations({ ...input, skip: true }, withSkip.n)).toEqual([]);
  });
});
