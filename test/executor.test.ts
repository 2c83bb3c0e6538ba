import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  Allocator, PartialStore, commitPartials, SimModel, batchOf, defaultSimModel, executePlan, groupSeed, mathVerifier,
  type ExecuteOptions, type ExecutedRollout, type Plan,
} from '../src/index.js';
import { expected, planOf, simPrompts, simServers } from './executor-helpers.js';
import { tempDir } from './temp.js';

const serve = simServers();

function tempState(): string {
  return join(tempDir('rb-exec-'), 'state.db');
}

function options(endpoints: string[], extra: Partial<ExecuteOptions> = {}): ExecuteOptions {
  return {
    endpoints, model: 'sim', concurrency: 16, requestN: 8, overProvision: 0, timeoutMs: 5000,
    retry: { retries: 4, backoffMs: 10, maxBackoffMs: 50 }, verifier: mathVerifier(undefined), ...extra,
  };
}

const byPrompt = (results: readonly ExecutedRollout[]) => {
  const m = new Map<string, ExecutedRollout[]>();
  for (const r of results) m.set(r.prompt_id, [...(m.get(r.prompt_id) ?? []), r]);
  return m;
};

describe('execute against the sim-server (a test double)', () => {
  it('sends each prompt exactly its planned rollouts, split into requests of at most request-n, with seed + j', async () => {
    const { candidates, sim } = simPrompts(4);
    const server = await serve({ prompts: sim });
    const ns = { q0: 3, q1: 8, q2: 20, q3: 33 };
    const plan = planOf(ns);
    const report = await executePlan(plan, new Map(candidates.map((c) => [c.id, c])), options([server.url]));
    expect(server.stats.choicesByPrompt).toEqual(ns);
    expect(server.stats.requests).toBe(1 + 1 + 3 + 5);
    expect(report.summary.requests).toBe(10);
    const groups = byPrompt(report.results);
    const model = new SimModel(defaultSimModel);
    let checked = 0;
    for (const [id, n] of Object.entries(ns)) {
      const rows = groups.get(id)!;
      expect(rows.length).toBe(n);
      expect(new Set(rows.map((r) => r.rollout_id)).size).toBe(n);
      const base = groupSeed(plan.seed, plan.step, id);
      expect(rows.map((r) => r.seed).sort((a, b) => a - b)).toEqual(Array.from({ length: n }, (_, j) => base + j));
      const prompt = sim.find((p) => p.id === id)!;
      for (const r of rows) {
        const want = expected(model, prompt, r.seed, 4096);
        expect(r.tokens).toBe(want.tokens);
        expect(r.reward).toBe(want.reward);
        expect(r.finish_reason).toBe(want.finish);
        checked++;
      }
    }
    expect(checked).toBe(64);
    expect(report.summary.rollouts).toBe(64);
    expect(report.summary.tokens).toBe(report.results.reduce((s, r) => s + r.tokens!, 0));
  });

  it('cuts a response at max_tokens: finish_reason "length", tokens = max_tokens, reward 0', async () => {
    const { candidates, sim } = simPrompts(2, [1, 1]);
    const server = await serve({ prompts: sim });
    const report = await executePlan(planOf({ q0: 4, q1: 4 }, { maxTokens: 50 }), new Map(candidates.map((c) => [c.id, c])), options([server.url]));
    expect(report.results.length).toBe(8);
    for (const r of report.results) {
      expect(r).toMatchObject({ finish_reason: 'length', tokens: 50, reward: 0 });
    }
  });

  it('spreads requests over endpoints by load, and chat prompts use /v1/chat/completions', async () => {
    const { candidates, sim } = simPrompts(6);
    const chat = candidates.map((c) => ({ ...c, prompt: undefined, messages: [{ role: 'user', content: c.prompt }] }));
    const a = await serve({ prompts: sim, msPerToken: 0.2 });
    const b = await serve({ prompts: sim, msPerToken: 0.2 });
    const plan = planOf({ q0: 8, q1: 8, q2: 8, q3: 8, q4: 8, q5: 8 });
    const report = await executePlan(plan, new Map(chat.map((c) => [c.id, c])), options([a.url, b.url], { concurrency: 4 }));
    expect(a.stats.requests).toBeGreaterThan(0);
    expect(b.stats.requests).toBeGreaterThan(0);
    expect(a.stats.requests + b.stats.requests).toBe(6);
    expect(report.summary.requests_per_endpoint).toEqual([a.stats.requests, b.stats.requests]);
    expect(report.results.length).toBe(48);
    const model = new SimModel(defaultSimModel);
    for (const r of report.results) {
      expect(r.reward).toBe(expected(model, sim.find((p) => p.id === r.prompt_id)!, r.seed, 4096).reward);
    }
  });

  it('retries 503s, dropped connections and a hung request: nothing lost, nothing doubled', async () => {
    const { candidates, sim } = simPrompts(5);
    const server = await serve({ prompts: sim, msPerToken: 0.05, faults: { errorRequests: [1, 4], dropRequests: [2, 6], hangRequests: [3] } });
    const ns = { q0: 6, q1: 6, q2: 6, q3: 6, q4: 6 };
    const plan = planOf(ns);
    const report = await executePlan(plan, new Map(candidates.map((c) => [c.id, c])), options([server.url], { concurrency: 2, timeoutMs: 400 }));
    expect(server.stats.errors).toBe(2);
    expect(server.stats.drops).toBe(2);
    expect(server.stats.hangs).toBe(1);
    expect(report.summary.retries).toBeGreaterThanOrEqual(5);
    expect(report.results.length).toBe(30);
    expect(new Set(report.results.map((r) => r.rollout_id)).size).toBe(30);
    const model = new SimModel(defaultSimModel);
    for (const [id, rows] of byPrompt(report.results)) {
      expect(rows.length).toBe(6);
      for (const r of rows) {
        const want = expected(model, sim.find((p) => p.id === id)!, r.seed, 4096);
        expect([r.tokens, r.reward, r.finish_reason]).toEqual([want.tokens, want.reward, want.finish]);
      }
    }
  });

  it('without token ids, takes a single-choice request\'s usage, and leaves the others unreported', async () => {
    const { candidates, sim } = simPrompts(2);
    const server = await serve({ prompts: sim });
    const map = new Map(candidates.map((c) => [c.id, c]));
    const extraBody = { return_token_ids: false };
    const single = await executePlan(planOf({ q0: 3, q1: 2 }), map, options([server.url], { requestN: 1, extraBody }));
    const model = new SimModel(defaultSimModel);
    expect(single.results.length).toBe(5); // the loop below checks every rollout, not none
    for (const r of single.results) expect(r.tokens).toBe(expected(model, sim.find((p) => p.id === r.prompt_id)!, r.seed, 4096).tokens);
    expect(single.summary.tokens_unknown).toBe(0);
    const grouped = await executePlan(planOf({ q0: 3, q1: 2 }), map, options([server.url], { requestN: 8, extraBody }));
    expect(grouped.results.every((r) => r.tokens === undefined)).toBe(true);
    expect(grouped.summary.tokens_unknown).toBe(5);
  });

  it('refuses extra body fields it sets itself (n, seed, max_tokens, ...) before any request, and a temperature twice', async () => {
    const { candidates, sim } = simPrompts(1);
    const server = await serve({ prompts: sim });
    const map = new Map(candidates.map((c) => [c.id, c]));
    for (const extraBody of [{ n: 5 }, { seed: 1 }, { max_tokens: 8 }, { stream: false }, { model: 'x' }]) {
      await expect(executePlan(planOf({ q0: 4 }), map, options([server.url], { extraBody }))).rejects.toMatchObject({ code: 'BAD_OPTION', message: expect.stringContaining(`--extra-body sets "${Object.keys(extraBody)[0]}"`) });
    }
    await expect(executePlan(planOf({ q0: 4 }), map, options([server.url], { extraBody: { temperature: 0.6 }, temperature: 1 }))).rejects.toThrow('--extra-body sets "temperature" to 0.6 and --temperature to 1: give one');
    expect(server.stats.requests).toBe(0);
    // The same temperature twice, and fields execute leaves to the server, go through.
    const ok = await executePlan(planOf({ q0: 4 }), map, options([server.url], { extraBody: { temperature: 1, top_p: 0.95 }, temperature: 1 }));
    expect(ok.results.length).toBe(4);
    expect(server.stats.requests).toBeGreaterThan(0);
  });

  it('never retries a 4xx: one request, then a caller error', async () => {
    const { candidates, sim } = simPrompts(1);
    const server = await serve({ prompts: sim, modelName: 'the-real-one' });
    const run = executePlan(planOf({ q0: 4 }), new Map(candidates.map((c) => [c.id, c])), options([server.url], { concurrency: 1 }));
    await expect(run).rejects.toThrow(/generation failed: HTTP 404 .*does not exist/);
    expect(server.stats.requests).toBe(1);
  });

  it('gives up after the retries and says so (exit code 1)', async () => {
    const { candidates, sim } = simPrompts(1);
    const server = await serve({ prompts: sim, faults: { errorRate: 1 } });
    const run = executePlan(planOf({ q0: 2 }), new Map(candidates.map((c) => [c.id, c])), options([server.url], { retry: { retries: 2, backoffMs: 1, maxBackoffMs: 1 } }));
    await expect(run).rejects.toMatchObject({ exitCode: 1, message: expect.stringMatching(/gave up after 3 attempts/) });
    expect(server.stats.requests).toBe(3);
  });
});

describe('over-provisioning and partial rollouts (APRIL)', () => {
  // A long-tailed step: log-length sd 0.9 around ~150 tokens, 1 ms a token (CALIBRATION.md's
  // long-CoT tail is of this shape; scaled down so the test takes about a second).
  const tailModel = new SimModel({ ...defaultSimModel, length: { a: 5.0, b: 0, c: 0, sdU: 0, sdE: 0.9 } });

  async function step(plan: Plan, r: number, state: string) {
    const { candidates, sim } = simPrompts(8, [0.5]);
    const server = await serve({ prompts: sim, model: tailModel, msPerToken: 1 });
    const partials = new PartialStore(state);
    const before = partials.count();
    try {
      const report = await executePlan(plan, new Map(candidates.map((c) => [c.id, c])), options([server.url], { overProvision: r, concurrency: 64, requestN: 16, partials }));
      expect(partials.count()).toBe(before);
      commitPartials(partials, report);
      return { report, server, sim, stored: partials.all() };
    } finally {
      partials.close();
    }
  }

  it('cuts the wall time of a long-tailed step and keeps exactly n finished rollouts per group', async () => {
    const plan = planOf({ q0: 8, q1: 8, q2: 8, q3: 8, q4: 8, q5: 8, q6: 8, q7: 8 }, { maxTokens: 8192 });
    const base = await step(plan, 0, ':memory:');
    const over = await step(plan, 0.5, ':memory:');
    const ratio = over.report.summary.wall_s / base.report.summary.wall_s;
    console.log(
      `long-tailed step, 64 rollouts: wall ${base.report.summary.wall_s} s without over-provisioning, ` +
        `${over.report.summary.wall_s} s with --over-provision 0.5 (${(100 * (1 - ratio)).toFixed(0)}% less); ` +
        `p99 latency ${base.report.summary.latency_p99_ms} -> ${over.report.summary.latency_p99_ms} ms`,
    );
    expect(ratio).toBeLessThan(0.75);
    expect(over.server.stats.choicesByPrompt).toEqual(Object.fromEntries(plan.allocations.map((a) => [a.prompt_id, 12])));
    for (const rows of byPrompt(over.report.results).values()) {
      expect(rows.filter((r) => r.finish_reason !== 'abort').length).toBe(8);
      expect(rows.filter((r) => r.finish_reason === 'abort').length).toBe(4);
    }
    expect(over.report.summary).toMatchObject({ rollouts: 64, aborted: 32, not_launched: 0 });
    expect(base.report.summary).toMatchObject({ rollouts: 64, aborted: 0 });
  });

  it('keeps aborted rollouts in the state and resumes them first next step, to their full length', async () => {
    const state = tempState();
    const ids = ['q0', 'q1', 'q2', 'q3', 'q4', 'q5', 'q6', 'q7'];
    const first = await step(planOf(Object.fromEntries(ids.map((id) => [id, 4])), { step: 0, maxTokens: 8192 }), 1, state);
    expect(first.report.summary.aborted).toBeGreaterThan(0);
    const aborted = first.report.results.filter((r) => r.finish_reason === 'abort');
    expect(first.stored.map((p) => p.rollout_id).sort()).toEqual(aborted.map((r) => r.rollout_id).sort());
    for (const p of first.stored) expect(p.text.length).toBeGreaterThan(0);

    const second = await step(planOf(Object.fromEntries(ids.map((id) => [id, 4])), { step: 1, maxTokens: 8192 }), 0, state);
    const resumedIds = new Set(aborted.map((r) => r.rollout_id));
    const resumed = second.report.results.filter((r) => resumedIds.has(r.rollout_id));
    const perPrompt = new Map<string, number>();
    for (const r of aborted) perPrompt.set(r.prompt_id, (perPrompt.get(r.prompt_id) ?? 0) + 1);
    // Each group resumes its stored partials first (up to its n), then fills with fresh rollouts.
    expect(resumed.length).toBe([...perPrompt.values()].reduce((s, k) => s + Math.min(k, 4), 0));
    expect(second.server.stats.continuationsByPrompt).toEqual(Object.fromEntries([...perPrompt].map(([id, k]) => [id, Math.min(k, 4)])));
    for (const r of resumed) {
      expect(r.step).toBe(1);
      const want = expected(tailModel, second.sim.find((p) => p.id === r.prompt_id)!, r.seed, 8192);
      expect([r.tokens, r.reward, r.finish_reason]).toEqual([want.tokens, want.reward, want.finish]);
    }
    expect(second.report.summary.resumed).toBe(resumed.length);
    for (const rows of byPrompt(second.report.results).values()) expect(rows.length).toBe(4);
    expect(second.stored.length).toBe(first.stored.length - resumed.length);

    // observe: the aborted lines of step 0 do not count; their resumed rollouts count once, in step 1.
    const allocator = new Allocator({ state: ':memory:' });
    const s0 = allocator.observe(batchOf(first.report.results));
    expect(s0).toMatchObject({ applied: 32, aborted: aborted.length });
    const s1 = allocator.observe(batchOf(second.report.results));
    expect(s1).toMatchObject({ applied: 32, duplicates: 0, last_step: 1 });
    expect(allocator.posterior('q0').rollouts).toBe(8);
    allocator.close();
  });

  it('stops at the token budget when over-provisioning, and aborts the rest', async () => {
    const plan = planOf({ q0: 8, q1: 8, q2: 8, q3: 8 }, { maxTokens: 8192, tokens: 2000 });
    const run = await step(plan, 0.5, ':memory:');
    expect(run.report.summary.stopped_by_token_budget).toBe(true);
    expect(run.report.summary.tokens).toBeGreaterThanOrEqual(2000);
    expect(run.report.summary.rollouts).toBeLessThan(32);
    expect(run.report.summary.aborted).toBeGreaterThan(0);
  });
});
