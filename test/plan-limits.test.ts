import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  Allocator, MAX_N_LIMIT, RolloutBudgetError, createRegistries, createRegistry, greedySolve, planLimits, planStep, snapshotOf,
  type PromptState, type Registries, type Solver, type SolverInput,
} from '../src/index.js';

// Issue 12, item 1: the planner's time grew with the budget and max_n, not the candidates
// (one prompt with max_n 2^53−1 never finished). plan/limits.ts bounds both.
const seed = (name: string) => (process.env.FC_SEED === undefined ? [...name].reduce((h, c) => (Math.imul(h, 31) + c.charCodeAt(0)) | 0, 11) : Number(process.env.FC_SEED));

/** Registries whose greedy also solves the unclamped input and hands both to `check`. */
function watching(unclamped: (input: SolverInput) => SolverInput, check: (clamped: Int32Array, original: Int32Array) => void): Registries {
  const base = createRegistries();
  const solver: Solver = (input) => {
    const result = greedySolve(input);
    check(result.n, greedySolve(unclamped(input)).n);
    return result;
  };
  return { ...base, solvers: createRegistry<Solver>('solver', { greedy: solver }) };
}

const states = (n: number, draw: () => number): PromptState[] =>
  Array.from({ length: n }, (_, i) => {
    const successes = Math.floor(draw() * 9);
    const failures = Math.floor(draw() * 9);
    return {
      id: `p${i}`, group: null, successes, failures, lastStep: 0, rollouts: successes + failures, rewardSum: successes,
      correctCount: successes, correctTokens: successes * 300, wrongCount: failures, wrongTokens: failures * 900,
    };
  });

describe('plan limits', () => {
  it('a lone budget above what the candidates can use is clamped without changing any allocation (property)', () => {
    let ran = 0;
    let clampedRuns = 0;
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 12 }), fc.integer({ min: 1, max: 12 }), fc.integer({ min: 1, max: 3 }), fc.boolean(),
        fc.constantFrom('balanced', 'informative', 'hit', 'knapsack'), fc.constantFrom('rollouts', 'tokens'), fc.double({ min: 1, max: 1e6, noNaN: true }),
        fc.integer({ min: 0, max: 2 ** 31 }), fc.constantFrom(undefined, undefined, 2, 3, 8),
        (size, maxN, minN, skip, value, kind, factor, s, multipleOf) => {
          if (minN > maxN) return;
          let k = s;
          const draw = () => ((k = (Math.imul(k, 1103515245) + 12345) >>> 0) / 2 ** 32);
          const snapshot = snapshotOf(states(size, draw), 0);
          const candidates = Array.from({ length: size }, (_, i) => ({ id: `p${i}`, max_tokens: 256 + Math.floor(draw() * 2000) }));
          let original = 0;
          let compared = 0;
          const registries = watching(
            (input) => (kind === 'rollouts' ? { ...input, rollouts: original } : { ...input, tokens: original }),
            (a, b) => {
              expect([...a]).toEqual([...b]);
              compared++;
            },
          );
          // at least what the candidates can use (c_i ≤ max_tokens ≤ 2,256), times `factor`
          const capacity = kind === 'rollouts' ? size * maxN : size * maxN * 2256;
          original = Math.min(Number.MAX_SAFE_INTEGER, Math.ceil(capacity * factor));
          const budget = kind === 'rollouts' ? { rollouts: original } : { tokens: original };
          let plan;
          try {
            plan = planStep(snapshot, candidates, budget, { minN, maxN, skip, value, step: 1, ...(multipleOf === undefined ? {} : { multipleOf }) }, registries);
          } catch (error) {
            if ((error as RolloutBudgetError).code === 'BUDGET_INFEASIBLE') return; // no multiple of k fits within max_n
            throw error;
          }
          expect(compared).toBe(1);
          if (plan.warnings.some((w) => w.startsWith(`a budget of ${original}`))) clampedRuns++;
          ran++;
        },
      ),
      { seed: seed('lone budget clamp'), numRuns: 300 },
    );
    expect(ran).toBeGreaterThan(150);
    expect(clampedRuns).toBeGreaterThan(80);
  });

  it('max_n above 4,096 plans as max_n 4,096 with a warning; min_n above it is refused', () => {
    const snapshot = snapshotOf([], null);
    const registries = createRegistries();
    const plan = planStep(snapshot, [{ id: 'a' }, { id: 'b' }], { rollouts: Number.MAX_SAFE_INTEGER }, { maxN: Number.MAX_SAFE_INTEGER }, registries);
    expect(plan.allocations.map((a) => a.n)).toEqual([MAX_N_LIMIT, MAX_N_LIMIT]);
    expect(plan.warnings).toContain(`max_n ${Number.MAX_SAFE_INTEGER} is above the limit of ${MAX_N_LIMIT} rollouts a prompt: planned with max_n ${MAX_N_LIMIT}`);
    expect(plan.warnings).toContain(`a budget of ${Number.MAX_SAFE_INTEGER} rollouts is more than 2 prompts × max_n ${MAX_N_LIMIT} can use: planned with ${2 * MAX_N_LIMIT}`);
    // Named as a field, so the CLI shows it as --min-n (it said "min_n must be at most 4096").
    expect(() => planStep(snapshot, [{ id: 'a' }], { rollouts: 10_000 }, { minN: 5_000, maxN: 6_000 }, registries)).toThrow(
      new RolloutBudgetError('BAD_OPTION', `min_n must be at most ${MAX_N_LIMIT} (the most rollouts one prompt can get in a plan), got 5000`, 2, ['min_n']),
    );
  });

  it('min_n above the default max_n, max_n not given: names min_n (it said "max_n must be an integer ≥ 100, got 64")', () => {
    const snapshot = snapshotOf([], null);
    expect(() => planStep(snapshot, [{ id: 'a' }], { rollouts: 1_000 }, { minN: 100 }, createRegistries())).toThrow(
      new RolloutBudgetError('BAD_OPTION', "min_n 100 is above max_n's default of 64: give max_n too (at least 100)", 2, ['min_n', 'max_n']),
    );
    // Given, max_n below min_n is max_n's error, as before.
    expect(() => planStep(snapshot, [{ id: 'a' }], { rollouts: 1_000 }, { minN: 100, maxN: 64 }, createRegistries())).toThrow('max_n must be an integer ≥ 100, got 64');
  });

  it('with both budgets neither is clamped (the greedy weighs each by its size), and plans under the limits get no warning', () => {
    const tokens = new Float64Array([100, 200]);
    expect(planLimits(2, { rollouts: 1e12, tokens: 1e12 }, 1, 8, tokens)).toEqual({ maxN: 8, rollouts: 1e12, tokens: 1e12, warnings: [] });
    expect(planLimits(2, { rollouts: 16 }, 1, 8, tokens)).toEqual({ maxN: 8, rollouts: 16, tokens: Infinity, warnings: [] });
    const t = planLimits(2, { tokens: 1e9 }, 1, 8, tokens, new Float64Array([50, 0]));
    expect(t.tokens).toBe(8 * 100 + 50 + 8 * 200);
    expect(t.warnings).toEqual([`a budget of 1000000000 tokens is more than 2 prompts × max_n 8 can use (~2450): planned with 2450`]);
  });
});

describe('a plan that plans nothing', () => {
  it('says why: no prompt\'s first rollouts fit the budget (a loop repeated its empty step unexplained)', () => {
    const allocator = new Allocator({ state: ':memory:' });
    try {
      // Two prompts of 1,024 and 512 expected tokens a rollout; min_n 2: the cheapest start needs 1,024.
      const plan = allocator.plan([{ id: 'a', max_tokens: 1024 }, { id: 'b', max_tokens: 512 }], { tokens: 300 }, { skip: true, minN: 2 });
      expect(plan.totals.rollouts).toBe(0);
      const said = plan.warnings.filter((w) => w.startsWith('nothing planned'));
      expect(said).toHaveLength(1);
      expect(said[0]).toMatch(/^nothing planned: no prompt's first 2 rollouts fit this plan's budget \(300 tokens, the cheapest prompt's needing (\d+)\): raise the budget, or lower min_n or max_tokens$/);
      const cheapest = Number(/needing (\d+)/.exec(said[0]!)![1]);
      expect(cheapest).toBeGreaterThan(300);
      // A budget that fits one start plans it, and says nothing of the kind.
      const some = allocator.plan([{ id: 'a', max_tokens: 1024 }, { id: 'b', max_tokens: 512 }], { tokens: cheapest }, { skip: true, minN: 2 });
      expect(some.totals.rollouts).toBeGreaterThan(0);
      expect(some.warnings.some((w) => w.startsWith('nothing planned'))).toBe(false);
    } finally {
      allocator.close();
    }
  });
});
