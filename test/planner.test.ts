import { describe, expect, it } from 'vitest';
import {
  createRegistries, exactDp, milpSolve, MonomialCurves, planStep, posteriors, resolvePlanOptions, snapshotOf,
  type Candidate, type Plan, type PromptState,
} from '../src/index.js';
import { goldenCases } from './helpers.js';

const registries = createRegistries();

function state(partial: Partial<PromptState> & { id: string }): PromptState {
  return {
    group: null, successes: 0, failures: 0, lastStep: 0, rollouts: 0, rewardSum: 0,
    correctCount: 0, correctTokens: 0, wrongCount: 0, wrongTokens: 0,
    ...partial,
    ...(partial.rollouts === undefined ? { rollouts: Math.round((partial.successes ?? 0) + (partial.failures ?? 0)) } : {}),
  };
}

const byId = (plan: Plan) => new Map(plan.allocations.map((a) => [a.prompt_id, a]));

interface Golden {
  states: (Partial<PromptState> & { id: string })[];
  candidates: Candidate[];
  budget: { rollouts?: number; tokens?: number };
  options: { minN: number; maxN: number; skip?: boolean; value: string; saturation: number };
  expect: { rollouts?: number; tokensAtMost?: number; objectiveEqualsDp?: boolean; objectiveNearMilp?: boolean; skipped?: string[] };
  /** Posteriors and per-rollout costs worked out by hand (see `derivation`), for the MILP check. */
  reference?: { alpha: number[]; beta: number[]; tokensPerRollout: number[] };
}

describe('golden cases (validity oracle)', () => {
  const cases = goldenCases<Golden>();
  it('has cases to run', () => expect(cases.length).toBeGreaterThanOrEqual(3));
  for (const { name, data } of cases) {
    it(name, () => {
      const snapshot = snapshotOf(data.states.map(state), 0);
      const plan = planStep(snapshot, data.candidates, data.budget, { ...data.options, step: 1 }, registries);
      const n = data.candidates.map((c) => byId(plan).get(c.id)?.n ?? 0);
      for (const x of n) if (x !== 0 || !data.options.skip) expect(x >= data.options.minN && x <= data.options.maxN).toBe(true);
      if (data.expect.rollouts !== undefined) expect(plan.totals.rollouts).toBe(data.expect.rollouts);
      if (data.budget.rollouts !== undefined) expect(plan.totals.rollouts).toBeLessThanOrEqual(data.budget.rollouts);
      if (data.expect.tokensAtMost !== undefined) expect(plan.totals.expected_tokens).toBeLessThanOrEqual(data.expect.tokensAtMost);
      for (const id of data.expect.skipped ?? []) expect(byId(plan).has(id), id).toBe(false);
      // Independent reference: rebuild the same curves and costs and solve exactly.
      const options = resolvePlanOptions({ ...data.options, step: 1 });
      const { alpha, beta } = posteriors(snapshot, data.candidates, 1, options);
      const curves = new MonomialCurves(registries.values.get(data.options.value), { kind: 'beta', alpha, beta });
      const tokens = Float64Array.from(data.candidates, (c) => (plan.allocations.find((a) => a.prompt_id === c.id)?.expected_tokens ?? 0) / Math.max(1, byId(plan).get(c.id)?.n ?? 1));
      const input = {
        curves, tokensPerRollout: tokens, fixedTokens: new Float64Array(n.length), tieBreak: new Uint32Array(n.length),
        minN: data.options.minN, maxN: data.options.maxN, skip: data.options.skip ?? false,
        rollouts: data.budget.rollouts ?? Infinity, tokens: data.budget.tokens ?? Infinity,
      };
      if (data.expect.objectiveEqualsDp) expect(Math.abs(plan.totals.objective - exactDp(input).objective)).toBeLessThan(1e-9);
      if (data.expect.objectiveNearMilp) {
        // The reference is independent of the plan: hand-computed posteriors and costs.
        const ref = data.reference!;
        const refCurves = new MonomialCurves(registries.values.get(data.options.value), { kind: 'beta', alpha: Float64Array.from(ref.alpha), beta: Float64Array.from(ref.beta) });
        const refInput = { ...input, curves: refCurves, tokensPerRollout: Float64Array.from(ref.tokensPerRollout) };
        data.candidates.forEach((c, i) => {
          const a = byId(plan).get(c.id);
          if (a !== undefined) expect(Math.abs(a.expected_tokens - a.n * ref.tokensPerRollout[i]!), `${c.id} expected tokens`).toBeLessThanOrEqual(0.5);
        });
        const spent = n.reduce((s, x, i) => s + x * ref.tokensPerRollout[i]!, 0);
        expect(spent).toBeLessThanOrEqual(data.budget.tokens!);
        const objective = n.reduce((s, x, i) => s + refCurves.value(i, x), 0);
        const oneMove = Math.max(...n.map((x, i) => refCurves.value(i, x + 1) - refCurves.value(i, x)));
        const m = milpSolve(refInput);
        expect(m.status).toBe('optimal');
        expect(objective, `plan ${JSON.stringify(n)}, MILP ${JSON.stringify([...m.n])}`).toBeGreaterThanOrEqual(m.objective - oneMove);
      }
      expect(plan.totals.upper_bound).toBeGreaterThanOrEqual(plan.totals.objective - 1e-12);
    });
  }
});

describe('planner', () => {
  const states = Array.from({ length: 30 }, (_, i) => state({ id: `p${i}`, successes: i % 9, failures: 8 - (i % 9), lastStep: i % 4 }));
  const snapshot = snapshotOf(states, 5);
  const candidates: Candidate[] = [...states.map((s) => ({ id: s.id })), { id: 'fresh1' }, { id: 'fresh2' }];

  it('the same seed gives the same plan; Thompson draws depend on the seed', () => {
    const a = planStep(snapshot, candidates, { rollouts: 256 }, { policy: 'thompson', seed: 5 }, registries);
    const b = planStep(snapshot, candidates, { rollouts: 256 }, { policy: 'thompson', seed: 5 }, registries);
    const c = planStep(snapshot, candidates, { rollouts: 256 }, { policy: 'thompson', seed: 6 }, registries);
    expect(JSON.stringify(a)).toBe(JSON.stringify(b));
    expect(JSON.stringify(a.allocations.map((x) => x.n))).not.toBe(JSON.stringify(c.allocations.map((x) => x.n)));
    expect(a.seed).toBe(5);
  });

  it('permuting the candidates changes nothing, for every policy', () => {
    const reversed = [...candidates].reverse();
    for (const policy of ['bayes', 'thompson', 'mean']) {
      const a = planStep(snapshot, candidates, { rollouts: 200 }, { policy, seed: 1 }, registries);
      const b = planStep(snapshot, reversed, { rollouts: 200 }, { policy, seed: 1 }, registries);
      expect(Object.fromEntries(byId(b))).toEqual(Object.fromEntries(byId(a)));
      // Totals are sums of the same terms in another order: equal up to float rounding.
      const { objective, upper_bound, gap, ...exact } = b.totals;
      const { objective: o2, upper_bound: u2, gap: g2, ...exact2 } = a.totals;
      expect(exact).toEqual(exact2);
      expect(Math.abs(objective - o2)).toBeLessThan(1e-12);
      expect(Math.abs(upper_bound - u2)).toBeLessThan(1e-12);
      expect(Math.abs(gap - g2)).toBeLessThan(1e-9);
    }
  });

  it('defaults the step to the last observed + 1 and writes every field of the contract', () => {
    const plan = planStep(snapshot, candidates, { rollouts: 100 }, {}, registries);
    expect(plan.step).toBe(6);
    expect(Object.keys(plan)).toEqual(['version', 'step', 'seed', 'policy', 'value', 'budget', 'totals', 'allocations', 'warnings']);
    for (const a of plan.allocations) {
      expect(Object.keys(a)).toEqual(['prompt_id', 'n', 'max_tokens', 'expected_tokens', 'p_mean', 'p_low', 'p_high', 'value']);
      expect(a.p_low).toBeLessThanOrEqual(a.p_mean);
      expect(a.p_high).toBeGreaterThanOrEqual(a.p_mean);
    }
  });

  it('spends a saturated budget where a first success is most likely missing, not evenly', () => {
    // Mid prompts carry almost all the knapsack value and saturate within a few rollouts;
    // settled hard prompts (p ≈ 0.01) and solved ones (p ≈ 1) start below 10% of the best
    // first move. The rest of the budget must go by pass@n: to the hard prompts.
    const settled = [
      ...Array.from({ length: 4 }, (_, i) => state({ id: `mid${i}`, successes: 5000, failures: 5000 })),
      ...Array.from({ length: 4 }, (_, i) => state({ id: `solved${i}`, successes: 1e5, failures: 1 })),
      ...Array.from({ length: 4 }, (_, i) => state({ id: `hard${i}`, successes: 100, failures: 9900 })),
    ];
    const snap = snapshotOf(settled, 0);
    const candidates = settled.map((s) => ({ id: s.id }));
    const plan = planStep(snap, candidates, { rollouts: 300 }, { policy: 'mean', value: 'knapsack', saturation: 0.1, maxN: 64, step: 1 }, registries);
    expect(plan.totals.rollouts).toBe(300);
    expect(plan.totals.surplus_rollouts).toBeGreaterThan(150);
    const n = byId(plan);
    for (let i = 0; i < 4; i++) {
      expect(n.get(`hard${i}`)!.n, `hard${i}`).toBeGreaterThan(50);
      expect(n.get(`solved${i}`)!.n, `solved${i}`).toBe(2);
      expect(n.get(`mid${i}`)!.n, `mid${i}`).toBeLessThan(12);
    }
    // Without the surplus rule (saturation 0) the knapsack value alone would keep feeding
    // the mid prompts, whose value is larger but nearly used up.
    const pure = byId(planStep(snap, candidates, { rollouts: 300 }, { policy: 'mean', value: 'knapsack', saturation: 0, maxN: 64, step: 1 }, registries));
    expect(pure.get('mid0')!.n).toBeGreaterThan(n.get('mid0')!.n);
  });

  it('learns the prior per group, falling back to all prompts, then to Beta(1, 1)', () => {
    const pool = [
      ...Array.from({ length: 10 }, (_, i) => state({ id: `a${i}`, group: 'hardset', successes: i % 3 === 0 ? 1 : 0, failures: 8 - (i % 3 === 0 ? 1 : 0) })),
      ...Array.from({ length: 10 }, (_, i) => state({ id: `b${i}`, group: 'easyset', successes: 7 + (i % 2), failures: 1 - (i % 2) })),
    ];
    const snap = snapshotOf(pool, 0);
    const options = resolvePlanOptions({});
    const post = posteriors(snap, [{ id: 'x', group: 'hardset' }, { id: 'y', group: 'easyset' }, { id: 'z', group: 'unknown' }, { id: 'w' }], 1, options);
    const mean = (i: number) => post.alpha[i]! / (post.alpha[i]! + post.beta[i]!);
    expect(mean(0)).toBeLessThan(0.1);
    expect(mean(1)).toBeGreaterThan(0.85);
    expect(Math.abs(mean(2) - 0.5)).toBeLessThan(0.1);
    expect(post.alpha[2]! + post.beta[2]!).toBeLessThanOrEqual(2 + 1e-12);
    const empty = posteriors(snapshotOf([], null), [{ id: 'q' }], 0, options);
    expect([empty.alpha[0], empty.beta[0]]).toEqual([1, 1]);
    // One group of 8 moves a new prompt most of the way: 6/8 from a hard-set prior.
    const a = post.alpha[0]! + 6;
    const b = post.beta[0]! + 2;
    expect(a / (a + b)).toBeGreaterThan(0.55);
  });

  it('forgets toward the prior with the steps since a prompt was seen', () => {
    const s = state({ id: 'old', successes: 8, failures: 0, lastStep: 0 });
    const snap = snapshotOf([s], 0);
    const options = resolvePlanOptions({ decay: { forgetPerStep: 0.98 } });
    const near = posteriors(snap, [{ id: 'old' }], 1, options);
    const far = posteriors(snap, [{ id: 'old' }], 200, options);
    expect(near.alpha[0]! - 1).toBeCloseTo(8 * 0.98, 12);
    expect(far.alpha[0]! - 1).toBeCloseTo(8 * 0.98 ** 200, 12);
  });

  it('a token budget buys fewer rollouts of long (hard) prompts', () => {
    const s = [
      state({ id: 'short', successes: 4, failures: 4, correctCount: 4, correctTokens: 4000, wrongCount: 4, wrongTokens: 4000 }),
      state({ id: 'long', successes: 4, failures: 4, correctCount: 4, correctTokens: 40000, wrongCount: 4, wrongTokens: 40000 }),
    ];
    const plan = planStep(snapshotOf(s, 0), [{ id: 'short' }, { id: 'long' }], { tokens: 120_000 }, { maxN: 64 }, registries);
    const n = byId(plan);
    expect(n.get('short')!.n).toBeGreaterThan(n.get('long')!.n);
    expect(plan.totals.expected_tokens).toBeLessThanOrEqual(120_000);
  });

  it('rejects duplicate candidate ids and infeasible bounds with the numbers', () => {
    expect(() => planStep(snapshot, [{ id: 'a' }, { id: 'a' }], { rollouts: 10 }, {}, registries)).toThrow(/candidate 2: "id" "a" repeats candidate 1/);
    expect(() => planStep(snapshot, candidates, { rollouts: 10 }, {}, registries)).toThrow(/32 prompts × 2 rollouts \(min_n\) need 64 rollouts.*budget is 10 rollouts.*lower min_n, or set skip/);
    expect(planStep(snapshot, candidates, { rollouts: 10 }, { skip: true }, registries).totals.rollouts).toBe(10);
  });
});
