import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { Database } from './sqlite.js';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AsyncAllocator, PlanWorkers, Service, SqliteStore, asyncStoreOf, serveStdio, startHttpService, type HttpService,
} from '../src/index.js';
import { request } from './service-helpers.js';
import { tempDir } from './temp.js';

/**
 * Issue 12, item 2: property-based fuzzing of the service over routes, paths, bodies and
 * headers. No answer is a 5xx (the store is local and up), the service keeps serving, and a
 * rejected request leaves the state as it was. fast-check prints the seed and the shrunk
 * request of a failure; FC_SEED=<seed> replays it.
 */
const dir = tempDir('rb-fuzz-');
const seedOf = (name: string) => (process.env.FC_SEED === undefined ? [...name].reduce((h, c) => (Math.imul(h, 31) + c.charCodeAt(0)) | 0, 5) : Number(process.env.FC_SEED));
const TOKEN = 'fuzz-token';

/** The state as text: prompts, seen keys and meta. */
function dump(path: string): string {
  const db = new Database(path, { readonly: true });
  try {
    return JSON.stringify([db.prepare('SELECT * FROM prompts ORDER BY id').all(), db.prepare('SELECT rollout_id FROM seen ORDER BY rollout_id').all(), db.prepare('SELECT * FROM meta').all()]);
  } finally {
    db.close();
  }
}

// ---- arbitraries ---------------------------------------------------------------------------
const deepText = fc.integer({ min: 100, max: 20_000 }).map((d) => `${'['.repeat(d)}${']'.repeat(d)}`);
const oddString = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 12 }),
  fc.constantFrom('', 'a\u0000b', '\ud800', '\udfff x', 'é🧮', ' ', '__proto__', 'constructor', '%00', 'x'.repeat(300)),
);
const oddNumber = fc.oneof(
  fc.double(),
  fc.integer(),
  fc.constantFrom(0, -1, 0.5, 1, 2, 1e308, -0, Number.MAX_SAFE_INTEGER, 2 ** 53 + 2, 4096, 4097, 1e-300),
);
const oddValue: fc.Arbitrary<unknown> = fc.oneof(oddNumber, oddString, fc.boolean(), fc.constant(null), fc.jsonValue({ maxDepth: 3 }));
/** Mostly absent: a field holds an odd value one time in `freq`. */
const sometimes = (freq: number) => fc.option(oddValue, { freq, nil: undefined });
const compact = <T extends object>(o: T) => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
const candidate = fc.record({
  id: fc.oneof({ weight: 8, arbitrary: fc.constantFrom('a', 'b', 'c', 'd') }, { weight: 1, arbitrary: oddValue }),
  max_tokens: fc.oneof(fc.integer({ min: 1, max: 4096 }), sometimes(3)),
  prompt_tokens: sometimes(4),
  group: fc.oneof(fc.constantFrom('g1', 'g2'), sometimes(4)),
  partial_rewards: fc.oneof(fc.array(fc.constantFrom(0, 1), { maxLength: 3 }), sometimes(4)),
}).map(compact);
const planBody = fc.record({
  candidates: fc.oneof({ weight: 8, arbitrary: fc.uniqueArray(candidate, { maxLength: 5, selector: (c) => JSON.stringify(c.id) }) }, { weight: 1, arbitrary: oddValue }),
  budget: fc.oneof({ weight: 8, arbitrary: fc.record({ rollouts: fc.oneof(fc.integer({ min: 0, max: 64 }), oddNumber) }) }, { weight: 1, arbitrary: oddValue }),
  options: fc.oneof(fc.constant(undefined), fc.dictionary(fc.constantFrom('min_n', 'max_n', 'skip', 'policy', 'value', 'seed', 'step', 'decay', 'prefill_weight', 'bogus'), oddValue, { maxKeys: 2 })),
}).map((b) => JSON.stringify(compact(b)));
const result = fc.record({
  prompt_id: fc.oneof({ weight: 8, arbitrary: fc.constantFrom('a', 'b', 'c') }, { weight: 1, arbitrary: oddValue }),
  step: fc.oneof(fc.integer({ min: 0, max: 300_000 }), sometimes(3)),
  reward: fc.oneof({ weight: 8, arbitrary: fc.constantFrom(0, 0.25, 1) }, { weight: 1, arbitrary: oddValue }),
  tokens: fc.oneof(fc.integer({ min: 0, max: 5000 }), sometimes(3)),
  finish_reason: fc.oneof(fc.constantFrom('stop', 'length', 'abort'), sometimes(3)),
  rollout_id: fc.oneof(fc.uuid(), sometimes(3)),
  group: sometimes(5),
}).map(compact);
const observeBody = fc.oneof(
  fc.array(result, { maxLength: 4 }).map((r) => JSON.stringify(r)),
  fc.array(result, { maxLength: 4 }).map((r) => `${r.map((x) => JSON.stringify(x)).join('\n')}\n`),
  fc.record({ results: fc.oneof(fc.array(result, { maxLength: 3 }), oddValue), options: oddValue }, { requiredKeys: ['results'] }).map((b) => JSON.stringify(b)),
);
const body: fc.Arbitrary<string | Uint8Array | undefined> = fc.oneof(
  { weight: 4, arbitrary: planBody },
  { weight: 4, arbitrary: observeBody },
  { weight: 1, arbitrary: fc.constant(undefined) },
  { weight: 1, arbitrary: fc.json() },
  { weight: 1, arbitrary: deepText },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 200 }) },
  { weight: 1, arbitrary: fc.tuple(observeBody, fc.nat(), fc.constantFrom(0xff, 0xc3, 0xed, 0x80)).map(([t, at, b]) => {
    const bytes = Buffer.from(t);
    if (bytes.length > 0) bytes[at % bytes.length] = b;
    return new Uint8Array(bytes);
  }) },
);
const path = fc.oneof(
  fc.constantFrom('/v1/plan', '/v1/observe', '/healthz', '/metrics', '/v1/prompts/a', '/v1/prompts/', '//', '///', '//x/v1/plan', '/v1//plan', '/v1/prompts/%zz',
    '/v1/prompts/a%00b', '/v1/prompts/%ed%a0%80', '/v1/prompts/a?step=-1', '/v1/prompts/a?max_tokens=x&step=3', '/v1/prompts/a?group=%00', '/v1/plan?x=1', '*', '/..'),
  fc.webPath(),
  fc.string({ maxLength: 20 }).map((s) => `/v1/prompts/${encodeURIComponent(s)}`),
  fc.string({ maxLength: 20 }).map((s) => `/${encodeURIComponent(s)}?${encodeURIComponent(s)}=${encodeURIComponent(s)}`),
);
const headers = fc.record({
  'content-type': fc.oneof(
    { weight: 8, arbitrary: fc.constantFrom('application/json', 'application/json; charset=utf-8', 'application/x-ndjson') },
    { weight: 1, arbitrary: fc.constantFrom('text/plain', 'application/json; charset=latin1', 'APPLICATION/JSON', '', 'multipart/form-data') },
  ),
  authorization: fc.oneof({ weight: 8, arbitrary: fc.constant(`Bearer ${TOKEN}`) }, { weight: 1, arbitrary: fc.constantFrom(undefined, 'Bearer nope', `bearer ${TOKEN}`, 'Basic Zm9vOmJhcg==', `Bearer  ${TOKEN} `, 'Bearer') }),
  host: fc.oneof({ weight: 8, arbitrary: fc.constant('127.0.0.1') }, { weight: 1, arbitrary: fc.constantFrom('localhost', 'evil.example', '[::1]:1', 'a..b', '127.0.0.1:99999') }),
  origin: fc.oneof({ weight: 12, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.constantFrom('http://evil.example', 'null', 'http://127.0.0.1', 'not a url') }),
  'x-extra': fc.option(fc.stringMatching(/^[!-~]{0,30}$/), { nil: undefined }),
}).map((h) => compact(h) as Record<string, string>);
const method = fc.oneof({ weight: 6, arbitrary: fc.constantFrom('GET', 'POST') }, { weight: 1, arbitrary: fc.constantFrom('PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD', 'TRACE') });

/** A route with its own kind of body most of the time, anything at all otherwise. */
const requestParts: fc.Arbitrary<[string, string, string | Uint8Array | undefined]> = fc.oneof(
  { weight: 3, arbitrary: planBody.map((b): [string, string, string] => ['POST', '/v1/plan', b]) },
  { weight: 3, arbitrary: observeBody.map((b): [string, string, string] => ['POST', '/v1/observe', b]) },
  { weight: 1, arbitrary: fc.tuple(fc.constantFrom('a', 'b', 'zz', '%00', '%ff'), fc.constantFrom('', '?step=3', '?max_tokens=9', '?group=g1', '?bogus=1')).map(([id, q]): [string, string, undefined] => ['GET', `/v1/prompts/${id}${q}`, undefined]) },
  { weight: 3, arbitrary: fc.tuple(method, path, body) },
);

describe('fuzz: HTTP service (real server, SQLite, planning threads, token)', () => {
  const state = join(dir, 'http.db');
  let http: HttpService;
  let service: Service;
  let planner: PlanWorkers;
  beforeAll(async () => {
    planner = new PlanWorkers({ state, defaults: {}, timeoutMs: 30_000 });
    service = new Service(new AsyncAllocator(asyncStoreOf(new SqliteStore(state))), () => undefined, planner);
    http = await startHttpService(service, { host: '127.0.0.1', port: 0, bodyLimit: 65_536, token: TOKEN });
    const seed = await request(http.port, 'POST', '/v1/observe', { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` },
      JSON.stringify([{ prompt_id: 'a', step: 0, rewards: [1, 0, 1] }, { prompt_id: 'b', step: 0, rewards: [0, 0] }]));
    expect(seed.status).toBe(200);
  });
  afterAll(async () => {
    await http.close();
    await planner.close();
    await service.allocator.close();
  });

  it('no 5xx, no crash, no CORS header, and a rejected request leaves the state byte-identical (property)', async () => {
    let before = dump(state);
    const statuses = new Map<number, number>();
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(requestParts, headers, async ([m, p, b], h) => {
        const sent = m === 'GET' || m === 'HEAD' ? undefined : b;
        const r = await request(http.port, m, p, h, sent);
        runs++;
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
        expect(r.status).toBeLessThan(500);
        expect(Object.keys(r.headers).filter((k) => k.startsWith('access-control-'))).toEqual([]);
        if (r.status >= 400 && m !== 'HEAD') expect(typeof r.json?.error?.code).toBe('string');
        const after = dump(state);
        if (r.status >= 400) expect(after).toBe(before);
        before = after;
      }),
      { seed: seedOf('fuzz http'), numRuns: Number(process.env.FC_RUNS ?? 300) },
    );
    expect(runs).toBeGreaterThanOrEqual(300);
    const alive = await request(http.port, 'GET', '/healthz');
    expect(alive.status).toBe(200);
    const metrics = await request(http.port, 'GET', '/metrics', { authorization: `Bearer ${TOKEN}` });
    expect(metrics.text).not.toContain('code="INTERNAL"');
    expect(statuses.get(200) ?? 0).toBeGreaterThan(5); // some requests were good enough to be served
    console.log(`fuzz http: ${runs} requests, statuses ${JSON.stringify(Object.fromEntries([...statuses].sort((a, b) => a[0] - b[0])))}`);
  }, 300_000);
});

describe('fuzz: stdio service', () => {
  it('every line gets one answer in order, none a 5xx, and the loop never stops (property)', async () => {
    const state = join(dir, 'stdio.db');
    const service = new Service(new AsyncAllocator(asyncStoreOf(new SqliteStore(state))));
    const requestLine = fc.record(
      { id: fc.oneof(fc.integer(), fc.string(), fc.constant(null)), method: fc.oneof(method, oddValue), path: fc.oneof(path, oddValue), body: fc.oneof(fc.jsonValue({ maxDepth: 3 }), body.map((x) => (typeof x === 'string' ? x : undefined))) },
      { requiredKeys: [] },
    ).map((r) => Buffer.from(JSON.stringify(r)));
    const line = fc.oneof(
      { weight: 5, arbitrary: requestLine },
      { weight: 1, arbitrary: deepText.map((t) => Buffer.from(`{"id":1,"path":"/v1/plan","body":${t}}`)) },
      { weight: 1, arbitrary: fc.uint8Array({ minLength: 1, maxLength: 80 }).map((b) => Buffer.from(b.map((x) => (x === 0x0a ? 0x20 : x)))) },
      { weight: 1, arbitrary: fc.string({ minLength: 1, maxLength: 40 }).map((s) => Buffer.from(`x${s.replace(/\n/g, ' ')}`)) },
    );
    let total = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(line, { minLength: 1, maxLength: 6 }), async (lines) => {
        const input = new PassThrough();
        const output = new PassThrough();
        let out = '';
        output.on('data', (d: Buffer) => (out += d.toString()));
        const done = serveStdio(service, input, output, 65_536);
        const expected = lines.filter((l) => new TextDecoder().decode(l).trim() !== '').length;
        input.end(Buffer.concat([...lines.flatMap((l) => [l, Buffer.from('\n')]), Buffer.from('{"id":"last","path":"/healthz"}\n')]));
        await done;
        const replies = out.trim().split('\n').map((l) => JSON.parse(l) as { id: unknown; status: number });
        expect(replies).toHaveLength(expected + 1);
        expect(replies.at(-1)).toMatchObject({ id: 'last', status: 200 });
        for (const r of replies) expect(r.status).toBeLessThan(500);
        total += replies.length;
      }),
      { seed: seedOf('fuzz stdio'), numRuns: Number(process.env.FC_RUNS ?? 150) },
    );
    expect(total).toBeGreaterThan(150);
    await service.allocator.close();
  }, 300_000);
});
