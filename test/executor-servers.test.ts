// Issue 11: the executor against servers that behave as vLLM and SGLang do (the sim-server's
// profiles, a TEST DOUBLE for a GPU inference server; each profile names the upstream file and
// behaviour it reproduces in src/simserver/server.ts).
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import {
  Allocator, PartialStore, SERVER_PROFILES, SimModel, batchOf, commitPartials, defaultSimModel, executePlan, groupSeed, mathVerifier,
  DETECT_GRACE_MS, StoppedDetection, normalizeEndpoint, resolveServer, streamRequest, summaryLine,
  type ExecuteOptions, type ExecutedRollout, type Verifier, type VerifyItem,
} from '../src/index.js';
import { expected, planOf, simPrompts, simServers } from './executor-helpers.js';

const serve = simServers();

function options(endpoints: string[], extra: Partial<ExecuteOptions> = {}): ExecuteOptions {
  return {
    endpoints, model: 'sim', concurrency: 16, requestN: 8, overProvision: 0, timeoutMs: 5000,
    retry: { retries: 3, backoffMs: 5, maxBackoffMs: 20 }, verifier: mathVerifier(undefined), ...extra,
  };
}

const model = new SimModel(defaultSimModel);

/** Every result equals what the sim model answers for its seed (an oracle apart from the executor). */
function expectModelAnswers(results: readonly ExecutedRollout[], sim: ReturnType<typeof simPrompts>['sim'], maxTokens = 4096): number {
  let checked = 0;
  for (const r of results) {
    const want = expected(model, sim.find((p) => p.id === r.prompt_id)!, r.seed, maxTokens);
    expect([r.tokens, r.reward, r.finish_reason]).toEqual([want.tokens, want.reward, want.finish]);
    checked++;
  }
  return checked;
}

describe('endpoints', () => {
  it('a base URL with /v1 and a trailing slash reaches /v1/completions, not /v1/v1/completions', async () => {
    const { candidates, sim } = simPrompts(2);
    const server = await serve({ prompts: sim });
    const report = await executePlan(planOf({ q0: 3, q1: 2 }), new Map(candidates.map((c) => [c.id, c])), options([`${server.url}/v1/`]));
    expect(server.stats.byPath).toEqual({ '/v1/completions': 2 });
    expect(expectModelAnswers(report.results, sim)).toBe(5);
  });

  it.each([
    ['http://127.0.0.1:8000', 'http://127.0.0.1:8000'],
    ['http://127.0.0.1:8000/', 'http://127.0.0.1:8000'],
    ['http://127.0.0.1:8000/v1', 'http://127.0.0.1:8000'],
    ['http://127.0.0.1:8000/v1/', 'http://127.0.0.1:8000'],
    ['https://gw.example.com/vllm/v1', 'https://gw.example.com/vllm'],
    ['http://[::1]:30000/v1', 'http://[::1]:30000'],
    // A proxy's own path that ends like an API path, without /v1 before it, is a base.
    ['http://gw.example.com/llm/generate', 'http://gw.example.com/llm/generate'],
    ['http://gw.example.com/team/models/v1', 'http://gw.example.com/team/models'],
  ])('normalizes %s to %s', (raw, base) => {
    expect(normalizeEndpoint(raw)).toBe(base);
  });

  it.each([
    ['localhost', /"localhost" is not a URL/],
    ['http://127.0.0.1:99999', /is not a URL/],
    ['ftp://host:21', /must use http or https, got "ftp"/],
    ['http://host:8000/v1?key=1', /must not have a query or fragment/],
    ['http://user:pw@host:8000', /credentials in the URL are not sent/],
    // An API path as the base: requests went to .../v1/completions/v1/completions (a 404).
    ['http://127.0.0.1:8000/v1/completions', /ends with an API path \("\/v1\/completions"\): give the server's base URL, "http:\/\/127\.0\.0\.1:8000"/],
    ['https://gw.example.com/vllm/v1/chat/completions/', /ends with an API path \("\/v1\/chat\/completions"\): give the server's base URL, "https:\/\/gw\.example\.com\/vllm"/],
  ])('refuses %s when the command starts', (raw, message) => {
    expect(() => normalizeEndpoint(raw)).toThrow(message);
  });

  it('a URL fetch cannot parse is fatal at once, never retried as a connection error', async () => {
    const run = streamRequest({ url: 'http://[bad/v1/completions', body: {}, chat: false, signal: new AbortController().signal }, { delta() {}, finish() {}, usage() {} }, () => false);
    await expect(run).rejects.toMatchObject({ kind: 'fatal', message: expect.stringMatching(/cannot send to .*ERR_INVALID_URL/) });
  });

  it('a host name that does not resolve (ENOTFOUND) is sent once and fails with exit 2', async () => {
    const { candidates } = simPrompts(1);
    // Four retries with 2 s backoff would take 8 s; the test's 60 s limit is not what checks it: the message does.
    const run = executePlan(planOf({ q0: 2 }), new Map(candidates.map((c) => [c.id, c])), options(['http://no-such-host.invalid:8000'], { retry: { retries: 4, backoffMs: 2000, maxBackoffMs: 2000 } }));
    await expect(run).rejects.toMatchObject({ exitCode: 2, message: expect.stringMatching(/ENOTFOUND/) });
    await expect(run).rejects.not.toThrow(/gave up/);
  });

  it('port 0 is refused when the command starts (it passed validation and was retried as "connection refused")', () => {
    expect(() => normalizeEndpoint('http://127.0.0.1:0/v1')).toThrow(/port 0 cannot be connected to/);
  });

  // Issue 16, item 8: a URL that passes validation but can never be sent was retried. Node's fetch
  // refuses the Fetch standard's bad ports (6000, 6666, ...) with a cause of just "bad port".
  it('a port fetch refuses (6000) fails at once with exit 2, in server detection and in requests, never retried', async () => {
    // Retried, detection would end in "cannot reach ... (exit 1)" and a request in "gave up".
    const slow = { retries: 4, backoffMs: 2000, maxBackoffMs: 2000 };
    await expect(resolveServer('auto', ['http://127.0.0.1:6000'], slow, 2000)).rejects.toMatchObject({
      exitCode: 2,
      message: expect.stringMatching(/--endpoint http:\/\/127\.0\.0\.1:6000: cannot send to .*bad port: Node's fetch never connects to port 6000/),
    });
    const { candidates } = simPrompts(1);
    const run = executePlan(planOf({ q0: 2 }), new Map(candidates.map((c) => [c.id, c])), options(['http://127.0.0.1:6000'], { retry: slow }));
    await expect(run).rejects.toMatchObject({ exitCode: 2, message: expect.stringMatching(/bad port.*another port/) });
    await expect(run).rejects.not.toThrow(/gave up/);
  });
});

describe('finish reasons, mapped on purpose', () => {
  it('abort and error are aborted and resumable; repetition is graded as length; an unknown reason is neither graded nor kept', async () => {
    const { candidates, sim } = simPrompts(1, [1]);
    const server = await serve({
      prompts: sim,
      faults: {
        finishes: [
          { request: 1, choice: 0, reason: 'abort', atToken: 5 },
          { request: 1, choice: 1, reason: 'error', atToken: 7 },
          { request: 1, choice: 2, reason: 'repetition', atToken: 9 },
          { request: 1, choice: 3, reason: 'content_filter', atToken: 3 },
        ],
      },
    });
    const graded: VerifyItem[] = [];
    const math = mathVerifier(undefined);
    const verifier: Verifier = { ...math, verify: (items) => (graded.push(...items), math.verify(items)) };
    const partials = new PartialStore(':memory:');
    try {
      const plan = planOf({ q0: 6 });
      const report = await executePlan(plan, new Map(candidates.map((c) => [c.id, c])), options([server.url], { verifier, partials }));
      const byId = new Map(report.results.map((r) => [r.rollout_id, r]));
      expect(byId.get('0/q0#0')).toMatchObject({ finish_reason: 'abort', server_finish_reason: 'abort', reward: 0, tokens: 5 });
      expect(byId.get('0/q0#1')).toMatchObject({ finish_reason: 'abort', server_finish_reason: 'error', reward: 0, tokens: 7 });
      expect(byId.get('0/q0#2')).toMatchObject({ finish_reason: 'length', server_finish_reason: 'repetition', reward: 0, tokens: 9 });
      expect(byId.get('0/q0#3')).toMatchObject({ finish_reason: 'abort', server_finish_reason: 'content_filter', reward: 0, tokens: 3 });
      for (const id of ['0/q0#4', '0/q0#5']) {
        expect(byId.get(id)!.server_finish_reason).toBeUndefined();
        expect(byId.get(id)).toMatchObject({ finish_reason: 'stop', reward: 1 });
      }
      // Only finished rollouts reach the verifier: the repetition and the two normal ones.
      expect(graded.map((g) => g.rollout_id).sort()).toEqual(['0/q0#2', '0/q0#4', '0/q0#5']);
      expect(report.summary).toMatchObject({ rollouts: 3, aborted: 3, finish_reasons: { abort: 1, error: 1, repetition: 1, content_filter: 1 } });
      expect(summaryLine(report.summary)).toMatch(
        /server finish reasons: abort 1 \(aborted, resumable\), content_filter 1 \(unknown: not graded\), error 1 \(aborted, resumable\), repetition 1 \(graded as length\)/,
      );
      // abort and error keep their partial text for the next step; the unknown reason is dropped.
      commitPartials(partials, report);
      const stored = partials.all();
      expect(stored.map((p) => [p.rollout_id, p.tokens])).toEqual([['0/q0#0', 5], ['0/q0#1', 7]]);
      const full = model.respond(sim[0], sim[0]!.text, groupSeed(plan.seed, 0, 'q0')).tokens;
      expect(stored[0]!.text).toBe(full.slice(0, 5).join(''));
      // observe: the three aborted lines leave the pass rate alone.
      const allocator = new Allocator({ state: ':memory:' });
      expect(allocator.observe(batchOf(report.results))).toMatchObject({ applied: 3, aborted: 3 });
      expect(allocator.posterior('q0').rollouts).toBe(3);
      allocator.close();
    } finally {
      partials.close();
    }
  });

  it('resumes a server-aborted rollout next step to its full length', async () => {
    const { candidates, sim } = simPrompts(1, [1]);
    const first = await serve({ prompts: sim, faults: { finishes: [{ request: 1, choice: 1, reason: 'abort', atToken: 6 }] } });
    const partials = new PartialStore(':memory:');
    try {
      const prompts = new Map(candidates.map((c) => [c.id, c]));
      const step0 = await executePlan(planOf({ q0: 2 }, { step: 0 }), prompts, options([first.url], { partials }));
      commitPartials(partials, step0);
      expect(partials.all().map((p) => p.rollout_id)).toEqual(['0/q0#1']);
      const second = await serve({ prompts: sim });
      const step1 = await executePlan(planOf({ q0: 2 }, { step: 1 }), prompts, options([second.url], { partials }));
      const resumed = step1.results.find((r) => r.rollout_id === '0/q0#1')!;
      expect(second.stats.continuationsByPrompt).toEqual({ q0: 1 });
      const want = expected(model, sim[0]!, resumed.seed, 4096);
      expect([resumed.tokens, resumed.reward, resumed.finish_reason]).toEqual([want.tokens, want.reward, want.finish]);
    } finally {
      partials.close();
    }
  });
});

describe('answers as servers send them', () => {
  it('parses a non-streaming answer when a server or proxy ignores stream: true (completions and chat)', async () => {
    const { candidates, sim } = simPrompts(3);
    const server = await serve({ prompts: sim, faults: { ignoreStream: true } });
    const plain = new Map(candidates.map((c) => [c.id, c]));
    const report = await executePlan(planOf({ q0: 4, q1: 3, q2: 2 }), plain, options([server.url]));
    expect(report.summary.retries).toBe(0);
    expect(expectModelAnswers(report.results, sim)).toBe(9);
    const chat = new Map(candidates.map((c) => [c.id, { ...c, prompt: undefined, messages: [{ role: 'user', content: c.prompt }] }]));
    const chatReport = await executePlan(planOf({ q0: 4 }), chat, options([server.url]));
    expect(chatReport.summary.retries).toBe(0);
    expect(expectModelAnswers(chatReport.results, sim)).toBe(4);
  });

  it('parses server-sent events with CRLF line ends, comment lines and data split over several lines', async () => {
    const { candidates, sim } = simPrompts(2);
    const server = await serve({ prompts: sim, sse: { crlf: true, comments: true, multiline: true }, msPerToken: 0.05 });
    const report = await executePlan(planOf({ q0: 5, q1: 3 }), new Map(candidates.map((c) => [c.id, c])), options([server.url]));
    expect(report.summary.retries).toBe(0);
    expect(expectModelAnswers(report.results, sim)).toBe(8);
  });
  it('takes the last event of a stream that ends without a blank line or [DONE] (a proxy that cuts the terminator)', async () => {
    // A raw node:http server writing the event stream by hand: two events, the second unterminated.
    const raw = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {"choices":[{"index":0,"text":" a","token_ids":[1]}]}\r\n\r\n');
      res.end('data: {"choices":[{"index":0,"text":" b","token_ids":[2],"finish_reason":"stop"}]}');
    });
    await new Promise<void>((resolve) => raw.listen(0, '127.0.0.1', resolve));
    try {
      const seen: string[] = [];
      await streamRequest(
        { url: `http://127.0.0.1:${(raw.address() as AddressInfo).port}/v1/completions`, body: {}, chat: false, signal: new AbortController().signal },
        { delta: (_i, text, tokens) => void seen.push(`${text}:${tokens}`), finish: (_i, reason) => void seen.push(reason), usage() {} },
        () => false,
      );
      expect(seen).toEqual([' a:1', ' b:1', 'stop']);
    } finally {
      raw.closeAllConnections();
      await new Promise((resolve) => raw.close(resolve));
    }
  });
});

describe('server profiles', () => {
  it('the SGLang double draws one sample for every choice of an n > 1 request; vLLM seeds choice i with seed + i', async () => {
    const { sim } = simPrompts(1, [0.5]);
    const post = async (url: string) => {
      const res = await fetch(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', prompt: sim[0]!.text, n: 4, seed: 11, max_tokens: 4000 }) });
      return ((await res.json()) as { choices: { text: string }[] }).choices.map((c) => c.text);
    };
    const sglang = await post((await serve({ prompts: sim, profile: 'sglang' })).url);
    expect(new Set(sglang).size).toBe(1);
    const vllm = await post((await serve({ prompts: sim, profile: 'vllm' })).url);
    expect(vllm).toEqual([0, 1, 2, 3].map((i) => model.respond(sim[0], sim[0]!.text, 11 + i).tokens.join('')));
    expect(new Set(vllm).size).toBeGreaterThan(1);
  });

  it('sglang: one rollout per request with seed + j; chat rollouts get token counts from the usage chunk', async () => {
    const { candidates, sim } = simPrompts(2);
    const server = await serve({ prompts: sim, profile: 'sglang' });
    const chat = new Map(candidates.map((c) => [c.id, { ...c, prompt: undefined, messages: [{ role: 'user', content: c.prompt }] }]));
    const plan = planOf({ q0: 5, q1: 3 });
    const report = await executePlan(plan, chat, options([server.url], { server: SERVER_PROFILES.sglang }));
    expect(server.stats.sampling.every((s) => s.n === 1)).toBe(true);
    expect(server.stats.sampling.map((s) => s.seed).sort((a, b) => a - b)).toEqual(
      [...[0, 1, 2, 3, 4].map((j) => groupSeed(plan.seed, 0, 'q0') + j), ...[0, 1, 2].map((j) => groupSeed(plan.seed, 0, 'q1') + j)].sort((a, b) => a - b),
    );
    expect(expectModelAnswers(report.results, sim)).toBe(8);
    expect(report.summary.tokens_unknown).toBe(0);
  });

  it('openai: only OpenAI API fields (a strict server refuses vLLM extensions), tokens from usage', async () => {
    const { candidates, sim } = simPrompts(2);
    const server = await serve({ prompts: sim, profile: 'openai' });
    const prompts = new Map(candidates.map((c) => [c.id, c]));
    const report = await executePlan(planOf({ q0: 3, q1: 2 }), prompts, options([server.url], { server: SERVER_PROFILES.openai }));
    expect(expectModelAnswers(report.results, sim)).toBe(5);
    expect(report.summary.tokens_unknown).toBe(0);
    const asVllm = executePlan(planOf({ q0: 3 }), prompts, options([server.url], { server: SERVER_PROFILES.vllm }));
    await expect(asVllm).rejects.toThrow(/HTTP 400 .*Unrecognized request argument supplied: return_token_ids/);
  });

  it('detects the server from GET /v1/models owned_by, and refuses endpoints of different kinds', async () => {
    const retry = { retries: 0, backoffMs: 1, maxBackoffMs: 1 };
    const vllm = await serve({ profile: 'vllm' });
    const sglang = await serve({ profile: 'sglang' });
    const other = await serve({ profile: 'openai' });
    expect((await resolveServer('auto', [vllm.url], retry, 2000)).profile.name).toBe('vllm');
    expect((await resolveServer('auto', [sglang.url, sglang.url], retry, 2000)).profile.name).toBe('sglang');
    const generic = await resolveServer('auto', [other.url], retry, 2000);
    expect(generic.profile.name).toBe('openai');
    expect(generic.note).toMatch(/does not name vLLM or SGLang \(owned_by "system"\): using --server openai/);
    await expect(resolveServer('auto', [vllm.url, sglang.url], retry, 2000)).rejects.toThrow(/different servers .*vllm.*sglang/);
    expect((await resolveServer('sglang', [vllm.url], retry, 2000)).profile.name).toBe('sglang');
    await expect(resolveServer('tgi', [vllm.url], retry, 2000)).rejects.toThrow(/unknown server profile "tgi"; registered: vllm, sglang, openai/);
  });

  it('a replica that hangs is taken for unreachable a few seconds after another answers, and a stop ends the question at once', async () => {
    // Found by a loop user: one replica stopped (SIGSTOP) among healthy ones delayed every start by
    // its whole retries (about 2.5 min at the default --timeout-s), and Ctrl-C waited them out too.
    // The hung one is a node:http server that accepts and never answers (a stopped process's port).
    const hung = createServer(() => undefined);
    await new Promise<void>((resolve) => hung.listen(0, '127.0.0.1', resolve));
    const hungUrl = `http://127.0.0.1:${(hung.address() as AddressInfo).port}`;
    try {
      const vllm = await serve({ profile: 'vllm' });
      const retry = { retries: 4, backoffMs: 200, maxBackoffMs: 1000 };
      let started = Date.now();
      const found = await resolveServer('auto', [vllm.url, hungUrl], retry, 30_000);
      expect(Date.now() - started).toBeLessThan(DETECT_GRACE_MS + 2000);
      expect(found.profile.name).toBe('vllm');
      expect(found.unreachable).toEqual([1]);
      expect(found.notes[0]).toContain(`${hungUrl} did not answer /v1/models (no answer ${DETECT_GRACE_MS / 1000} s after another endpoint's)`);
      const stop = new AbortController();
      setTimeout(() => stop.abort(), 300);
      started = Date.now();
      await expect(resolveServer('auto', [hungUrl], retry, 30_000, undefined, undefined, stop.signal)).rejects.toBeInstanceOf(StoppedDetection);
      expect(Date.now() - started).toBeLessThan(2000);
    } finally {
      hung.closeAllConnections();
      await new Promise((resolve) => hung.close(resolve));
    }
  }, 30_000);

  it('writes each prompt\'s group into its results lines when the prompt has one', async () => {
    const { candidates, sim } = simPrompts(2);
    const server = await serve({ prompts: sim });
    const prompts = new Map(candidates.map((c, i) => [c.id, i === 0 ? { ...c, group: 'algebra' } : c]));
    const report = await executePlan(planOf({ q0: 2, q1: 2 }), prompts, options([server.url]));
    expect(report.results.filter((r) => r.prompt_id === 'q0').map((r) => r.group)).toEqual(['algebra', 'algebra']);
    expect(report.results.filter((r) => r.prompt_id === 'q1').every((r) => !('group' in r))).toBe(true);
  });

  it('writes each prompt\'s offline hint into its results lines when the prompt has one (issue 14)', async () => {
    const { candidates, sim } = simPrompts(2);
    const server = await serve({ prompts: sim });
    const prompts = new Map(candidates.map((c, i) => [c.id, i === 0 ? { ...c, group: 'olympiad', prior_pass_rate: 0.25, prior_samples: 16 } : { ...c, prior_pass_rate: 0.5 }]));
    const report = await executePlan(planOf({ q0: 2, q1: 1 }), prompts, options([server.url]));
    const q0 = report.results.filter((r) => r.prompt_id === 'q0');
    expect(q0.map((r) => [r.group, r.prior_pass_rate, r.prior_samples])).toEqual([['olympiad', 0.25, 16], ['olympiad', 0.25, 16]]);
    const q1 = report.results.find((r) => r.prompt_id === 'q1')!;
    expect([q1.prior_pass_rate, 'prior_samples' in q1, 'group' in q1]).toEqual([0.5, false, false]);
    // observe takes them: the shared results check keeps the fields.
    const batch = batchOf(report.results);
    expect(batch.results[0]).toMatchObject({ prior_pass_rate: 0.25, prior_samples: 16, group: 'olympiad' });
  });
});
