import { connect } from 'node:net';
import { join } from 'node:path';
import seedrandom from 'seedrandom';
import { describe, expect, it } from 'vitest';
import { defaultDecay, asyncStoreOf, batchOf, openAsyncStore, SqliteStore, type AsyncStore, type PromptState } from '../src/index.js';
import { call, freshPgUrl, percentile, pgUrl, startService, stopService } from './service-helpers.js';
import { tempDir } from './temp.js';

const dir = tempDir('rb-rel-');
const PG = pgUrl();

/**
 * A state location per backend: a fresh SQLite file or a fresh PostgreSQL schema. Without a
 * server the PostgreSQL suite is registered and reported as skipped.
 */
const backends: [string, (name: string) => string, boolean][] = [
  ['sqlite', (name) => join(dir, `${name}.db`), false],
  ['postgres', () => freshPgUrl(PG!), PG === undefined],
];

async function withStore<T>(state: string, work: (s: AsyncStore) => Promise<T>): Promise<T> {
  const store = await openAsyncStore(state);
  try {
    return await work(store);
  } finally {
    await store.close();
  }
}

for (const [backend, location, skip] of backends) describe.skipIf(skip)(`reliability on ${backend}`, () => {
  it('load: concurrent clients observing and planning; applied evidence sums to what was sent, exactly', async () => {
    const state = location('load');
    // PostgreSQL: two service processes share the state, as several controllers would
    const children = await Promise.all(Array.from({ length: backend === 'postgres' ? 2 : 1 }, () => startService(['--state', state])));
    const CLIENTS = 8;
    const PER_OBSERVE = 8;
    const PROMPTS = 256;
    const DURATION_MS = 2000;
    const candidates = Array.from({ length: PROMPTS }, (_, i) => ({ id: `p${i}`, max_tokens: 2048 }));
    const planMs: number[] = [];
    const observeMs: number[] = [];
    let sentRollouts = 0;
    let sentReward = 0;
    let acked = 0;
    const deadline = performance.now() + DURATION_MS;
    await Promise.all(
      Array.from({ length: CLIENTS }, async (_, c) => {
        const child = children[c % children.length]!;
        const rng = seedrandom(`load-${backend}-${c}`);
        for (let k = 0; performance.now() < deadline; k++) {
          // dyadic rewards, one step: every sum is exact in floating point
          const results = Array.from({ length: PER_OBSERVE }, (_, j) => ({
            prompt_id: `p${Math.floor(rng() * PROMPTS)}`,
            step: 0,
            reward: Math.floor(rng() * 5) / 4,
            tokens: 100 + Math.floor(rng() * 900),
            rollout_id: `c${c}-${k}-${j}`,
          }));
          let t = performance.now();
          const o = await call(child.port, 'POST', '/v1/observe', results);
          observeMs.push(performance.now() - t);
          expect(o.status).toBe(200);
          expect(o.json.applied).toBe(PER_OBSERVE);
          acked += o.json.applied;
          for (const r of results) {
            sentRollouts++;
            sentReward += r.reward;
          }
          t = performance.now();
          const p = await call(child.port, 'POST', '/v1/plan', { candidates, budget: { rollouts: 8 * PROMPTS, tokens: 8 * PROMPTS * 600 } });
          planMs.push(performance.now() - t);
          expect(p.status).toBe(200);
        }
      }),
    );
    let appliedByServices = 0;
    for (const child of children) {
      const metrics = (await call(child.port, 'GET', '/metrics')).text;
      appliedByServices += Number(/^rollout_budget_observations_applied_total (\d+)$/m.exec(metrics)?.[1]);
      expect((await stopService(child)).code).toBe(0);
    }
    const totals = await withStore(state, async (s) => {
      const snap = await s.snapshot();
      let rollouts = 0;
      let successes = 0;
      let failures = 0;
      let rewardSum = 0;
      for (let i = 0; i < PROMPTS; i++) {
        const p = snap.get(`p${i}`);
        if (p === undefined) continue;
        rollouts += p.rollouts;
        successes += p.successes;
        failures += p.failures;
        rewardSum += p.rewardSum;
      }
      return { rollouts, successes, failures, rewardSum };
    });
    expect(totals.rollouts).toBe(sentRollouts);
    expect(totals.rewardSum).toBe(sentReward);
    expect(totals.successes).toBe(sentReward);
    expect(totals.failures).toBe(sentRollouts - sentReward);
    expect(appliedByServices).toBe(acked);
    expect(planMs.length).toBeGreaterThanOrEqual(CLIENTS);
    const seconds = DURATION_MS / 1000;
    console.log(
      `load [${backend}, ${children.length} service${children.length > 1 ? 's' : ''}]: ${CLIENTS} clients × ${seconds}s, ${PROMPTS} candidates/plan: ${planMs.length} plans (${(planMs.length / seconds).toFixed(0)}/s), ` +
        `plan latency p50 ${percentile(planMs, 50).toFixed(1)} ms, p99 ${percentile(planMs, 99).toFixed(1)} ms; ` +
        `${observeMs.length} observes × ${PER_OBSERVE} (p50 ${percentile(observeMs, 50).toFixed(1)} ms, p99 ${percentile(observeMs, 99).toFixed(1)} ms); ` +
        `rollouts sent ${sentRollouts} = applied ${totals.rollouts}, reward sent ${sentReward} = applied ${totals.rewardSum}`,
    );
  }, 30_000);

  it('crash: kill -9 mid-traffic, restart, re-send the unacknowledged: the state equals a clean run', async () => {
    const WRITERS = 4;
    const BATCHES = 40;
    const plan = Array.from({ length: WRITERS }, (_, w) => {
      const rng = seedrandom(`crash-${w}`);
      return Array.from({ length: BATCHES }, (_, k) =>
        Array.from({ length: 6 }, (_, j) => ({
          prompt_id: `w${w}-p${Math.floor(rng() * 8)}`, // writers own disjoint prompts: per-prompt order is fixed
          step: Math.floor(k / 5),
          reward: rng() < 0.4 ? 1 : 0,
          tokens: 50 + Math.floor(rng() * 500),
          rollout_id: `w${w}-b${k}-${j}`,
        })),
      );
    });
    const total = WRITERS * BATCHES;
    const state = location('crash');
    let child = await startService(['--state', state]);
    const next = new Array<number>(WRITERS).fill(0);
    let acked = 0;
    let failed = 0;
    let killedAt = -1;
    await Promise.all(
      plan.map(async (batches, w) => {
        while (next[w]! < BATCHES) {
          let r: Awaited<ReturnType<typeof call>>;
          try {
            r = await call(child.port, 'POST', '/v1/observe', batches[next[w]!]);
          } catch {
            failed++;
            return; // connection refused or reset: the service is gone
          }
          expect(r.status).toBe(200);
          next[w]!++;
          if (++acked === Math.floor(total / 3)) {
            killedAt = acked;
            child.proc.kill('SIGKILL');
          }
        }
      }),
    );
    const exit = await child.exited;
    expect(exit.signal).toBe('SIGKILL');
    expect(killedAt).toBeGreaterThan(0);
    expect(failed).toBeGreaterThan(0);
    child = await startService(['--state', state]);
    let resent = 0;
    let duplicates = 0;
    await Promise.all(
      plan.map(async (batches, w) => {
        for (let k = next[w]!; k < BATCHES; k++) {
          const r = await call(child.port, 'POST', '/v1/observe', batches[k]);
          expect(r.status).toBe(200);
          resent++;
          duplicates += r.json.duplicates;
        }
      }),
    );
    expect((await stopService(child)).code).toBe(0);

    const clean = asyncStoreOf(new SqliteStore(':memory:'));
    for (const batches of plan) for (const b of batches) await clean.apply(batchOf(b), defaultDecay);
    const want = await clean.snapshot();
    const got = await withStore(state, (s) => s.snapshot());
    expect(got.lastStep).toBe(want.lastStep);
    let compared = 0;
    for (let w = 0; w < WRITERS; w++) {
      for (let p = 0; p < 8; p++) {
        const a = got.get(`w${w}-p${p}`) as PromptState;
        const b = want.get(`w${w}-p${p}`) as PromptState;
        expect(a === undefined).toBe(b === undefined);
        if (b === undefined) continue;
        for (const k of ['successes', 'failures', 'rewardSum', 'correctTokens', 'wrongTokens'] as const) expect(a[k]).toBeCloseTo(b[k], 10);
        for (const k of ['lastStep', 'rollouts', 'correctCount', 'wrongCount'] as const) expect(a[k]).toBe(b[k]);
        compared++;
      }
    }
    expect(compared).toBeGreaterThanOrEqual(WRITERS * 6);
    await clean.close();
    console.log(
      `crash [${backend}]: ${total} batches; kill -9 after ${killedAt} acknowledged, ${failed} requests cut off; ` +
        `re-sent ${resent} (${duplicates} rollouts already applied before the kill, skipped); ${compared} prompts equal to a clean run`,
    );
  }, 30_000);
});

describe('fuzz', () => {
  it('random and truncated bodies: always 4xx, never a crash, nothing applied', async () => {
    const child = await startService(['--state', join(dir, 'fuzz.db'), '--body-limit', '65536']);
    await call(child.port, 'POST', '/v1/observe', [{ prompt_id: 'base', step: 0, rewards: [1, 0] }]);
    const rng = seedrandom('fuzz');
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rng() * xs.length)]!;
    const validPlan = { candidates: [{ id: 'a', max_tokens: 100 }, { id: 'b', prompt_tokens: 3 }], budget: { rollouts: 8 }, options: { min_n: 2 } };
    const validObserve = [{ prompt_id: 'a', step: 1, reward: 1, tokens: 5, rollout_id: 'f1' }, { prompt_id: 'b', rewards: [1, 0] }];
    const badValues: Record<string, unknown[]> = {
      reward: [-0.25, 1.5, '1', null, {}, [], 'NaN'],
      step: [-1, 0.5, '3', null, true],
      prompt_id: ['', 7, null, [], {}],
      rollouts: [-1, 2.5, '8', null, {}],
      id: ['', 5, null, false],
      min_n: [0, -2, 2.5, '2', null],
      max_tokens: [0, -5, 1.5, 'x'],
    };
    const mutate = (): { path: string; body: string } => {
      if (rng() < 0.5) {
        const body = structuredClone(validPlan) as Record<string, any>;
        const where = pick(['budget.rollouts', 'candidates.0.id', 'options.min_n', 'candidates.1.max_tokens', 'extra']);
        if (where === 'extra') body[pick(['cand', 'budgets', 'opts'])] = 1;
        else {
          const keys = where.split('.');
          let o = body;
          for (const k of keys.slice(0, -1)) o = o[k];
          o[keys.at(-1)!] = pick(badValues[keys.at(-1)!]!);
        }
        return { path: '/v1/plan', body: JSON.stringify(body) };
      }
      const body = structuredClone(validObserve) as Record<string, any>[];
      const key = pick(['reward', 'step', 'prompt_id']);
      body[0]![key] = pick(badValues[key]!);
      return { path: '/v1/observe', body: JSON.stringify(body) };
    };
    const bodies = (): { method: string; path: string; body?: string | Uint8Array } => {
      const kind = Math.floor(rng() * 7);
      if (kind === 0) return { method: 'POST', path: pick(['/v1/plan', '/v1/observe']), body: Uint8Array.from({ length: Math.floor(rng() * 400) }, () => Math.floor(rng() * 256)) };
      if (kind === 1) {
        const text = JSON.stringify(rng() < 0.5 ? validPlan : validObserve);
        return { method: 'POST', path: rng() < 0.5 ? '/v1/plan' : '/v1/observe', body: text.slice(0, 1 + Math.floor(rng() * (text.length - 1))) };
      }
      if (kind === 2) return { method: 'POST', ...mutate() };
      if (kind === 3) return { method: 'POST', path: pick(['/v1/plan', '/v1/observe']), body: 'x'.repeat(65537 + Math.floor(rng() * 1000)) };
      if (kind === 4) return { method: pick(['PUT', 'DELETE', 'PATCH', 'GET']), path: pick(['/v1/plan', '/v1/observe', '/nope', '/v1/prompts/']) };
      if (kind === 5) return { method: 'GET', path: pick(['/v1/prompts/%zz', '/v1/prompts/a?step=-1', '/v1/prompts/a?bogus=1', '/v1/prompts/a?max_tokens=x']) };
      return { method: 'POST', path: '/v1/observe', body: pick(['', '   ', 'null', '{}', '{"results": 5}', '[1,2]', '{"prompt_id":"a"}', '[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]']) };
    };
    const statuses = new Map<number, number>();
    const REQUESTS = 600;
    const t0 = performance.now();
    let sent = 0;
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        while (sent < REQUESTS) {
          sent++;
          const req = bodies();
          const r = await call(child.port, req.method, req.path, req.body);
          statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
          expect(r.status, `${req.method} ${req.path} ${String(req.body).slice(0, 120)}`).toBeGreaterThanOrEqual(400);
          expect(r.status, `${req.method} ${req.path} ${String(req.body).slice(0, 120)}`).toBeLessThan(500);
        }
      }),
    );
    // not HTTP at all: Node's parser answers 400 and the service keeps running
    const garbage = await new Promise<string>((resolve) => {
      const s = connect(child.port, '127.0.0.1', () => s.write('\x00\x01GARBAGE / HTTP/9\r\n\r\n'));
      let got = '';
      s.on('data', (d) => (got += d.toString()));
      s.on('close', () => resolve(got));
      s.on('error', () => resolve(got));
    });
    expect(garbage).toMatch(/^HTTP\/1\.1 400/);
    const ms = performance.now() - t0;
    expect(child.proc.exitCode).toBeNull();
    expect((await call(child.port, 'GET', '/healthz')).json).toEqual({ status: 'ok', store: 'sqlite', prompts: 1 });
    expect((await call(child.port, 'GET', '/v1/prompts/base')).json.rollouts).toBe(2);
    expect((await stopService(child)).code).toBe(0);
    const total = [...statuses.values()].reduce((a, b) => a + b, 0);
    expect(total).toBe(REQUESTS);
    console.log(`fuzz: ${total} bad requests in ${ms.toFixed(0)} ms, statuses ${JSON.stringify(Object.fromEntries([...statuses].sort()))}; service alive, nothing applied`);
  }, 30_000);
});
