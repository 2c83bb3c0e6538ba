import { existsSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import {
  Allocator, AsyncAllocator, batchOf, createAllocator, createRegistries, parsePromptsAt, planStep, posteriorView, resolvePlanOptions,
  asyncStoreOf, createStoreRegistry, openAsyncStore, snapshotOf, SqliteStore, storeKindOf, runStepRounds, type Candidate, type ResultBatch, type RoundRollout,
} from '../src/index.js';
import { thrown } from './helpers.js';
import { tempDir } from './temp.js';

// A Node developer embedding the library (libadopt review, 2026-11-29) found its entry points
// took what the CLI refuses: candidates and hand-built result batches unchecked, a closed
// allocator failing with better-sqlite3's TypeError, and a round loop whose README example
// observed rewards without their tokens, so the state never learnt a length.


/** Every table's rows of a SQLite state, for "nothing was written" (the file read apart from the allocator). */
function rowsOf(path: string): string {
  const db = new Database(path, { readonly: true });
  try {
    const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all() as { name: string }[];
    return JSON.stringify(tables.map((t) => [t.name, db.prepare(`SELECT * FROM "${t.name}"`).all()]));
  } finally {
    db.close();
  }
}

/** Runs `body` on an allocator over a new SQLite state file (in the test's folder, removed after it), closing it after. */
function withAllocator(body: (allocator: Allocator, state: string) => void): void {
  const state = join(tempDir(), 'state.db');
  const allocator = new Allocator({ state });
  try {
    body(allocator, state);
  } finally {
    allocator.close();
  }
}

describe('the library checks candidates as the CLI checks a prompts file', () => {
  it('refuses a bad candidate naming candidates[i], the field and the value, and records nothing', () => {
    withAllocator((allocator, state) => {
      allocator.observe([{ prompt_id: 'a', step: 0, rewards: [1, 0] }]);
      const before = rowsOf(state);
      const cases: [unknown, string][] = [
        [[{ id: 'a' }, { id: 'b', max_tokens: -5 }], 'candidates[1]: "max_tokens" must be'],
        [[{ id: 'a', max_tokens: Number.NaN }], 'candidates[0]: "max_tokens" must be'],
        [[{ id: 'a' }, { id: 7 }], 'candidates[1]: "id" must be'],
        [[{ id: '' }], 'candidates[0]: "id" must be'],
        [[{ id: 'new', group: 5 }], 'candidates[0]: "group" must be'],
        [[{ id: 'a', prompt_tokens: -100000 }], 'candidates[0]: "prompt_tokens" must be'],
        [[{ id: 'a' }, null], 'candidates[1]: each candidate must be an object'],
        [null, 'candidates: must be an array'],
      ];
      for (const [candidates, message] of cases) {
        const error = thrown(() => allocator.plan(candidates as Candidate[], { rollouts: 16 }));
        expect(error.code, message).toBe('BAD_INPUT');
        expect(error.message).toContain(message);
      }
      expect(rowsOf(state)).toBe(before);
      // What a reader made is planned as before: the same plan as from plain objects.
      const parsed = parsePromptsAt('{"id":"a","max_tokens":512}\n{"id":"b","group":"g"}\n', 'p.jsonl').candidates;
      const plan = allocator.plan(parsed, { rollouts: 8 }, { step: 1 });
      expect(plan.allocations.map((a) => a.n).reduce((x, y) => x + y, 0)).toBe(8);
      // A reader's array grown by the caller since is checked again.
      parsed.push({ id: 'c', max_tokens: -5 });
      expect(thrown(() => allocator.plan(parsed, { rollouts: 8 })).message).toContain('candidates[2]: "max_tokens" must be');
    });
  });

  it('refuses the same candidates on the async allocator', async () => {
    const store = await openAsyncStore(join(tempDir(), 'state.db'));
    const allocator = new AsyncAllocator(store);
    try {
      await expect(allocator.plan([{ id: 'a', max_tokens: -5 }], { rollouts: 4 })).rejects.toMatchObject({ code: 'BAD_INPUT', message: expect.stringContaining('candidates[0]: "max_tokens"') });
    } finally {
      await allocator.close();
    }
  });

  it('names an unknown solver as it names an unknown policy: BAD_OPTION with its field', () => {
    withAllocator((allocator) => {
      for (const [options, field] of [[{ solver: 'simplex' }, 'solver'], [{ policy: 'nope' }, 'policy'], [{ surplusValue: 'nope' }, 'surplus_value']] as const) {
        const error = thrown(() => allocator.plan([{ id: 'a' }], { rollouts: 4 }, options));
        expect(error.code).toBe('BAD_OPTION');
        expect(error.fields).toEqual([field]);
      }
    });
  });
});

describe('a plan\'s options, budget and names are checked before the state is read', () => {
  const bad: [Record<string, unknown>, { rollouts: number }, string][] = [
    [{ policy: 'bayz' }, { rollouts: 8 }, 'policy: unknown name "bayz"'],
    [{ solver: 'simplex' }, { rollouts: 8 }, 'solver: unknown name "simplex"'],
    [{ minN: 10, maxN: 5 }, { rollouts: 8 }, 'max_n must be an integer ≥ 10, got 5'],
    [{}, { rollouts: -5 }, 'budget_rollouts must be an integer ≥ 0, got -5'],
  ];

  it('Allocator.plan: the store is never asked (a typo in a name was answered after reading 10⁶ rows: 1.1 s)', () => {
    const store = new SqliteStore(join(tempDir(), 'state.db'));
    const reads: unknown[] = [];
    const read = store.snapshot.bind(store);
    store.snapshot = (...args) => (reads.push(args), read(...args));
    const allocator = new Allocator({ store });
    try {
      for (const [options, budget, message] of bad) {
        expect(thrown(() => allocator.plan([{ id: 'a' }], budget, options)).message, message).toContain(message);
      }
      expect(reads).toHaveLength(0);
      allocator.plan([{ id: 'a' }], { rollouts: 8 });
      expect(reads).toHaveLength(1); // the counter counts
    } finally {
      allocator.close();
    }
  });

  it('AsyncAllocator.plan (the service, plan on PostgreSQL): the same', async () => {
    const store = await openAsyncStore(join(tempDir(), 'state.db'));
    const reads: unknown[] = [];
    const read = store.snapshot.bind(store);
    store.snapshot = (...args) => (reads.push(args), read(...args));
    const allocator = new AsyncAllocator(store);
    try {
      for (const [options, budget, message] of bad) {
        await expect(allocator.plan([{ id: 'a' }], budget, options), message).rejects.toThrow(message);
      }
      expect(reads).toHaveLength(0);
      await allocator.plan([{ id: 'a' }], { rollouts: 8 });
      expect(reads).toHaveLength(1);
    } finally {
      await allocator.close();
    }
  });
});

describe('observe checks a result batch built by hand', () => {
  it('refuses a reward of 5 or NaN in a hand-built batch, applying nothing; takes a batchOf batch', () => {
    withAllocator((allocator, state) => {
      allocator.observe([{ prompt_id: 'z', step: 0, reward: 1 }]);
      const before = rowsOf(state);
      const bad: [unknown, string][] = [
        [{ results: [{ prompt_id: 'z', step: 1, reward: 5 }], digest: 'd', keys: ['k'] }, 'results.results[0]: "reward" must be a number in [0, 1], got 5'],
        [{ results: [{ prompt_id: 'z', step: 1, reward: Number.NaN }], digest: 'd', keys: ['k'] }, 'results.results[0]: "reward" must be a number in [0, 1], got NaN'],
        [{ results: [{ prompt_id: 'z', step: 1, reward: 1 }], digest: 'd', keys: [] }, 'results.keys: must be an array of one key a result'],
        [{ results: [{ prompt_id: '', step: 1, reward: 1 }], digest: 'd', keys: ['k'] }, 'results.results[0]: "prompt_id" must be'],
        [{}, 'results.results: must be an array'],
      ];
      for (const [batch, message] of bad) {
        const error = thrown(() => allocator.observe(batch as ResultBatch));
        expect(error.code).toBe('BAD_INPUT');
        expect(error.message).toContain(message);
      }
      expect(rowsOf(state)).toBe(before);
      const grown = batchOf([{ prompt_id: 'z', step: 1, reward: 0 }]);
      grown.results.push({ prompt_id: 'z', step: 1, reward: 5 });
      grown.keys.push('k2');
      expect(thrown(() => allocator.observe(grown)).message).toContain('results.results[1]: "reward" must be a number in [0, 1], got 5');
      expect(rowsOf(state)).toBe(before);
      const good = batchOf([{ prompt_id: 'z', step: 1, reward: 0 }]);
      expect(allocator.observe(good).applied).toBe(1);
      const byHand = { results: [{ prompt_id: 'z', step: 2, reward: 1 }], digest: 'mine', keys: ['mine:0'] };
      expect(allocator.observe(byHand).applied).toBe(1);
      expect(allocator.posterior('z').rollouts).toBe(3);
    });
  });
});

describe('a closed allocator', () => {
  it('throws STATE_ERROR saying so, for plan, observe and posterior; closing twice does nothing', () => {
    const allocator = createAllocator();
    allocator.close();
    allocator.close();
    for (const call of [() => allocator.plan([{ id: 'a' }], { rollouts: 4 }), () => allocator.observe([{ prompt_id: 'a', reward: 1 }]), () => allocator.posterior('a')]) {
      const error = thrown(call);
      expect(error.code).toBe('STATE_ERROR');
      expect(error.message).toContain('this allocator was closed');
    }
  });
});

describe('posterior(id) reads its row and the pooled rows', () => {
  it('gives the figures of a whole read, to the last digits of a sum, and the async allocator\'s', async () => {
    const state = join(tempDir(), 'state.db');
    const allocator = new Allocator({ state });
    try {
      const lines = Array.from({ length: 300 }, (_, i) => ({ prompt_id: `p${i}`, step: i % 5, group: i % 3 === 0 ? 'g' : undefined, rewards: [i % 2, (i >> 1) % 2, 1, 0], tokens: [100 + i, 200, 300, 400] }));
      allocator.observe(lines);
      const store = await openAsyncStore(state);
      const viaAsync = new AsyncAllocator(store);
      try {
        for (const [id, candidate] of [['p7', {}], ['p9', { group: 'g' }], ['unseen', {}], ['unseen', { group: 'g', max_tokens: 2048 }]] as const) {
          const whole = posteriorView(allocator.snapshot(), id, candidate, resolvePlanOptions({}));
          const mine = allocator.posterior(id, candidate);
          for (const key of ['alpha', 'beta', 'p_mean', 'expected_tokens'] as const) expect(mine[key]).toBeCloseTo(whole[key], 9);
          expect(mine.rollouts).toBe(whole.rollouts);
          expect(await viaAsync.posterior(id, candidate)).toEqual(mine);
        }
      } finally {
        await viaAsync.close();
      }
    } finally {
      allocator.close();
    }
  });
});

describe('the round loop gives the step\'s results with their tokens', () => {
  it('step.results observed teaches the state lengths; rewards alone did not', () => {
    withAllocator((allocator) => {
      const candidates = Array.from({ length: 8 }, (_, i) => ({ id: `q${i}`, max_tokens: 4096 }));
      const generate = (p: { allocations: { prompt_id: string; n: number }[] }): RoundRollout[] =>
        p.allocations.flatMap((a) => Array.from({ length: a.n }, (_, j) => ({ prompt_id: a.prompt_id, reward: j % 2, tokens: 300 })));
      const done = runStepRounds({ candidates, budget: { rollouts: 64 }, rounds: 2, plan: (r) => allocator.plan(r.candidates, r.budget, { roundsLeft: r.roundsLeft, ...(r.step === undefined ? {} : { step: r.step }) }) }, generate);
      expect(done.results.length).toBe(done.spent.rollouts);
      expect(done.results.every((r) => r.tokens === 300 && r.step === done.plans[0]!.step)).toBe(true);
      expect(new Set(done.results.map((r) => r.prompt_id))).toEqual(new Set(done.rewards.keys()));
      expect(allocator.posterior('q0', { max_tokens: 4096 }).expected_tokens).toBeGreaterThan(1000); // nothing learnt yet
      expect(allocator.observe(done.results).applied).toBe(64);
      // Every rollout took 300 tokens: what the state now expects of q0, far from the assumed length.
      expect(allocator.posterior('q0', { max_tokens: 4096 }).expected_tokens).toBeLessThan(600);
    });
  });

  it('refuses a generate function\'s rollout with a reward outside [0, 1], or beyond its prompt\'s n', () => {
    withAllocator((allocator) => {
      const input = { candidates: [{ id: 'a' }, { id: 'b' }], budget: { rollouts: 8 }, rounds: 1, plan: (r: { candidates: readonly Candidate[]; budget: { rollouts?: number } }) => allocator.plan(r.candidates, r.budget) };
      const nan = thrown(() => runStepRounds(input, (p) => p.allocations.map((a) => ({ prompt_id: a.prompt_id, reward: Number.NaN }))));
      expect(nan.message).toBe('round 1: the generate function\'s rollout 0: "reward" must be a number in [0, 1], got NaN');
      const extra = thrown(() => runStepRounds(input, (p) => p.allocations.flatMap((a) => Array.from({ length: a.n * 3 }, () => ({ prompt_id: a.prompt_id, reward: 1 })))));
      expect(extra.message).toMatch(/^round 1: the generate function's rollout \d+: prompt "a" has 5 rollouts, more than this round's plan gives it \(4\)$/);
      const stranger = thrown(() => runStepRounds(input, () => [{ prompt_id: 'zz', reward: 1 }]));
      expect(stranger.message).toContain('prompt "zz" has 1 rollout, more than this round\'s plan gives it (0)');
      const tokens = thrown(() => runStepRounds(input, (p) => p.allocations.map((a) => ({ prompt_id: a.prompt_id, reward: 1, tokens: -3 }))));
      expect(tokens.message).toBe('round 1: the generate function\'s rollout 0: "tokens" must be a non-negative number, null or absent, got -3');
      // A boolean reward is a reward, as in a results file.
      const booleans = runStepRounds(input, (p) => p.allocations.map((a) => ({ prompt_id: a.prompt_id, reward: true as unknown as number })));
      expect(booleans.spent.rollouts).toBe(2);
    });
  });
});

describe('an infeasible token budget on prompts of unknown length', () => {
  it('says each rollout was counted at its max_tokens (a long-CoT first plan: simulate --no-skip failed at step 0 without saying why)', () => {
    withAllocator((allocator) => {
      const error = thrown(() => allocator.plan([{ id: 'a', max_tokens: 16000 }, { id: 'b', max_tokens: 16000 }], { tokens: 40000 }));
      expect(error.code).toBe('BUDGET_INFEASIBLE');
      expect(error.message).toBe('budget infeasible: 2 prompts × 2 rollouts (min_n) need ~64000 tokens; budget is 40000 tokens (2 prompts have no length data (their own, their group\'s or any prompt\'s): expected tokens per rollout assumed, 2 at their max_tokens). Raise budget_tokens, lower min_n, or set skip');
      // With lengths learnt, the same budget plans.
      allocator.observe([{ prompt_id: 'a', step: 0, rewards: [1, 0], tokens: [3000, 5000] }, { prompt_id: 'b', step: 0, rewards: [0, 0], tokens: [4000, 6000] }]);
      expect(allocator.plan([{ id: 'a', max_tokens: 16000 }, { id: 'b', max_tokens: 16000 }], { tokens: 40000 }).totals.rollouts).toBeGreaterThanOrEqual(4);
    });
  });
});

// A second pass as a library user (2026-11-29, evening): options the CLI and the service
// cannot send were taken silently. `new Allocator({ stat: 'run.db' })` planned on a state in
// memory; `{ min_n: 4 }` (as errors, flags and the service name it) planned at the default 2.
describe('the library refuses option keys it does not take', () => {
  const candidates = [{ id: 'a' }, { id: 'b' }];
  it('names the unknown key, its library spelling, and changes nothing', () => {
    withAllocator((allocator, state) => {
      allocator.observe([{ prompt_id: 'a', step: 0, rewards: [1, 0] }]);
      const before = rowsOf(state);
      const cases: [() => unknown, RegExp][] = [
        [() => allocator.plan(candidates, { rollouts: 16 }, { min_n: 4 } as never), /^options\.min_n: unknown option "min_n"; the library's name for it is minN \(expected one of minN, maxN/],
        [() => allocator.plan(candidates, { rollouts: 16 }, { maxn: 4 } as never), /^options\.maxn: unknown option "maxn"; the library's name for it is maxN/],
        [() => allocator.plan(candidates, { rollouts: 16 }, { decay: 0.99 } as never), /^options\.decay must be an object \{forgetPerStep, reobserveDiscount\}, got 0\.99/],
        [() => allocator.plan(candidates, { rollouts: 16 }, { prior: { min_strength: 1 } } as never), /^options\.prior\.min_strength: unknown option "min_strength"; the library's name for it is minStrength/],
        [() => allocator.plan(candidates, { rollouts: 16, token: 100 } as never), /^budget\.token: unknown field "token" \(expected one of rollouts, tokens\)/],
        [() => allocator.observe([{ prompt_id: 'b', step: 1, rewards: [1] }], { forgetPerStep: 0.9 } as never), /^options\.forgetPerStep: unknown option "forgetPerStep"/],
        [() => allocator.posterior('a', {}, { decay: { forget: 0.5 } } as never), /^options\.decay\.forget: unknown option "forget" \(expected one of forgetPerStep, reobserveDiscount\)/],
        [() => allocator.plan(candidates, { rollouts: 16 }, { seed: null } as never), /^options\.seed is null: leave the option out for its default, or give a value$/],
        [() => allocator.plan(candidates, { rollouts: 16, tokens: null } as never), /^budget\.tokens is null: leave the field out/],
      ];
      for (const [call, message] of cases) {
        const error = thrown(call);
        expect(error.code).toBe('BAD_OPTION');
        expect(error.message).toMatch(message);
      }
      expect(rowsOf(state)).toBe(before);
    });
  });

  it('refuses an allocator\'s unknown keys and defaults, before it opens a state', () => {
    const dir = tempDir();
    const state = join(dir, 'run.db');
    expect(thrown(() => new Allocator({ stat: state } as never)).message).toBe('allocator options.stat: unknown option "stat" (expected one of state, store, defaults, registries)');
    expect(thrown(() => new Allocator({ state, defaults: { max_n: 16 } } as never)).message).toMatch(/^defaults\.max_n: unknown option "max_n"; the library's name for it is maxN/);
    expect(existsSync(state)).toBe(false);
  });

  it('refuses them on the async allocator and in planStep too', async () => {
    const store = await openAsyncStore(join(tempDir(), 'state.db'));
    try {
      expect(() => new AsyncAllocator(store, { seeds: 3 } as never)).toThrow(/^defaults\.seeds: unknown option "seeds"/);
      const allocator = new AsyncAllocator(store);
      await expect(allocator.plan(candidates, { rollouts: 16 }, { rounds_left: 2 } as never)).rejects.toThrow(/^options\.rounds_left: unknown option "rounds_left"; the library's name for it is roundsLeft/);
    } finally {
      await store.close();
    }
    expect(() => planStep(snapshotOf([], null), candidates, { rollouts: 16 }, { fresh_cap: 0 } as never, createRegistries())).toThrow(/^options\.fresh_cap: unknown option "fresh_cap"; the library's name for it is freshCap/);
  });

  it('checks the values of the groups only the library takes (prior, length): a NaN plan before', () => {
    const bad: [Record<string, unknown>, string][] = [
      [{ skip: 'no' }, 'skip must be true or false, got "no"'],
      [{ length: { shrinkage: -1 } }, 'length.shrinkage must be a finite number ≥ 0, got -1'],
      [{ length: { defaultTokens: 'x' } }, 'length.default_tokens must be an integer ≥ 1, got "x"'],
      [{ prior: { minPrompts: 0 } }, 'prior.min_prompts must be an integer ≥ 1, got 0'],
      [{ prior: { minStrength: 0 } }, 'prior.min_strength must be a finite number > 0, got 0'],
      [{ prior: { maxStrength: 0.25 } }, 'prior.max_strength must be a finite number ≥ 0.5, got 0.25'],
      [{ prior: { hintDefaultStrength: Number.POSITIVE_INFINITY } }, 'prior.hint_default_strength must be a finite number ≥ 0, got'],
    ];
    for (const [options, message] of bad) expect(thrown(() => resolvePlanOptions(options as never)).message.startsWith(message), JSON.stringify(options)).toBe(true);
    // Before: { length: { defaultTokens: 'x' } } planned every prompt at min_n under a rollout budget of 8 a prompt.
    const plan = createAllocator().plan(candidates, { rollouts: 16 }, { length: { defaultTokens: 2048 }, prior: { minPrompts: 1 } });
    expect(plan.allocations.map((a) => a.n)).toEqual([8, 8]);
  });
});

describe('a value function registered by a caller', () => {
  const term = { coef: 1, a: 1, b: 1, u: 0, w: 0 } as const;
  it('is refused at register when the planner cannot use it, naming the term and field', () => {
    const bad: [unknown, string][] = [
      [(p: number, n: number) => p * n, 'value function "mine": the entry must be an object {name, formula, terms}: its value as a sum of monomials in p and n (ValueFunction), got a function'],
      [{ name: 'mine', formula: 'x' }, 'value function "mine": terms must be a non-empty array of monomials {coef, a, b, u, w, e?}, got nothing'],
      [{ name: 'mine', formula: 'x', terms: [term, { ...term, coef: Number.NaN }] }, 'value function "mine": terms[1].coef must be a finite number, got NaN'],
      [{ name: 'mine', formula: 'x', terms: [{ ...term, a: -1 }] }, 'value function "mine": terms[0].a must be a finite number ≥ 0, got -1'],
      [{ name: 'mine', formula: 'x', terms: [{ ...term, w: 2 }] }, 'value function "mine": terms[0].w must be 0 or 1, got 2'],
      [{ name: 'mine', formula: 'x', terms: [term], singleRound: { name: 's', formula: 'y', terms: [] } }, 'value function "mine".singleRound: terms must be a non-empty array'],
    ];
    for (const [entry, message] of bad) {
      const registries = createRegistries();
      const error = thrown(() => registries.values.register('mine', entry as never));
      expect(error.code).toBe('BAD_INPUT');
      expect(error.message.startsWith(message), error.message).toBe(true);
      expect(registries.values.has('mine')).toBe(false);
    }
  });

  it('plans when it is well formed: p(1−p) gives the middling prompt more than the two seen all right', () => {
    const registries = createRegistries().values.register('spread', { name: 'spread', formula: 'p(1−p)', terms: [term] });
    const allocator = createAllocator({ registries: { ...createRegistries(), values: registries } });
    try {
      allocator.observe([{ prompt_id: 'easy', step: 0, rewards: [1, 1, 1, 1, 1, 1, 1, 1] }, { prompt_id: 'mid', step: 0, rewards: [1, 0, 1, 0, 1, 0, 1, 0] }]);
      const plan = allocator.plan([{ id: 'easy' }, { id: 'mid' }], { rollouts: 16 }, { value: 'spread' });
      const n = Object.fromEntries(plan.allocations.map((a) => [a.prompt_id, a.n]));
      expect(n.mid!).toBeGreaterThan(n.easy!);
    } finally {
      allocator.close();
    }
  });
});

// Style review, 2026-11-29: openAsyncStore chose the backend from the URL's shape alone, so a
// store registered for redis:// URLs was never called (the URL went to SQLite, which refused it).
describe('a store registered under a URL scheme', () => {
  it('opens that scheme\'s URLs; other URLs are still refused, and files and postgres:// URLs go where they went', async () => {
    const opened: string[] = [];
    const registry = createStoreRegistry().register('redis', async (location) => {
      opened.push(location);
      return asyncStoreOf(new SqliteStore(':memory:'));
    });
    const store = await openAsyncStore('redis://cache.example:6379/0', registry);
    await store.close();
    expect(opened).toEqual(['redis://cache.example:6379/0']);
    expect([storeKindOf('REDIS://x', registry), storeKindOf('postgres://h/db', registry), storeKindOf('run.db', registry), storeKindOf('redis://x')]).toEqual(['redis', 'postgres', 'sqlite', 'sqlite']);
    await expect(openAsyncStore('https://rb.example/state', registry)).rejects.toThrow(/"https:\/\/rb\.example\/state" is a URL, and a state is a SQLite file or a postgres:\/\/ URL/);
    expect(opened).toHaveLength(1);
  });
});
