import { afterEach, describe, expect, it } from 'vitest';
import { Dispatcher, SimModel, SimServer, backoff, countSimTokens, defaultSimModel, lastBoxed, tokenId } from '../src/index.js';
import { simPrompts } from './executor-helpers.js';

let server: SimServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function post(path: string, body: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(`${server!.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, json: await res.json() };
}

describe('sim-server (test double)', () => {
  it('answers n choices with per-choice token ids and finish_reason; the same seed gives the same answer', async () => {
    const { sim } = simPrompts(3);
    server = new SimServer({ prompts: sim });
    await server.start();
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const body = { model: 'm', prompt: sim[1]!.text, n: 5, max_tokens: 4000, seed: 11, return_token_ids: true };
    const a = await post('/v1/completions', body);
    const b = await post('/v1/completions', body);
    expect(a.status).toBe(200);
    expect(a.json.choices.length).toBe(5);
    expect(a.json.choices).toEqual(b.json.choices);
    const model = new SimModel(defaultSimModel);
    for (const c of a.json.choices) {
      const want = model.respond(sim[1], sim[1]!.text, 11 + c.index);
      expect(c.token_ids).toEqual(want.tokens.map(tokenId));
      expect(c.finish_reason).toBe('stop');
      expect(lastBoxed(c.text)).toBe(want.correct ? '7' : '8');
    }
  });

  it('continues a partial response from where it stopped, to the same full length', async () => {
    const { sim } = simPrompts(2);
    server = new SimServer({ prompts: sim });
    await server.start();
    const full = new SimModel(defaultSimModel).respond(sim[0], sim[0]!.text, 5).tokens;
    const prefix = full.slice(0, 10).join('');
    expect(countSimTokens(prefix)).toBe(10);
    const r = await post('/v1/completions', { model: 'm', prompt: sim[0]!.text + prefix, n: 1, max_tokens: 4000, seed: 5 });
    expect(prefix + r.json.choices[0].text).toBe(full.join(''));
    expect(server.stats.continuationsByPrompt).toEqual({ q0: 1 });
    const chat = await post('/v1/chat/completions', {
      model: 'm', n: 1, max_tokens: 4000, seed: 5, continue_final_message: true, add_generation_prompt: false,
      messages: [{ role: 'user', content: sim[0]!.text }, { role: 'assistant', content: prefix }],
    });
    expect(prefix + chat.json.choices[0].message.content).toBe(full.join(''));
  });

  it('rejects bad requests with 400 and names the field', async () => {
    server = new SimServer();
    await server.start();
    const r = await post('/v1/completions', { model: 'm', prompt: 'x', n: 0 });
    expect(r.status).toBe(400);
    expect(r.json.message).toMatch(/"n" must be a positive integer, got 0/);
  });

  it('refuses more than 4,096 choices a request at once, and goes on answering', async () => {
    // {"n": 1e9} drew choices until the server's memory ran out.
    const { sim } = simPrompts(1);
    server = new SimServer({ prompts: sim, profile: 'sglang' });
    await server.start();
    const huge = await post('/v1/completions', { model: 'm', prompt: sim[0]!.text, n: 1e9, max_tokens: 4000 });
    expect(huge.status).toBe(400);
    expect(huge.json.message).toMatch(/"n" must be at most 4096 choices a request .*got 1000000000/);
    const batch = await post('/generate', { text: [sim[0]!.text, sim[0]!.text], sampling_params: { n: 3000 } });
    expect(batch.status).toBe(400);
    expect(JSON.stringify(batch.json)).toMatch(/got 3000 for each of 2 texts/);
    const most = await post('/v1/completions', { model: 'm', prompt: sim[0]!.text, n: 4096, max_tokens: 4000, seed: 1 });
    expect(most.status).toBe(200);
    expect(most.json.choices.length).toBe(4096);
  });
});

describe('dispatcher', () => {
  it('sends each request to the least-loaded endpoint and bounds the total in flight', async () => {
    const d = new Dispatcher(['a', 'b', 'c'], 4);
    const got = [await d.acquire(), await d.acquire(), await d.acquire(), await d.acquire()];
    expect(got).toEqual([0, 1, 2, 0]);
    let fifth: number | undefined;
    const waiting = d.acquire().then((e) => (fifth = e));
    await Promise.resolve();
    expect(fifth).toBeUndefined();
    d.release(2);
    await waiting;
    expect(fifth).toBe(2);
    expect(d.load()).toEqual([2, 1, 1]);
  });

  it('backs off exponentially up to the cap', () => {
    const p = { retries: 5, backoffMs: 100, maxBackoffMs: 500 };
    expect([1, 2, 3, 4].map((k) => backoff(p, k))).toEqual([100, 200, 400, 500]);
  });
});

describe('summary helpers', () => {
  it('quantile is nearest-rank; the progress bar redraws one line and ends it when done', async () => {
    const { quantile } = await import('../src/index.js');
    expect(quantile([10, 20, 30, 40], 0.5)).toBe(20);
    expect(quantile([10, 20, 30, 40], 0.99)).toBe(40);
    expect(quantile([], 0.5)).toBeNull();
    const { progressBar } = await import('../src/executor/summary.js');
    let out = '';
    let t = 0;
    const bar = progressBar((s) => void (out += s), () => (t += 200));
    bar(1, 4);
    bar(4, 4);
    expect(out).toBe('\r[########......................] 1/4 rollouts\r[##############################] 4/4 rollouts\n');
  });
});
