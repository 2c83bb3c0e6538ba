// --timeout-s was a limit on a whole request: a long-CoT generation that kept streaming past it
// (16k-32k tokens take 5-15 min a sequence on a loaded server) was cut, asked again from
// scratch with the same seed, cut again, and the run failed ("request timed out; gave up after
// 5 attempts"). It is now the time without a byte from the server: a stream that keeps coming is
// never cut, and a server that stops sending (before its answer or in the middle of it) is. The
// generating server is the sim-server, a TEST DOUBLE for vLLM (src/simserver/server.ts); the
// one that stalls mid-answer is a node:http server written here for that one behaviour.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { SERVER_PROFILES, SimModel, defaultSimModel, executePlan, mathVerifier, type ExecuteOptions } from '../src/index.js';
import { expected, planOf, simPrompts, simServers } from './executor-helpers.js';

const serve = simServers();
const model = new SimModel(defaultSimModel);

function options(endpoint: string, timeoutMs: number, retries = 2): ExecuteOptions {
  return {
    endpoints: [endpoint], server: SERVER_PROFILES.vllm, model: 'sim', concurrency: 8, requestN: 4, overProvision: 0, timeoutMs,
    retry: { retries, backoffMs: 5, maxBackoffMs: 20 }, verifier: mathVerifier(undefined),
  };
}

const stalls: Server[] = [];
afterEach(async () => {
  for (const s of stalls.splice(0)) {
    s.closeAllConnections();
    await new Promise((resolve) => s.close(resolve));
  }
});

describe('the request timeout is the time without a byte from the server', () => {
  it('a generation that streams for several times the timeout is not cut, and is what the model answers', async () => {
    const { candidates, sim } = simPrompts(3);
    // About 450 tokens a rollout at 2 ms each: about 0.9 s of streaming, against 0.3 s (with 0.15 s
    // a busy machine's pause between two tokens was once taken for a silent server: a retry).
    const server = await serve({ prompts: sim, msPerToken: 2 });
    const report = await executePlan(planOf({ q0: 4, q1: 4, q2: 4 }), new Map(candidates.map((c) => [c.id, c])), options(server.url, 300));
    expect(report.summary.retries).toBe(0);
    expect(report.summary.rollouts).toBe(12);
    expect(report.summary.latency_p50_ms!).toBeGreaterThan(300); // longer than the timeout, and not cut
    for (const r of report.results) {
      const want = expected(model, sim.find((p) => p.id === r.prompt_id)!, r.seed, 4096);
      expect([r.tokens, r.reward, r.finish_reason]).toEqual([want.tokens, want.reward, want.finish]);
    }
  });

  it('a server that stops sending in the middle of an answer is cut after the timeout and asked again', async () => {
    let requests = 0;
    const stall = createServer((req, res) => {
      requests++;
      req.resume();
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(`data: ${JSON.stringify({ choices: [{ index: 0, text: 'The answer', token_ids: [1, 2] }] })}\n\n`);
      // ...and nothing more.
    });
    stalls.push(stall);
    await new Promise<void>((resolve) => stall.listen(0, '127.0.0.1', resolve));
    const { candidates } = simPrompts(1);
    const url = `http://127.0.0.1:${(stall.address() as AddressInfo).port}`;
    await expect(executePlan(planOf({ q0: 1 }), new Map(candidates.map((c) => [c.id, c])), options(url, 200, 1))).rejects.toThrow(
      'generation failed: request timed out; gave up after 2 attempts',
    );
    expect(requests).toBe(2);
  });
});

describe("undici's own 300 s limits are off: --timeout-s alone decides", () => {
  // Node's fetch ended a request after 300 s without its headers or between two body bytes
  // (undici's headersTimeout and bodyTimeout, 300e3 by default), below --timeout-s's default of
  // 600: a request queued behind a full batch on vLLM or SGLang failed at 300 s as a connection
  // error. Waiting 300 s is too long for a test; this one checks that every request goes through
  // the executor's dispatcher, and that its two limits are off (an Agent's options, as undici
  // keeps them: its `options` symbol). Checked by hand on 2026-11-28 with --timeout-s 600 against
  // two servers silent for 310 s (one sent its headers first, as vLLM does; one sent nothing, as
  // SGLang does): both failed at 301 s before (UND_ERR_BODY_TIMEOUT, UND_ERR_HEADERS_TIMEOUT),
  // both finished at 310 s after.
  it('every request to a server (generation and /v1/models) goes through an Agent with headersTimeout and bodyTimeout 0', async () => {
    const { generationDispatcher } = await import('../src/executor/dispatcher-http.js');
    const agent = generationDispatcher();
    const kept = Object.getOwnPropertySymbols(agent).filter((s) => s.description === 'options').map((s) => (agent as never)[s] as Record<string, unknown>);
    expect(kept).toHaveLength(1);
    expect({ headers: kept[0]!.headersTimeout, body: kept[0]!.bodyTimeout }).toEqual({ headers: 0, body: 0 });
    const dispatch = agent.dispatch.bind(agent);
    const origins: string[] = [];
    agent.dispatch = (opts, handler) => {
      origins.push(`${String(opts.origin)}${opts.path}`);
      return dispatch(opts, handler);
    };
    try {
      const { candidates, sim } = simPrompts(2);
      const { url } = await serve({ prompts: sim });
      const out = await executePlan(planOf({ q0: 2, q1: 1 }), new Map(candidates.map((c) => [c.id, c])), options(url, 5_000));
      expect(out.summary.rollouts).toBe(3);
      const { detectServer } = await import('../src/executor/profiles.js');
      await detectServer(url, { retries: 0, backoffMs: 1, maxBackoffMs: 1 }, 5_000);
      expect(origins.filter((o) => o.endsWith('/v1/completions')).length).toBeGreaterThanOrEqual(2);
      expect(origins.filter((o) => o.endsWith('/v1/models'))).toHaveLength(1);
    } finally {
      agent.dispatch = dispatch;
    }
  });
});
