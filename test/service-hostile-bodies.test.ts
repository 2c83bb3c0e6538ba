import { describe, expect, it } from 'vitest';
import { MAX_JSON_DEPTH, addEvidence, defaultDecay, openAsyncStore } from '../src/index.js';
import { call, freshPgUrl, pgUrl, request, startService, stateFiles, stdioSession, stopService } from './service-helpers.js';

// Regression tests for issue 12 (items 4, 5 and 9), each named after what broke: bodies the
// service must take or refuse the same on both backends. A rollout_id given to two prompts,
// steps far apart, NUL and lone surrogates in ids, JSON nested past the limit, and bytes that
// are not UTF-8.
const db = stateFiles('rb-hard-');
const PG = pgUrl();
const deep = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;

/** Both store backends, as the service runs them. */
const backends: [string, () => string][] = [['sqlite', db], ...(PG === undefined ? [] : [['postgres', () => freshPgUrl(PG)] as [string, () => string]])];

describe.each(backends)('a rollout_id given to two prompts in one observe (%s)', (_name, location) => {
  it('is counted once, with a warning naming the id and both prompts; a keyless batch observed again warns too', async () => {
    const state = location();
    const child = await startService(['--state', state]);
    try {
      const body = [{ prompt_id: 'a', step: 0, reward: 1, rollout_id: '0' }, { prompt_id: 'b', step: 0, reward: 0, rollout_id: '0' }];
      const r = await call(child.port, 'POST', '/v1/observe', body);
      expect(r.status).toBe(200);
      expect(r.json).toMatchObject({ applied: 1, duplicates: 1 });
      expect(r.json.warnings).toEqual(['1 rollouts repeat the rollout_id of a rollout of another prompt (the first: "0" of prompt "b", given to "a"): counted as its duplicates, not applied; a rollout id names one rollout, so make ids unique across prompts, e.g. "<step>/<prompt_id>#<j>"']);
      // Without ids or a step, the same results again are taken for the same batch: said so.
      const keyless = [{ prompt_id: 'hard', rewards: [0, 0, 0, 0] }];
      expect((await call(child.port, 'POST', '/v1/observe', keyless)).json.warnings).toBeUndefined();
      const repeat = await call(child.port, 'POST', '/v1/observe', keyless);
      expect(repeat.json).toMatchObject({ applied: 0, duplicates: 4 });
      expect(repeat.json.warnings).toEqual(['4 results without a rollout_id are a batch observed before (the same content: known by it), so they were not applied again; if they are new results, give each a rollout_id (or, where it has none, its step)']);
    } finally {
      expect((await stopService(child)).code).toBe(0);
    }
  });
});

describe.each(backends)('item 4: backends differed (%s)', (_name, location) => {
  it('a prompt observed at step 0 and at step 200,000, and with decay 0.5 across 1,200 steps, is applied (PostgreSQL: underflow)', async () => {
    const state = location();
    const child = await startService(['--state', state]);
    try {
      const send = (body: unknown) => call(child.port, 'POST', '/v1/observe', body);
      expect((await send([{ prompt_id: 'far', step: 0, reward: 1, rollout_id: 'f0' }])).status).toBe(200);
      const far = await send([{ prompt_id: 'far', step: 200_000, reward: 0, rollout_id: 'f1' }, { prompt_id: 'other', step: 200_000, reward: 1, rollout_id: 'o1' }]);
      expect(far.status).toBe(200);
      expect(far.json.applied).toBe(2);
      const half = { forgetPerStep: 0.5, reobserveDiscount: defaultDecay.reobserveDiscount };
      for (const [k, step] of [0, 1_200, 2_500].entries()) {
        const r = await send({ results: [{ prompt_id: 'half', step, reward: k % 2, rollout_id: `h${k}` }], options: { decay: 0.5 } });
        expect(r.status, JSON.stringify(r.json)).toBe(200);
      }
      // the same prompt keeps accepting batches: it is not poisoned
      expect((await send([{ prompt_id: 'far', step: 200_001, reward: 1, rollout_id: 'f2' }])).status).toBe(200);
    } finally {
      expect((await stopService(child)).code).toBe(0);
    }
    const store = await openAsyncStore(state);
    try {
      let ref = addEvidence(defaultDecay, { successes: 0, failures: 0, lastStep: 0 }, 0, 1, 0);
      ref = addEvidence(defaultDecay, ref, 200_000, 0, 1);
      ref = addEvidence(defaultDecay, ref, 200_001, 1, 0);
      const far = (await store.get('far'))!;
      expect([far.successes, far.failures, far.rollouts]).toEqual([ref.successes, ref.failures, 3]);
      expect(far.successes).toBe(1); // the step-0 success decayed to nothing, no error
      const half = (await store.get('half'))!;
      let h = { successes: 0, failures: 0, lastStep: 0 };
      for (const [k, step] of [0, 1_200, 2_500].entries()) h = addEvidence({ forgetPerStep: 0.5, reobserveDiscount: defaultDecay.reobserveDiscount }, h, step, k % 2, 1 - (k % 2));
      expect([half.successes, half.failures]).toEqual([h.successes, h.failures]);
    } finally {
      await store.close();
    }
  }, 60_000);

  it('NUL characters and lone surrogates in ids are refused with 400 on both, and nothing is applied', async () => {
    const state = location();
    const child = await startService(['--state', state]);
    try {
      const bad: [unknown, string][] = [
        [[{ prompt_id: 'a\u0000b', step: 0, reward: 1 }], 'body[0].prompt_id'],
        [[{ prompt_id: 'ok', step: 0, reward: 1, rollout_id: 'r\u0000' }], 'body[0].rollout_id'],
        [[{ prompt_id: 'ok', step: 0, reward: 1, group: '\ud800' }], 'body[0].group'],
      ];
      for (const [body, field] of bad) {
        const r = await call(child.port, 'POST', '/v1/observe', body);
        expect(r.status, JSON.stringify(body)).toBe(400);
        expect(r.json.error.field).toBe(field);
      }
      const plan = await call(child.port, 'POST', '/v1/plan', { candidates: [{ id: 'x\u0000' }], budget: { rollouts: 4 } });
      expect(plan.status).toBe(400);
      expect(plan.json.error.field).toBe('body.candidates[0].id');
      const view = await call(child.port, 'GET', '/v1/prompts/a%00b');
      expect(view.status).toBe(400);
      expect((await call(child.port, 'GET', '/healthz')).json.prompts).toBe(0);
    } finally {
      expect((await stopService(child)).code).toBe(0);
    }
  }, 60_000);
});

describe('item 5: deeply nested JSON crashed plan and observe', () => {
  it('HTTP: 400 naming the limit, for JSON arrays, {results}, NDJSON and plan bodies', async () => {
    const child = await startService(['--state', db()]);
    try {
      const bodies: [string, string][] = [
        ['/v1/observe', `[{"prompt_id":"a","reward":1,"x":${deep(6000)}}]`],
        ['/v1/observe', `{"results":[{"prompt_id":"a","reward":1,"x":${deep(6000)}}]}`],
        ['/v1/observe', `{"prompt_id":"a","reward":1}\n{"prompt_id":"a","reward":${deep(6000)}}\n`],
        ['/v1/plan', `{"candidates":[{"id":${deep(6000)}}],"budget":{"rollouts":4}}`],
        ['/v1/plan', `{"candidates":[{"id":"a","meta":${deep(MAX_JSON_DEPTH)}}],"budget":{"rollouts":4}}`],
      ];
      for (const [path, body] of bodies) {
        const r = await call(child.port, 'POST', path, body);
        expect(r.status, body.slice(0, 60)).toBe(400);
        expect(r.json.error.message).toContain(`nested deeper than ${MAX_JSON_DEPTH} levels`);
      }
      // within the limit is fine
      const ok = await call(child.port, 'POST', '/v1/plan', `{"candidates":[{"id":"a","meta":${deep(MAX_JSON_DEPTH - 3)}}],"budget":{"rollouts":4}}`);
      expect(ok.status).toBe(200);
      expect((await call(child.port, 'GET', '/healthz')).json.prompts).toBe(0);
      const metrics = (await call(child.port, 'GET', '/metrics')).text;
      expect(metrics).not.toContain('code="INTERNAL"');
    } finally {
      expect((await stopService(child)).code).toBe(0);
    }
  }, 60_000);

  it('stdio: a deep request line is a 400 and the next line is answered', async () => {
    const input = `{"id":1,"path":"/v1/observe","body":${deep(6000)}}\n{"id":2,"path":"/healthz"}\n`;
    const { code, replies } = await stdioSession(['--state', db()], input);
    expect(replies.map((r) => [r.id, r.status])).toEqual([[null, 400], [2, 200]]);
    expect(replies[0].body.error.message).toContain('request line 1: JSON nested deeper than 128 levels');
    expect(code).toBe(0);
  }, 60_000);
});

describe('item 9: invalid UTF-8 became U+FFFD silently; a bad --host printed two lines', () => {
  it('HTTP: a body that is not UTF-8 is a 400 naming the NDJSON line and byte', async () => {
    const child = await startService(['--state', db()]);
    try {
      const body = Buffer.concat([Buffer.from('{"prompt_id":"a","step":0,"reward":1}\n{"prompt_id":"b'), Buffer.from([0xff]), Buffer.from('","step":0,"reward":1}\n')]);
      const r = await request(child.port, 'POST', '/v1/observe', { 'content-type': 'application/x-ndjson' }, body);
      expect(r.status).toBe(400);
      expect(r.json.error.message).toMatch(/^body:2: not valid UTF-8 text: byte 16 of the line \(0xFF\)/);
      expect((await call(child.port, 'GET', '/healthz')).json.prompts).toBe(0);
    } finally {
      expect((await stopService(child)).code).toBe(0);
    }
  }, 60_000);

  it('stdio: a line that is not UTF-8 is a 400 naming the line, and is not applied', async () => {
    const input = Buffer.concat([
      Buffer.from('{"id":1,"path":"/v1/observe","body":[{"prompt_id":"\xe9t\xe9","step":0,"reward":1}]}\n', 'latin1'),
      Buffer.from('{"id":2,"path":"/healthz"}\n'),
    ]);
    const { code, replies } = await stdioSession(['--state', db()], input);
    expect(replies.map((r) => [r.id, r.status])).toEqual([[null, 400], [2, 200]]);
    expect(replies[0].body.error.message).toContain('request line 1: not valid UTF-8 text: byte 52 of the line (0xE9)');
    expect(replies[1].body.prompts).toBe(0);
    expect(code).toBe(0);
  }, 60_000);

  it('stdio: line numbers stay right after a line over the limit', async () => {
    const input = Buffer.concat([
      Buffer.from('not json\n'),
      Buffer.from(`{"id":2,"path":"/v1/observe","body":"${'x'.repeat(400)}"}\n`),
      Buffer.from([0x7b, 0xff, 0x7d, 0x0a]),
      Buffer.from('\n{"id":5,"path":"/healthz"}\n'),
    ]);
    const { replies } = await stdioSession(['--state', db(), '--body-limit', '200'], input);
    expect(replies.map((r) => [r.id, r.status])).toEqual([[null, 400], [null, 413], [null, 400], [5, 200]]);
    expect(replies[0].body.error.message).toMatch(/^request line 1: malformed JSON/);
    expect(replies[1].body.error.message).toMatch(/^request line 2: longer than the limit of 200 bytes/);
    expect(replies[2].body.error.message).toMatch(/^request line 3: not valid UTF-8 text: byte 2 of the line \(0xFF\)/);
  }, 60_000);
});
