import { connect } from 'node:net';
import { join } from 'node:path';
import seedrandom from 'seedrandom';
import { describe, expect, it } from 'vitest';
import { MAX_N_LIMIT, openAsyncStore } from '../src/index.js';
import { call, freshPgUrl, pgUrl, request, startService, stopService } from './service-helpers.js';
import { tempDir } from './temp.js';

/**
 * Issue 12: N clients plan and observe against one service while faulty requests arrive
 * (too deep, not UTF-8, NUL ids, "//", a browser's text/plain, a foreign Host, no or a wrong
 * token, plans past the deadline, oversize bodies, cut-off bodies, idle half-sent requests,
 * bytes that are not HTTP). Afterwards the evidence in the state sums exactly to what the good
 * clients sent, and the service stops cleanly on SIGTERM. Bounded: 3 s of traffic.
 */
const dir = tempDir('rb-stress-');
const PG = pgUrl();
const TOKEN = 'stress-token';
const auth = { authorization: `Bearer ${TOKEN}` };
const backends: [string, () => string][] = [
  ['sqlite', () => join(dir, 'stress.db')],
  ...(PG === undefined ? [] : [['postgres', () => freshPgUrl(PG)] as [string, () => string]]),
];

/** Writes raw bytes on a fresh connection; `hold` keeps it open that long before closing. */
function raw(port: number, bytes: string | Buffer, hold = 0): Promise<string> {
  return new Promise((resolve) => {
    let got = '';
    const s = connect(port, '127.0.0.1', () => {
      s.write(bytes);
      if (hold > 0) setTimeout(() => s.destroy(), hold);
    });
    s.on('data', (d) => (got += d.toString()));
    s.on('close', () => resolve(got));
    s.on('error', () => resolve(got));
  });
}

describe.each(backends)('stress on %s', (backend, location) => {
  it('good clients and faulty requests at once: every good request served, no 5xx but plan deadlines, evidence sums exactly', async () => {
    const state = location();
    const child = await startService(['--state', state, '--token', TOKEN, '--plan-timeout-s', '2', '--plan-threads', '2', '--body-limit', '262144']);
    const CLIENTS = 6;
    const PROMPTS = 128;
    const DURATION_MS = 3000;
    const candidates = Array.from({ length: PROMPTS }, (_, i) => ({ id: `p${i}`, max_tokens: 1024 }));
    const deadline = performance.now() + DURATION_MS;
    let sentRollouts = 0;
    let sentReward = 0;
    let plans = 0;
    let planTimeouts = 0;
    let observes = 0;
    const good = Array.from({ length: CLIENTS }, async (_, c) => {
      const rng = seedrandom(`stress-${backend}-${c}`);
      for (let k = 0; performance.now() < deadline; k++) {
        const results = Array.from({ length: 8 }, (_, j) => ({
          prompt_id: `p${Math.floor(rng() * PROMPTS)}`,
          step: 0,
          reward: Math.floor(rng() * 5) / 4, // dyadic: exact sums
          tokens: 100 + Math.floor(rng() * 900),
          rollout_id: `c${c}-${k}-${j}`,
        }));
        const o = await call(child.port, 'POST', '/v1/observe', results, auth);
        expect(o.status, JSON.stringify(o.json)).toBe(200);
        expect(o.json.applied).toBe(8);
        observes++;
        for (const r of results) {
          sentRollouts++;
          sentReward += r.reward;
        }
        const p = await call(child.port, 'POST', '/v1/plan', { candidates, budget: { rollouts: 8 * PROMPTS } }, auth);
        if (p.status === 503 && p.json.error.code === 'PLAN_TIMEOUT') planTimeouts++; // queued behind the faulty slow plans
        else {
          expect(p.status, JSON.stringify(p.json).slice(0, 200)).toBe(200);
          expect(p.json.totals.rollouts).toBe(8 * PROMPTS);
          plans++;
        }
      }
    });
    // every faulty observe carries rollouts that would break the sums if any were applied
    const poison = [{ prompt_id: 'p0', step: 0, reward: 1, rollout_id: 'poison' }];
    const deep = `${'['.repeat(6000)}${']'.repeat(6000)}`;
    const statuses = new Map<string, number>();
    const faults: [string, () => Promise<number | string>][] = [
      ['deep JSON', async () => (await call(child.port, 'POST', '/v1/observe', `[{"prompt_id":"p0","reward":1,"x":${deep}}]`, auth)).status],
      ['path //', async () => (await request(child.port, 'GET', '//', auth)).status],
      ['not UTF-8', async () => (await request(child.port, 'POST', '/v1/observe', { ...auth, 'content-type': 'application/json' }, Buffer.from('[{"prompt_id":"p0\xff","reward":1}]', 'latin1'))).status],
      ['NUL id', async () => (await call(child.port, 'POST', '/v1/observe', [{ prompt_id: 'p0\u0000', reward: 1 }], auth)).status],
      ['text/plain', async () => (await request(child.port, 'POST', '/v1/observe', { ...auth, 'content-type': 'text/plain' }, JSON.stringify(poison))).status],
      ['foreign Host', async () => (await request(child.port, 'POST', '/v1/observe', { ...auth, 'content-type': 'application/json', host: 'rebind.example' }, JSON.stringify(poison))).status],
      ['no token', async () => (await call(child.port, 'POST', '/v1/observe', poison)).status],
      ['wrong token', async () => (await call(child.port, 'POST', '/v1/observe', poison, { authorization: 'Bearer guess' })).status],
      ['plan past the deadline', async () => {
        // Both budgets, so neither is clamped (src/plan/limits.ts): 4.4 s for the CLI on an idle
        // machine in a fast spell, against 1.7 s with the rollouts alone, which a fast machine
        // finished inside the 2 s deadline (a 200 this test then refused).
        const budget = { rollouts: 6000 * MAX_N_LIMIT, tokens: 1e11 };
        const r = await call(child.port, 'POST', '/v1/plan', { candidates: Array.from({ length: 6000 }, (_, i) => ({ id: `q${i}` })), budget, options: { max_n: MAX_N_LIMIT } }, auth);
        return r.status === 503 ? r.json.error.code : r.status;
      }],
      ['max_n 2^53−1', async () => {
        // clamped and fast, but it may wait behind the slow plans past its own deadline
        const r = await call(child.port, 'POST', '/v1/plan', { candidates: [{ id: 'a' }], budget: { rollouts: Number.MAX_SAFE_INTEGER }, options: { max_n: Number.MAX_SAFE_INTEGER } }, auth);
        return r.status === 503 ? r.json.error.code : r.status;
      }],
      ['over the body limit', async () => (await call(child.port, 'POST', '/v1/observe', `[${'{"prompt_id":"p0","reward":1},'.repeat(10_000)}{"prompt_id":"p0","reward":1}]`, auth)).status],
      ['malformed JSON', async () => (await call(child.port, 'POST', '/v1/observe', '[{"prompt_id":"p0","reward":1}', auth)).status],
      ['bad reward', async () => (await call(child.port, 'POST', '/v1/observe', [...poison, { prompt_id: 'p1', reward: 2 }], auth)).status],
      ['cut-off body', async () => raw(child.port, `POST /v1/observe HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n${JSON.stringify(poison)}`, 100).then(() => 'cut')],
      ['idle half request', async () => raw(child.port, 'POST /v1/observe HTTP/1.1\r\nHost: 127.0.0.1\r\n', 800).then(() => 'idle')],
      ['not HTTP', async () => raw(child.port, '\x00\x01GARBAGE\r\n\r\n').then((answer) => answer.slice(0, 12))],
    ];
    // two faulty clients: one sends plans past the deadline, one cycles through the rest (each at least once)
    const slow = faults.filter(([name]) => name === 'plan past the deadline');
    const fast = faults.filter(([name]) => name !== 'plan past the deadline');
    const faulty = [slow, fast].map(async (list) => {
      for (let k = 0; performance.now() < deadline || k < list.length; k++) {
        const [name, send] = list[k % list.length]!;
        const got = await send();
        statuses.set(`${name}: ${got}`, (statuses.get(`${name}: ${got}`) ?? 0) + 1);
      }
    });
    try {
      await Promise.all([...good, ...faulty]);
    } catch (error) {
      await stopService(child, 1_000);
      throw error;
    }

    const health = await call(child.port, 'GET', '/healthz');
    expect(health.status).toBe(200);
    const metrics = (await call(child.port, 'GET', '/metrics', undefined, auth)).text;
    expect(metrics).not.toContain('code="INTERNAL"');
    expect(metrics).not.toMatch(/status="5\d\d",code="(?!PLAN_TIMEOUT)/);
    const exit = await stopService(child);
    expect(exit.code).toBe(0);
    expect(child.stderr()).toContain('store closed');

    const faultOutcomes = [...statuses.keys()];
    for (const outcome of faultOutcomes) {
      expect(outcome, 'a faulty request got a 2xx that applies or a 5xx').toMatch(/: (4\d\d|PLAN_TIMEOUT|cut|idle|HTTP\/1\.1 400|200)$/);
      if (outcome.endsWith(': 200')) expect(outcome).toMatch(/^max_n 2\^53−1/); // the only faulty request that is served (clamped)
    }
    expect(new Set(faultOutcomes.map((o) => o.split(':')[0])).size).toBe(faults.length);

    let applied = 0;
    const store = await openAsyncStore(state);
    try {
      const snap = await store.snapshot();
      let rollouts = 0;
      let rewardSum = 0;
      let successes = 0;
      for (let i = 0; i < PROMPTS; i++) {
        const p = snap.get(`p${i}`);
        if (p === undefined) continue;
        rollouts += p.rollouts;
        rewardSum += p.rewardSum;
        successes += p.successes;
      }
      applied = rollouts;
      expect(rollouts).toBe(sentRollouts);
      expect(rewardSum).toBe(sentReward);
      expect(successes).toBe(sentReward);
      expect(await store.count()).toBe(new Set(Array.from({ length: PROMPTS }, (_, i) => `p${i}`).filter((id) => snap.get(id) !== undefined)).size);
    } finally {
      await store.close();
    }
    expect(observes).toBeGreaterThanOrEqual(CLIENTS);
    console.log(
      `stress [${backend}]: ${CLIENTS} clients × ${DURATION_MS / 1000} s: ${observes} observes, ${plans} plans (+${planTimeouts} past the 2 s deadline behind slow plans); ` +
        `rollouts sent ${sentRollouts} = applied ${applied}; faulty: ${JSON.stringify(Object.fromEntries(statuses))}`,
    );
  }, 120_000);
});
