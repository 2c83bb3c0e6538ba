// What a server says inside an answer it sent with HTTP 200, and what a run-ending error names.
// Found by a user checking the executor against what vLLM and SGLang send:
// - SGLang's scheduler refuses an input longer than it can hold (`validate_input_length`,
//   sglang/srt/managers/utils.py: "Input length (T tokens) exceeds the maximum allowed length
//   (N tokens) ...") by aborting the request with a 400 status, which a streamed request gets as
//   an error chunk after its 200 (serving_completions.py). The executor retried it as a server
//   failure and then failed the whole run, losing every other prompt's rollouts.
// - A 200 whose body is an error (`"object": "error"`, vLLM's and SGLang's `ErrorResponse`, as a
//   proxy may pass on) was retried until "stream ended without a finish_reason", the server's
//   message never shown.
// - A reasoning model's chat stream (vLLM's and SGLang's reasoning parsers) sends its thinking in
//   `delta.reasoning_content` (`reasoning` in vLLM >= 0.11) and `content` only after it. A
//   rollout cut in its thinking was kept as a partial with no text and its tokens, then
//   "resumed" as a fresh generation with the same seed, a max_tokens lowered by those tokens,
//   and them counted in its own.
// - A run-ending error said neither the prompt nor the request ("request timed out; gave up
//   after 2 attempts").
// The servers are node:http servers written here, TEST DOUBLES of vLLM and SGLang for these
// answers only (named by the upstream files above).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { PartialStore, SERVER_PROFILES, executePlan, mathVerifier, type Candidate, type ExecuteOptions } from '../src/index.js';
import { planOf } from './executor-helpers.js';

type Handler = (body: Record<string, unknown>, res: ServerResponse) => void;

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((resolve) => s.close(resolve));
  }
});

/** A server answering every POST with `handle`; its request bodies, in arrival order. */
async function fake(handle: Handler): Promise<{ url: string; bodies: Record<string, unknown>[] }> {
  const bodies: Record<string, unknown>[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString()));
    req.on('end', () => {
      const body = JSON.parse(raw) as Record<string, unknown>;
      bodies.push(body);
      handle(body, res);
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, bodies };
}

const sse = (res: ServerResponse, events: readonly unknown[], end = true) => {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  for (const e of events) res.write(`data: ${JSON.stringify(e)}\n\n`);
  if (end) res.end('data: [DONE]\n\n');
};

/** Every choice of a completions request answered "\boxed{2}" in two tokens. */
const answered = (body: Record<string, unknown>, res: ServerResponse) =>
  sse(res, Array.from({ length: body.n as number }, (_, index) => ({ choices: [{ index, text: '\\boxed{2}', finish_reason: 'stop', token_ids: [1, 2] }] })));

const prompts = (ids: readonly string[], chat = false): Map<string, Candidate> =>
  new Map(ids.map((id) => [id, chat ? { id, messages: [{ role: 'user', content: `${id}: 1+1?` }], ground_truth: '2' } : { id, prompt: `${id}: 1+1?`, ground_truth: '2' }]));

function options(url: string, extra: Partial<ExecuteOptions> = {}): ExecuteOptions {
  return {
    endpoints: [url], server: SERVER_PROFILES.vllm, model: 'm', concurrency: 4, requestN: 8, overProvision: 0, timeoutMs: 5000,
    retry: { retries: 2, backoffMs: 5, maxBackoffMs: 20 }, verifier: mathVerifier(undefined), ...extra,
  };
}

const SGLANG_INPUT = 'Input length (70 tokens) exceeds the maximum allowed length (63 tokens). Use a shorter input or enable --allow-auto-truncate.';

describe('an error inside an answer sent with HTTP 200', () => {
  it("SGLang's scheduler refusing a long input: that prompt's rollouts are written context_length, the others generated, nothing retried", async () => {
    const s = await fake((body, res) => {
      if (String(body.prompt).startsWith('long')) sse(res, [{ error: { object: 'error', message: SGLANG_INPUT, type: 'BAD_REQUEST', param: null, code: 400 } }]);
      else answered(body, res);
    });
    const report = await executePlan(planOf({ ok: 3, long: 2 }), prompts(['ok', 'long']), options(s.url, { server: SERVER_PROFILES.sglang }));
    expect(report.results.filter((r) => r.prompt_id === 'long').map((r) => [r.finish_reason, r.server_finish_reason])).toEqual([
      ['abort', 'context_length'], ['abort', 'context_length'],
    ]);
    expect(report.results.filter((r) => r.prompt_id === 'ok').map((r) => [r.finish_reason, r.reward])).toEqual([['stop', 1], ['stop', 1], ['stop', 1]]);
    expect(report.too_long).toEqual([{ prompt_id: 'long', message: SGLANG_INPUT }]);
    expect(report.summary.retries).toBe(0);
    // SGLang's profile sends one request a rollout: 3 for "ok"; "long" is refused at its first.
    expect(s.bodies.filter((b) => String(b.prompt).startsWith('long')).length).toBeLessThanOrEqual(2);
  });

  it('a body that is an error object (code 404) ends the run with the server\'s message, not retried', async () => {
    const s = await fake((_body, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ object: 'error', message: 'The model `m2` does not exist.', type: 'NotFoundError', param: null, code: 404 }));
    });
    await expect(executePlan(planOf({ q: 2 }), prompts(['q']), options(s.url))).rejects.toMatchObject({
      code: 'BAD_OPTION',
      message: `generation failed: the server refused the request in its answer (code 404): The model \`m2\` does not exist. (prompt "q", rollouts 0/q#0..0/q#1, ${s.url}/v1/completions)`,
    });
    expect(s.bodies).toHaveLength(1);
  });

  it('an error chunk with a 5xx code is still retried, and the answer after it kept', async () => {
    let calls = 0;
    const s = await fake((body, res) => {
      if (calls++ === 0) sse(res, [{ error: { object: 'error', message: 'engine dead', code: 500 } }]);
      else answered(body, res);
    });
    const report = await executePlan(planOf({ q: 2 }), prompts(['q']), options(s.url));
    expect(report.results.map((r) => r.finish_reason)).toEqual(['stop', 'stop']);
    expect(report.summary.retries).toBe(1);
  });
});

describe("vLLM 0.10-0.11's error chunk with code 400 for a failure of its engine", () => {
  // serving_completion.py / serving_chat.py catch any exception of the streaming generator and
  // send `create_streaming_error_response(str(e))`, whose status defaults to 400
  // (serving_engine.py); an engine that died (EngineDeadError, vllm/v1/engine/exceptions.py)
  // reaches the client so. It ended the whole run (exit 2), the healthy replica never asked.
  const DEAD = { error: { message: 'EngineCore encountered an issue. See stack trace (above) for the root cause.', type: 'BadRequestError', param: null, code: 400 } };

  it('is retried, on the other replica, and the run goes on', async () => {
    const dead = await fake((_body, res) => sse(res, [DEAD]));
    const healthy = await fake(answered);
    const report = await executePlan(planOf({ q: 2, r: 2 }), prompts(['q', 'r']), options(dead.url, { endpoints: [dead.url, healthy.url], concurrency: 1 }));
    expect(report.results.map((r) => [r.rollout_id, r.finish_reason, r.reward])).toEqual([
      ['0/q#0', 'stop', 1], ['0/q#1', 'stop', 1], ['0/r#0', 'stop', 1], ['0/r#1', 'stop', 1],
    ]);
    expect(dead.bodies.length).toBeGreaterThanOrEqual(1);
    expect(healthy.bodies.length).toBeGreaterThanOrEqual(2);
    expect(report.summary.retries).toBeGreaterThanOrEqual(1);
  });

  it('with one server that keeps failing, ends the run after the retries with the message; another 4xx code in a chunk still ends it at once', async () => {
    const dead = await fake((_body, res) => sse(res, [DEAD]));
    await expect(executePlan(planOf({ q: 1 }), prompts(['q']), options(dead.url))).rejects.toThrow(
      /server error in the answer \(code 400, which vLLM sends for a failure of its engine too\): EngineCore encountered an issue.*gave up after 3 attempts/,
    );
    expect(dead.bodies).toHaveLength(3);
    const gone = await fake((_body, res) => sse(res, [{ error: { message: 'The model `m` does not exist.', code: 404 } }]));
    await expect(executePlan(planOf({ q: 1 }), prompts(['q']), options(gone.url))).rejects.toThrow('the server refused the request in its answer (code 404)');
    expect(gone.bodies).toHaveLength(1);
  });
});

describe('a run-ending error names the prompt, the rollouts and the request', () => {
  it('a 400 that is not about the context', async () => {
    const s = await fake((body, res) => {
      if (!String(body.prompt).startsWith('bad')) return answered(body, res);
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end('{"error":{"message":"stop_token_ids contain invalid token id","type":"BadRequestError","param":null,"code":400}}');
    });
    await expect(executePlan(planOf({ ok: 2, bad: 3 }), prompts(['ok', 'bad']), options(s.url))).rejects.toThrow(
      `(prompt "bad", rollouts 0/bad#0..0/bad#2)`,
    );
  });

  it('a request that timed out, with the timeout', async () => {
    const s = await fake((body, res) => {
      if (!String(body.prompt).startsWith('slow')) answered(body, res);
      // else: nothing, ever
    });
    await expect(executePlan(planOf({ ok: 1, slow: 1 }), prompts(['ok', 'slow']), options(s.url, { timeoutMs: 200, retry: { retries: 1, backoffMs: 5, maxBackoffMs: 10 } }))).rejects.toThrow(
      `generation failed: request timed out; gave up after 2 attempts (prompt "slow", rollout 0/slow#0, ${s.url}/v1/completions; nothing came for 0.2 s (--timeout-s))`,
    );
  });
});

describe("a reasoning model's chat rollout cut in its thinking", () => {
  /**
   * vLLM with a reasoning parser: choices 0 and 1 think in one token and answer; the others
   * think 30 tokens (`reasoning_content`, `reasoning` for odd ones) and never answer.
   */
  const thinking = (body: Record<string, unknown>, res: ServerResponse) => {
    const n = body.n as number;
    const chunk = (index: number, delta: Record<string, unknown>, finish: string | null, ids: number[]) => ({ choices: [{ index, delta, finish_reason: finish, token_ids: ids }] });
    const events: unknown[] = [];
    for (let i = 2; i < n; i++) for (let k = 0; k < 30; k++) events.push(chunk(i, { [i % 2 === 0 ? 'reasoning_content' : 'reasoning']: 'hmm ', content: null }, null, [k]));
    for (const i of [0, 1].filter((i) => i < n)) events.push(chunk(i, { reasoning_content: 'so' }, null, [1]), chunk(i, { content: '\\boxed{2}' }, 'stop', [2, 3]));
    sse(res, events, false); // the cut ones stay open until aborted
  };

  it('is not kept to resume (its text would be nothing), and its tokens are not carried', async () => {
    const s = await fake(thinking);
    const partials = new PartialStore(':memory:');
    try {
      const report = await executePlan(planOf({ a: 2 }), prompts(['a'], true), options(s.url, { overProvision: 1, partials }));
      expect(report.results.map((r) => [r.rollout_id, r.finish_reason, r.reward, r.tokens])).toEqual([
        ['0/a#0', 'stop', 1, 3], ['0/a#1', 'stop', 1, 3], ['0/a#2', 'abort', 0, 30], ['0/a#3', 'abort', 0, 30],
      ]);
      expect(report.partials.keep).toEqual([]);
    } finally {
      partials.close();
    }
  });

  it('a partial stored without text (by an earlier version) starts again with the whole max_tokens', async () => {
    const s = await fake((body, res) => sse(res, [{ choices: [{ index: 0, delta: { content: '\\boxed{2}' }, finish_reason: 'stop', token_ids: [1, 2] }] }]));
    const partials = new PartialStore(':memory:');
    try {
      partials.replace([], [{ rollout_id: '0/a#2', prompt_id: 'a', seed: 9, text: '', tokens: 30, finish_reason: null, step: 0 }]);
      const report = await executePlan(planOf({ a: 1 }, { step: 1, maxTokens: 100 }), prompts(['a'], true), options(s.url, { partials }));
      expect(s.bodies.map((b) => [b.max_tokens, b.seed, b.continue_final_message])).toEqual([[100, 9, undefined]]);
      expect(report.results.map((r) => [r.rollout_id, r.tokens])).toEqual([['0/a#2', 2]]);
    } finally {
      partials.close();
    }
  });

  it('counts the tokens its usage says when it sent no content (SGLang, a single rollout a request): it was written 0 tokens', async () => {
    // SGLang's serving_chat.py with --reasoning-parser: the thinking in reasoning_content,
    // content null; cut at max_tokens before </think>; the usage chunk last.
    const base = { id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'm' };
    const s = await fake((_body, res) => sse(res, [
      { ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }] },
      { ...base, choices: [{ index: 0, delta: { role: null, content: null, reasoning_content: 'Let me think. ' }, logprobs: null, finish_reason: null }] },
      { ...base, choices: [{ index: 0, delta: { role: null, content: null }, logprobs: null, finish_reason: 'length', matched_stop: null }] },
      { ...base, choices: [], usage: { prompt_tokens: 12, completion_tokens: 64, total_tokens: 76 } },
    ]));
    const report = await executePlan(planOf({ a: 1 }, { maxTokens: 64 }), prompts(['a'], true), options(s.url, { server: SERVER_PROFILES.sglang }));
    expect(report.results.map((r) => [r.finish_reason, r.reward, r.tokens])).toEqual([['length', 0, 64]]);
  });

  it('several choices a request without ids or usage: its tokens are unknown, not 0', async () => {
    const s = await fake((body, res) => sse(res, Array.from({ length: body.n as number }, (_, index) => [
      { choices: [{ index, delta: { content: null, reasoning_content: 'hmm' }, finish_reason: null }] },
      { choices: [{ index, delta: { content: null }, finish_reason: 'length' }] },
    ]).flat()));
    const report = await executePlan(planOf({ a: 2 }, { maxTokens: 64 }), prompts(['a'], true), options(s.url));
    expect(report.results.map((r) => [r.finish_reason, r.tokens ?? 'unknown'])).toEqual([['length', 'unknown'], ['length', 'unknown']]);
  });

  it("vLLM's usage over its chunks' ids: the <think> and </think> steps send no chunk but are generated", async () => {
    // vllm/reasoning/basic_parsers.py skips a step whose one token is a think marker; usage counts it.
    const base = { id: 'chatcmpl-3', object: 'chat.completion.chunk', created: 1, model: 'm' };
    const s = await fake((_body, res) => sse(res, [
      { ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }] },
      { ...base, choices: [{ index: 0, delta: { reasoning_content: 'one plus one' }, logprobs: null, finish_reason: null, token_ids: [11, 12, 13] }] },
      { ...base, choices: [{ index: 0, delta: { content: '\\boxed{2}' }, logprobs: null, finish_reason: null, token_ids: [20, 21, 22] }] },
      { ...base, choices: [{ index: 0, delta: { content: '' }, logprobs: null, finish_reason: 'stop', stop_reason: null, token_ids: [151645] }] },
      { ...base, choices: [], usage: { prompt_tokens: 12, total_tokens: 20, completion_tokens: 8 } },
    ]));
    const report = await executePlan(planOf({ a: 1 }), prompts(['a'], true), options(s.url));
    expect(report.results.map((r) => [r.finish_reason, r.reward, r.tokens])).toEqual([['stop', 1, 8]]);
  });
});
