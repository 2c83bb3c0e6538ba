import { describe, expect, it } from 'vitest';
import {
  batchOf, createAllocator, createRegistries, executePlan, mathVerifier, planStep, resolvePlanOptions, runStepRounds, snapshotOf,
  SqliteStore,
  type Candidate, type ExecuteOptions, type RoundAnswer,
} from '../src/index.js';
import { planOf, simPrompts, simServers } from './executor-helpers.js';
import { thrown } from './helpers.js';

// Style review 2026-11-29: entry points below Allocator.plan took what it refuses. planStep
// planned a max_tokens of NaN ("this round spends NaN of the 100000 tokens left", expected_tokens
// null) or -5 (expected_tokens -320); posterior() answered expected_tokens -1 for max_tokens -1;
// a round's {rollouts, tokens: -1e6} gave the next round 1,004,000 of a 4,000-token step; boolean
// rewards came back as the next round's partial_rewards and were refused; executePlan waited
// forever at concurrency 0 and generated 2 of 4 planned rollouts at overProvision -0.5.


const registries = createRegistries();
const empty = snapshotOf([]);

describe('planStep checks its candidates as Allocator.plan does', () => {
  it('refuses a NaN or negative max_tokens, a bad id or group, naming candidates[i]', () => {
    const cases: [Candidate[], string][] = [
      [[{ id: 'a', max_tokens: Number.NaN }, { id: 'b' }], 'candidates[0]: "max_tokens" must be'],
      [[{ id: 'a' }, { id: 'b', max_tokens: -5 }], 'candidates[1]: "max_tokens" must be'],
      [[{ id: 'a', prompt_tokens: Number.NaN }], 'candidates[0]: "prompt_tokens" must be'],
      [[{ id: 7 as unknown as string }], 'candidates[0]: "id" must be'],
      [[{ id: 'a', group: 5 as unknown as string }], 'candidates[0]: "group" must be'],
    ];
    let checked = 0;
    for (const [candidates, message] of cases) {
      const error = thrown(() => planStep(empty, candidates, { tokens: 100_000 }, { prefillWeight: 1 }, registries));
      expect(error.code, message).toBe('BAD_INPUT');
      expect(error.message).toContain(message);
      checked++;
    }
    expect(checked).toBe(cases.length);
  });

  it('checks a caller\'s array again after a plan: a candidate changed since is refused (only a copy is marked checked)', () => {
    const allocator = createAllocator();
    try {
      const candidates: Candidate[] = [{ id: 'a', max_tokens: 100 }, { id: 'b' }];
      expect(allocator.plan(candidates, { rollouts: 8 }).allocations).toHaveLength(2);
      (candidates[0] as { max_tokens: number }).max_tokens = -5;
      expect(thrown(() => allocator.plan(candidates, { rollouts: 8 })).message).toContain('candidates[0]: "max_tokens" must be');
      expect(thrown(() => planStep(empty, candidates, { rollouts: 8 }, {}, registries)).message).toContain('candidates[0]: "max_tokens" must be');
    } finally {
      allocator.close();
    }
  });

  it('posterior() checks its candidate too', () => {
    const allocator = createAllocator();
    try {
      expect(thrown(() => allocator.posterior('x', { max_tokens: -1 })).message).toContain('"max_tokens" must be');
      expect(thrown(() => allocator.posterior(5 as unknown as string)).message).toContain('"id" must be');
      expect(allocator.posterior('x', { max_tokens: 300 }).expected_tokens).toBe(300);
    } finally {
      allocator.close();
    }
  });
});

describe('the round loop checks what a generate function answers', () => {
  const candidates = Array.from({ length: 4 }, (_, i) => ({ id: `p${i}`, max_tokens: 100 }));
  const plan = (r: { candidates: readonly Candidate[]; budget: { tokens?: number; rollouts?: number }; roundsLeft: number; step?: number }) =>
    planStep(empty, r.candidates, r.budget, { roundsLeft: r.roundsLeft, ...(r.step === undefined ? {} : { step: r.step }) }, registries);
  const rolloutsOf = (p: ReturnType<typeof plan>, reward: (j: number) => number | boolean) =>
    p.allocations.flatMap((a) => Array.from({ length: a.n }, (_, j) => ({ prompt_id: a.prompt_id, reward: reward(j) as number, tokens: 100 })));

  it('refuses a round outcome whose tokens are negative, NaN or missing', () => {
    for (const tokens of [-1e6, Number.NaN, undefined]) {
      const error = thrown(() => runStepRounds({ candidates, budget: { tokens: 4000 }, rounds: 2, plan }, (p) => ({ rollouts: rolloutsOf(p, () => 1), tokens }) as RoundAnswer));
      expect(error.code).toBe('BAD_INPUT');
      expect(error.message).toContain('round 1: the generate function\'s answer: "tokens" must be');
    }
  });

  it('takes boolean rewards in every round, as 1 and 0', () => {
    const done = runStepRounds({ candidates, budget: { rollouts: 32 }, rounds: 2, plan }, (p) => rolloutsOf(p, (j) => j % 2 === 0));
    expect(done.plans.length).toBe(2);
    expect(done.results.length).toBe(done.spent.rollouts);
    expect(done.results.every((r) => r.reward === 0 || r.reward === 1)).toBe(true);
    expect(done.results.some((r) => r.reward === 1)).toBe(true);
  });
});

describe('executePlan checks its numbers before any request', () => {
  const serve = simServers();
  it('refuses concurrency 0, a negative or NaN over-provision and a NaN timeout, naming the field', async () => {
    const { candidates, sim } = simPrompts(1);
    const server = await serve({ prompts: sim });
    const base: ExecuteOptions = {
      endpoints: [server.url], model: 'sim', concurrency: 4, requestN: 4, overProvision: 0, timeoutMs: 5000,
      retry: { retries: 0, backoffMs: 1, maxBackoffMs: 1 }, verifier: mathVerifier(undefined),
    };
    const prompts = new Map(candidates.map((c) => [c.id, c]));
    const cases: [Partial<ExecuteOptions>, string][] = [
      [{ concurrency: 0 }, 'concurrency must be'],
      [{ concurrency: Number.NaN }, 'concurrency must be'],
      [{ requestN: 0 }, 'requestN must be'],
      [{ overProvision: -0.5 }, 'overProvision must be'],
      [{ overProvision: Number.NaN }, 'overProvision must be'],
      [{ timeoutMs: Number.NaN }, 'timeoutMs must be'],
      // In the library's terms: it said "give at least one --endpoint <url>", a flag a library caller never sets.
      [{ endpoints: [] }, 'endpoints is empty: give at least one OpenAI-compatible server URL'],
    ];
    for (const [extra, message] of cases) {
      await expect(executePlan(planOf({ q0: 4 }), prompts, { ...base, ...extra }), message).rejects.toMatchObject({ code: 'BAD_OPTION', message: expect.stringContaining(message) });
    }
    expect(server.stats.requests).toBe(0);
    const report = await executePlan(planOf({ q0: 4 }), prompts, base);
    expect(report.results.length).toBe(4);
  });
});

describe('a store checks the decay rates it applies evidence with', () => {
  it('refuses a rate above 1, NaN or missing, naming the field, and writes nothing', () => {
    const store = new SqliteStore(':memory:');
    try {
      store.apply(batchOf([{ prompt_id: 'a', step: 0, rewards: [1, 0, 1] }]), resolvePlanOptions({}).decay);
      const cases: [unknown, string][] = [
        [{ forgetPerStep: 2, reobserveDiscount: 0.85 }, 'decay must be in [0, 1], got 2'],
        [{ forgetPerStep: Number.NaN, reobserveDiscount: 0.85 }, 'decay must be in [0, 1], got NaN'],
        [{ forgetPerStep: 0.99 }, 'reobserve_discount must be in [0, 1]'],
      ];
      for (const [decay, message] of cases) {
        const error = thrown(() => store.apply(batchOf([{ prompt_id: 'a', step: 3, rewards: [1, 1] }]), decay as never));
        expect(error.code, message).toBe('BAD_OPTION');
        expect(error.message).toContain(message);
      }
      const a = store.snapshot().get('a')!;
      expect(a.successes + a.failures).toBeCloseTo(3, 12);
    } finally {
      store.close();
    }
  });
});

describe('regression: interval 1 planned NaN credible bounds (null in the plan file)', () => {
  it('gives p_low 0 and p_high 1, as posterior() does, for a prompt with α, β ≥ 5', () => {
    const allocator = createAllocator();
    try {
      allocator.observe(Array.from({ length: 20 }, (_, j) => ({ prompt_id: 'seen', step: 0, reward: j % 2, tokens: 100 })));
      const plan = allocator.plan([{ id: 'seen' }, { id: 'new' }], { rollouts: 8 }, { interval: 1 });
      const seen = JSON.parse(JSON.stringify(plan)).allocations.find((a: { prompt_id: string }) => a.prompt_id === 'seen');
      expect(seen).toMatchObject({ p_low: 0, p_high: 1 });
      expect(allocator.posterior('seen', {}, { interval: 1 })).toMatchObject({ p_low: 0, p_high: 1 });
    } finally {
      allocator.close();
    }
  });
});
