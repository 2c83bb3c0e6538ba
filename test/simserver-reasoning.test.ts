// The sim-server (a TEST DOUBLE of vLLM and SGLang) as a server with a reasoning parser
// (`--reasoning`: the thinking in `reasoning_content`, or `reasoning` as vLLM >= 0.11 names it,
// only the closing sentence in `content`) and with an engine that fails mid-answer
// (`--stream-error-rate`: vLLM 0.10-0.11's error chunk with code 400 after the 200, then
// [DONE]; serving_chat.py / serving_completion.py, create_streaming_error_response in
// serving_engine.py). The expected texts come from SimModel.respond, not from the server.
import { describe, expect, it } from 'vitest';
import { ENGINE_ERROR_CHUNK, SERVER_PROFILES, SIM_ANSWER_TOKENS, SimModel, defaultSimModel, executePlan, mathVerifier, type ExecuteOptions } from '../src/index.js';
import { expected, groupSeed, planOf, simPrompts, simServers } from './executor-helpers.js';

const start = simServers();

async function post(url: string, path: string, body: unknown): Promise<{ status: number; text: string }> {
  const res = await fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, text: await res.text() };
}

/** The `data:` events of an SSE body, parsed (`[DONE]` kept as the string). */
function events(text: string): unknown[] {
  return text.split('\n\n').filter((e) => e.startsWith('data: ')).map((e) => e.slice(6)).map((d) => (d === '[DONE]' ? d : JSON.parse(d)));
}

function options(endpoints: string[], extra: Partial<ExecuteOptions> = {}): ExecuteOptions {
  return {
    endpoints, server: SERVER_PROFILES.vllm, model: 'm', concurrency: 2, requestN: 8, overProvision: 0, timeoutMs: 5000,
    retry: { retries: 3, backoffMs: 5, maxBackoffMs: 20 }, verifier: mathVerifier(undefined), ...extra,
  };
}

describe('sim-server with a reasoning parser', () => {
  it('sends a chat answer\'s thinking in the field asked and its closing sentence as content, streamed or not; completions unchanged', async () => {
    const { sim } = simPrompts(2);
    const full = new SimModel(defaultSimModel).respond(sim[1], sim[1]!.text, 3).tokens;
    const thinking = full.slice(0, full.length - SIM_ANSWER_TOKENS).join('');
    const closing = full.slice(full.length - SIM_ANSWER_TOKENS).join('');
    expect(closing).toMatch(/^ The answer is \$\\boxed\{.*\}\$\.$/);
    for (const field of ['reasoning_content', 'reasoning'] as const) {
      const server = await start({ prompts: sim, reasoning: field });
      const chat = { model: 'm', messages: [{ role: 'user', content: sim[1]!.text }], n: 1, max_tokens: 4000, seed: 3 };
      const whole = JSON.parse((await post(server.url, '/v1/chat/completions', chat)).text);
      expect(whole.choices[0].message).toEqual({ role: 'assistant', [field]: thinking, content: closing });
      const streamed = events((await post(server.url, '/v1/chat/completions', { ...chat, stream: true })).text);
      const deltas = streamed.filter((e): e is { choices: { delta: Record<string, string> }[] } => typeof e === 'object').map((e) => e.choices[0]!.delta);
      expect(deltas.map((d) => d[field] ?? '').join('')).toBe(thinking);
      expect(deltas.map((d) => d.content ?? '').join('')).toBe(closing);
      expect(streamed.at(-1)).toBe('[DONE]');
      // Cut inside its thinking by max_tokens: no content at all.
      const cut = JSON.parse((await post(server.url, '/v1/chat/completions', { ...chat, max_tokens: 5 })).text);
      expect(cut.choices[0]).toMatchObject({ finish_reason: 'length', message: { [field]: full.slice(0, 5).join(''), content: null } });
      const text = JSON.parse((await post(server.url, '/v1/completions', { model: 'm', prompt: sim[1]!.text, n: 1, max_tokens: 4000, seed: 3 })).text);
      expect(text.choices[0].text).toBe(full.join(''));
    }
  });

  it('the executor grades the content, with the same rewards and tokens as the server without a parser', async () => {
    const { candidates: list, sim } = simPrompts(4);
    const candidates = new Map(list.map((c) => [c.id, c]));
    const plain = await start({ prompts: sim });
    const reasoning = await start({ prompts: sim, reasoning: 'reasoning_content' });
    const plan = planOf({ q0: 3, q1: 3, q2: 2, q3: 2 }, { maxTokens: 4096 });
    const a = await executePlan(plan, candidates, options([plain.url], { api: 'chat' }));
    const b = await executePlan(plan, candidates, options([reasoning.url], { api: 'chat' }));
    const model = new SimModel(defaultSimModel);
    const oracle = a.results.map((r) => {
      const p = sim.find((s) => s.id === r.prompt_id)!;
      const j = Number(r.rollout_id.split('#')[1]);
      return expected(model, p, groupSeed(plan.seed, plan.step, p.id) + j, 4096);
    });
    expect(a.results.map((r) => [r.reward, r.tokens])).toEqual(oracle.map((o) => [o.reward, o.tokens]));
    expect(b.results.map((r) => [r.rollout_id, r.reward, r.tokens, r.finish_reason])).toEqual(a.results.map((r) => [r.rollout_id, r.reward, r.tokens, r.finish_reason]));
    expect(new Set(oracle.map((o) => o.reward)).size).toBe(2); // some right, some wrong: the grading is seen
  });
});

describe('sim-server whose engine fails mid-answer', () => {
  it("sends vLLM's error chunk with code 400 after each choice's first token, then [DONE]; the next request is answered", async () => {
    const { sim } = simPrompts(1);
    const server = await start({ prompts: sim, faults: { streamErrorRequests: [1] } });
    const body = { model: 'm', prompt: sim[0]!.text, n: 2, max_tokens: 4000, seed: 1, stream: true };
    const failed = await post(server.url, '/v1/completions', body);
    expect(failed.status).toBe(200);
    const sent = events(failed.text);
    expect(sent.slice(-2)).toEqual([ENGINE_ERROR_CHUNK, '[DONE]']);
    expect(ENGINE_ERROR_CHUNK.error.code).toBe(400);
    expect(sent.slice(0, -2).map((e) => (e as { choices: { finish_reason: unknown }[] }).choices[0]!.finish_reason)).toEqual([null, null]);
    const next = events((await post(server.url, '/v1/completions', body)).text);
    expect(next).not.toContainEqual(ENGINE_ERROR_CHUNK);
    expect(next.at(-1)).toBe('[DONE]');
    expect(server.stats.engineErrors).toBe(1);
  });

  it('the executor retries such answers on the other replica and the run ends with every rollout', async () => {
    const { candidates: list, sim } = simPrompts(3);
    const candidates = new Map(list.map((c) => [c.id, c]));
    const failing = await start({ prompts: sim, faults: { streamErrorRate: 1 } });
    const healthy = await start({ prompts: sim });
    const plan = planOf({ q0: 2, q1: 2, q2: 2 });
    const report = await executePlan(plan, candidates, options([failing.url, healthy.url], { concurrency: 1 }));
    expect(report.results.map((r) => r.finish_reason)).toEqual(Array(6).fill('stop'));
    expect(failing.stats.engineErrors).toBeGreaterThanOrEqual(1);
    expect(report.summary.retries).toBe(failing.stats.engineErrors);
  });
});
