import { Database } from './sqlite.js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Allocator, AsyncAllocator, MemoryState, Service, SqliteStore, asyncStoreOf, batchOf, metaChanges, snapshotOf, type Candidate } from '../src/index.js';
import { cli } from './cli-helpers.js';

const dirs: string[] = [];
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'rb-meta-'));
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const candidates: Candidate[] = [
  { id: 'a', group: 'easy', prior_pass_rate: 0.9, prior_samples: 16 },
  { id: 'b', group: 'hard', prior_pass_rate: 0.05 },
  { id: 'c' },
];

describe('plan records its candidates\' group and hint (store/meta.ts)', () => {
  it('records them after planning; the same plan again changes nothing and plans the same', () => {
    const allocator = new Allocator();
    const first = allocator.plan(candidates, { rollouts: 24 });
    expect(allocator.store.get('a')).toMatchObject({ group: 'easy', priorPassRate: 0.9, priorSamples: 16, rollouts: 0 });
    expect(allocator.store.get('b')).toMatchObject({ group: 'hard', priorPassRate: 0.05, rollouts: 0 });
    // A candidate without group or hint is not recorded.
    expect(allocator.store.get('c')).toBeUndefined();
    expect(allocator.store.count()).toBe(0);
    const second = allocator.plan(candidates, { rollouts: 24 });
    expect(second.allocations).toEqual(first.allocations);
    allocator.close();
  });

  it('records nothing when planning fails', () => {
    const allocator = new Allocator();
    // 3 prompts × min_n 2 need 6 rollouts: a budget of 5 is infeasible.
    expect(() => allocator.plan(candidates, { rollouts: 5 })).toThrow(/budget infeasible/);
    expect(allocator.store.get('a')).toBeUndefined();
    allocator.close();
  });

  it('a group first given to an observed prompt counts in this very plan, as it will after the record', () => {
    // Ten prompts observed without a group; the next plan names their group.
    const results = Array.from({ length: 10 }, (_, i) => ({ prompt_id: `o${i}`, step: 0, rewards: i < 8 ? [1, 1, 1, 1] : [0, 0, 0, 0] }));
    const a = new Allocator();
    a.observe(results);
    const named: Candidate[] = [...Array.from({ length: 10 }, (_, i) => ({ id: `o${i}`, group: 'g' })), { id: 'fresh', group: 'g' }];
    const planned = a.plan(named, { rollouts: 44 });
    // The same state with the group already recorded plans the same.
    const b = new Allocator();
    b.observe(results.map((r) => ({ ...r, group: 'g' })));
    expect(planned.allocations).toEqual(b.plan(named, { rollouts: 44 }).allocations);
    // Without the record, 'fresh' would get the all-prompts prior: check the group's was used.
    const fresh = planned.allocations.find((x) => x.prompt_id === 'fresh')!;
    const groupPrior = b.posterior('fresh', { group: 'g' });
    expect(fresh.p_mean).toBeCloseTo(groupPrior.p_mean, 12);
    expect(a.store.get('o0')?.group).toBe('g');
    a.close();
    b.close();
  });

  it('the replay\'s MemoryState records and observes as the SQLite store does', () => {
    const store = new SqliteStore(':memory:');
    const memory = new MemoryState(undefined);
    const decay = { forgetPerStep: 0.995, reobserveDiscount: 0.85 };
    const steps: { candidates: Candidate[]; results: { prompt_id: string; step: number; rewards: number[] }[] }[] = [
      { candidates, results: [{ prompt_id: 'a', step: 0, rewards: [1, 1, 0] }, { prompt_id: 'c', step: 0, rewards: [0, 0] }] },
      { candidates: [{ id: 'a', prior_pass_rate: 0.7 }, { id: 'c', group: 'mid' }, { id: 'd', prior_pass_rate: 0.4, prior_samples: 8 }], results: [{ prompt_id: 'd', step: 3, rewards: [0, 1] }] },
    ];
    for (const s of steps) {
      // What Allocator.plan records, and what planWithState records.
      store.recordPrompts(metaChanges(store.snapshot(), s.candidates));
      memory.record(s.candidates);
      store.apply(batchOf(s.results), decay);
      memory.observe(s.results[0]!.step, s.results.map((r) => ({ prompt_id: r.prompt_id, step: r.step, rewards: r.rewards, tokens: null })));
    }
    const fromStore = store.snapshot();
    const fromMemory = snapshotOf(memory.states.values());
    for (const id of ['a', 'b', 'c', 'd']) {
      const x = fromStore.get(id)!;
      const y = fromMemory.get(id)!;
      expect(y, id).toBeDefined();
      for (const k of ['group', 'priorPassRate', 'priorSamples', 'lastStep', 'rollouts'] as const) expect(y[k], `${id}.${k}`).toBe(x[k]);
      for (const k of ['successes', 'failures'] as const) expect(y[k], `${id}.${k}`).toBeCloseTo(x[k], 12);
    }
    expect(fromStore.get('a')?.priorPassRate).toBe(0.7);
    expect(fromStore.get('c')?.group).toBe('mid');
    store.close();
  });
});

describe('SQLite state files made before the hint columns', () => {
  it('open, gain the columns, and keep their rows', () => {
    const path = join(tempDir(), 'old.db');
    const db = new Database(path);
    db.exec(`CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
      CREATE TABLE prompts (id TEXT PRIMARY KEY, grp TEXT, successes REAL NOT NULL, failures REAL NOT NULL, last_step INTEGER NOT NULL,
        rollouts INTEGER NOT NULL, reward_sum REAL NOT NULL, correct_count INTEGER NOT NULL, correct_tokens REAL NOT NULL,
        wrong_count INTEGER NOT NULL, wrong_tokens REAL NOT NULL);
      CREATE TABLE seen (rollout_id TEXT PRIMARY KEY) WITHOUT ROWID;
      INSERT INTO prompts VALUES ('q', 'g', 2, 1, 4, 3, 2, 0, 0, 0, 0);
      INSERT INTO meta VALUES ('last_step', '4');`);
    db.close();
    const store = new SqliteStore(path);
    expect(store.get('q')).toMatchObject({ group: 'g', successes: 2, failures: 1, lastStep: 4 });
    expect(store.get('q')?.priorPassRate).toBeUndefined();
    store.recordPrompts([{ id: 'q', priorPassRate: 0.5, priorSamples: 4 }]);
    expect(store.get('q')).toMatchObject({ group: 'g', successes: 2, priorPassRate: 0.5, priorSamples: 4 });
    store.close();
  });
});

describe('CLI: hints in the prompts file', () => {
  it('plan records them, inspect shows them; a bad hint is exit 2 naming file:line, field and value, with nothing written', async () => {
    const dir = tempDir();
    const prompts = join(dir, 'p.jsonl');
    const state = join(dir, 's.db');
    writeFileSync(prompts, '{"id":"a","group":"olympiad","prior_pass_rate":0.125,"prior_samples":16}\n{"id":"b"}\n');
    const ok = await cli(['plan', '--prompts', prompts, '--state', state, '--budget-rollouts', '16']);
    expect(ok.code, ok.stderr).toBe(0);
    const shown = await cli(['inspect', '--state', state, '--prompt', 'a']);
    expect(shown.code, shown.stderr).toBe(0);
    expect(JSON.parse(shown.stdout)).toMatchObject({ group: 'olympiad', prior_pass_rate: 0.125, prior_samples: 16, seen: false, last_step: null, rollouts: 0 });

    for (const [line, message] of [
      ['{"id":"x","prior_pass_rate":1.5}', /p2\.jsonl:2: "prior_pass_rate" must be a number in \[0, 1\].*got 1\.5/],
      ['{"id":"x","prior_pass_rate":"0.5"}', /p2\.jsonl:2: "prior_pass_rate" must be a number in \[0, 1\].*got "0\.5"/],
      ['{"id":"x","prior_pass_rate":0.5,"prior_samples":0}', /p2\.jsonl:2: "prior_samples" must be a positive integer, got 0/],
      ['{"id":"x","prior_samples":8}', /p2\.jsonl:2: "prior_samples" needs "prior_pass_rate"/],
    ] as const) {
      const bad = join(dir, 'p2.jsonl');
      writeFileSync(bad, `{"id":"y","group":"new-group","prior_pass_rate":0.5}\n${line}\n`);
      const r = await cli(['plan', '--prompts', bad, '--state', state, '--budget-rollouts', '16']);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(message);
      // Nothing written: the good first line's prompt was not recorded.
      const y = await cli(['inspect', '--state', state, '--prompt', 'y']);
      expect(JSON.parse(y.stdout).prior_pass_rate).toBeNull();
    }
  });
});

describe('CLI: a plan that cannot be written', () => {
  it('records nothing: the state is as it was (it recorded the hints, then failed on the plan file)', async () => {
    const dir = tempDir();
    const state = join(dir, 's.db');
    writeFileSync(join(dir, 'r.jsonl'), '{"prompt_id":"a","step":0,"rewards":[1,0]}\n');
    expect((await cli(['observe', '--results', join(dir, 'r.jsonl'), '--state', state])).code).toBe(0);
    const prompts = join(dir, 'p.jsonl');
    writeFileSync(prompts, '{"id":"a"}\n{"id":"q1","group":"math","prior_pass_rate":0.3}\n');
    const before = await cli(['inspect', '--state', state]);
    // /dev/full: every write fails with ENOSPC, as on a full disk.
    const full = await cli(['plan', '--prompts', prompts, '--state', state, '--budget-rollouts', '8', '--out', '/dev/full']);
    expect(full.code).toBe(2);
    expect(full.stderr).toContain('/dev/full: cannot write (ENOSPC)');
    expect((await cli(['inspect', '--state', state])).stdout).toBe(before.stdout);
    const q1 = JSON.parse((await cli(['inspect', '--state', state, '--prompt', 'q1'])).stdout) as { group: string | null; prior_pass_rate: number | null };
    expect([q1.group, q1.prior_pass_rate]).toEqual([null, null]);
    // Written, the same plan records them.
    expect((await cli(['plan', '--prompts', prompts, '--state', state, '--budget-rollouts', '8', '--out', join(dir, 'plan.json')])).code).toBe(0);
    expect(JSON.parse((await cli(['inspect', '--state', state, '--prompt', 'q1'])).stdout)).toMatchObject({ group: 'math', prior_pass_rate: 0.3 });
  });
});

describe('CLI inspect: the hint calibration', () => {
  it('is the cautious default before any hinted prompt is observed, then fitted from observe\'s results', async () => {
    const dir = tempDir();
    const state = join(dir, 's.db');
    const prompts = join(dir, 'p.jsonl');
    const results = join(dir, 'r.jsonl');
    // 60 prompts whose 8 rollouts follow their hint: k = round(8·h).
    const lines = Array.from({ length: 60 }, (_, i) => ({ id: `q${i}`, group: i % 2 === 0 ? 'even' : 'odd', prior_pass_rate: (i % 9) / 8 > 1 ? 1 : (i % 9) / 8, prior_samples: 8 }));
    writeFileSync(prompts, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
    expect((await cli(['plan', '--prompts', prompts, '--state', state, '--budget-rollouts', '480'])).code).toBe(0);
    const before = JSON.parse((await cli(['inspect', '--state', state])).stdout);
    expect(before.prompts).toBe(0);
    expect(before.hint_calibration).toEqual([{ group: null, source: 'default', prompts: 0, intercept: null, slope: null, slope_se: null, trust: 0, residual_strength: null }]);
    writeFileSync(results, lines.map((l) => {
      const k = Math.round(8 * l.prior_pass_rate);
      return JSON.stringify({ prompt_id: l.id, step: 0, rewards: Array.from({ length: 8 }, (_, j) => (j < k ? 1 : 0)) });
    }).join('\n') + '\n');
    expect((await cli(['observe', '--state', state, '--results', results])).code).toBe(0);
    const after = JSON.parse((await cli(['inspect', '--state', state])).stdout);
    expect(after.prompts).toBe(60);
    const pooled = after.hint_calibration.find((c: { group: string | null }) => c.group === null);
    expect(pooled).toMatchObject({ source: 'all', prompts: 60 });
    expect(pooled.slope).toBeGreaterThan(0.5);
    expect(pooled.trust).toBeGreaterThan(0.9);
    // 30 prompts a group: each has its own calibration (hintMinPrompts 30).
    expect(after.hint_calibration.map((c: { group: string | null; source: string }) => `${c.group}:${c.source}`)).toEqual(['null:all', 'even:group', 'odd:group']);
  });
});

describe('service: hints in a plan request', () => {
  it('records them (GET /v1/prompts shows them), and a bad one is a 400 naming the candidate, the field and the value, with nothing recorded', async () => {
    const service = new Service(new AsyncAllocator(asyncStoreOf(new SqliteStore(':memory:'))));
    try {
      const body = (candidates: unknown[]) => JSON.stringify({ candidates, budget: { rollouts: 16 } });
      const ok = await service.handle({ method: 'POST', path: '/v1/plan', body: body([{ id: 'a', group: 'g', prior_pass_rate: 0.75, prior_samples: 8 }, { id: 'b' }]) });
      expect(ok.status).toBe(200);
      const a = JSON.parse((await service.handle({ method: 'GET', path: '/v1/prompts/a', body: '' })).body);
      expect(a).toMatchObject({ group: 'g', prior_pass_rate: 0.75, prior_samples: 8, seen: false, rollouts: 0, last_step: null });
      const bad = await service.handle({ method: 'POST', path: '/v1/plan', body: body([{ id: 'c', prior_pass_rate: 0.5 }, { id: 'd', prior_pass_rate: -0.25 }]) });
      expect(bad.status).toBe(400);
      expect(JSON.parse(bad.body).error).toMatchObject({ code: 'BAD_INPUT', field: 'body.candidates[1].prior_pass_rate', value: '-0.25' });
      const c = JSON.parse((await service.handle({ method: 'GET', path: '/v1/prompts/c', body: '' })).body);
      expect(c.prior_pass_rate).toBeNull();
      const health = JSON.parse((await service.handle({ method: 'GET', path: '/healthz', body: '' })).body);
      expect(health.prompts).toBe(0);
    } finally {
      await service.allocator.close();
    }
  });
});
