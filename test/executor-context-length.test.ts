// A prompt too long for the server's context with its max_tokens: vLLM, SGLang and OpenAI
// answer 400 with their own message, and `execute` failed the whole run on it ("generation
// failed: HTTP 400 ...", exit 2), losing every other group's rollouts. The servers are the
// sim-server's profiles, a TEST DOUBLE for a GPU inference server; each message is the one its
// upstream file gives (src/simserver/server.ts contextError names them).
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  Allocator, SERVER_PROFILES, SimModel, defaultSimModel, executePlan, mathVerifier, parseResults, runLoop, type ExecuteOptions, type Plan, type PlanExecutor,
} from '../src/index.js';
import { cli } from './cli-helpers.js';
import { expected, planOf, simPrompts, simServers } from './executor-helpers.js';
import { tempDir } from './temp.js';

const serve = simServers();
const model = new SimModel(defaultSimModel);

function options(endpoint: string, server: keyof typeof SERVER_PROFILES = 'vllm'): ExecuteOptions {
  return {
    endpoints: [endpoint], server: SERVER_PROFILES[server], model: 'sim', concurrency: 16, requestN: 8, overProvision: 0, timeoutMs: 5000,
    retry: { retries: 3, backoffMs: 5, maxBackoffMs: 20 }, verifier: mathVerifier(undefined),
  };
}

/** q0 asks 4,096 tokens past a 2,048-token context; q1 and q2 ask 1,024 and fit. */
function plan(): Plan {
  const p = planOf({ q0: 3, q1: 2, q2: 2 }, { maxTokens: 1024 });
  return { ...p, allocations: p.allocations.map((a) => (a.prompt_id === 'q0' ? { ...a, max_tokens: 4096 } : a)) };
}

// The prompts are "Problem i: compute i * 7. Put the answer in \boxed{}.": 11 tokens as the sim counts them (its words).
const MESSAGES = {
  vllm: "'max_tokens' or 'max_completion_tokens' is too large: 4096. This model's maximum context length is 2048 tokens and your request has 11 input tokens (4096 > 2048 - 11).",
  sglang: "Requested token count exceeds the model's maximum context length of 2048 tokens. You requested a total of 4107 tokens: 11 tokens from the input messages and 4096 tokens for the completion. Please reduce the number of tokens in the input messages or the completion to fit within the limit.",
  openai: "This model's maximum context length is 2048 tokens. However, you requested 4107 tokens (11 in the messages, 4096 in the completion). Please reduce the length of the messages or completion.",
} as const;

describe('a prompt longer than the server\'s context with its max_tokens', () => {
  it.each(Object.keys(MESSAGES) as (keyof typeof MESSAGES)[])('%s: its rollouts are written aborted ("context_length"), the other groups are generated, nothing is retried', async (profile) => {
    const { candidates, sim } = simPrompts(3);
    const server = await serve({ prompts: sim, profile, maxModelLen: 2048 });
    const report = await executePlan(plan(), new Map(candidates.map((c) => [c.id, c])), options(`${server.url}/v1`, profile));
    const refused = report.results.filter((r) => r.prompt_id === 'q0');
    expect(refused.map((r) => [r.finish_reason, r.server_finish_reason, r.reward])).toEqual([
      ['abort', 'context_length', 0], ['abort', 'context_length', 0], ['abort', 'context_length', 0],
    ]);
    expect(report.too_long).toEqual([{ prompt_id: 'q0', message: MESSAGES[profile] }]);
    const generated = report.results.filter((r) => r.prompt_id !== 'q0');
    expect(generated.map((r) => r.finish_reason).every((f) => f === 'stop' || f === 'length')).toBe(true);
    expect(generated).toHaveLength(4);
    // On vLLM (choice i seeded seed + i), the groups that fit are what the model answers for
    // their seeds (an oracle apart from the executor); SGLang and OpenAI seed a request once.
    if (profile === 'vllm') {
      for (const r of generated) {
        const want = expected(model, sim.find((p) => p.id === r.prompt_id)!, r.seed, 1024);
        expect([r.tokens, r.reward, r.finish_reason]).toEqual([want.tokens, want.reward, want.finish]);
      }
    }
    expect(report.summary).toMatchObject({ rollouts: 4, planned: 7, aborted: 3, retries: 0, finish_reasons: { context_length: 3 } });
    expect(report.partials.keep).toEqual([]); // nothing to resume: the prompt can never fit
    // A 400 is not retried: q0's requests reached the server once each (SGLang: one a rollout).
    expect(server.stats.requests).toBe(report.summary.requests);
  });

  it('execute exits 0 with a warning naming the prompt and the server\'s words; observe skips the refused rollouts', async () => {
    const dir = tempDir();
    const { candidates, sim } = simPrompts(3);
    const server = await serve({ prompts: sim, maxModelLen: 2048 });
    const prompts = join(dir, 'prompts.jsonl');
    writeFileSync(prompts, candidates.map((c) => JSON.stringify(c)).join('\n'));
    const planPath = join(dir, 'plan.json');
    writeFileSync(planPath, JSON.stringify(plan()));
    const out = join(dir, 'results.jsonl');
    const state = join(dir, 'state.db');
    const run = await cli(['execute', '--plan', planPath, '--prompts', prompts, '--endpoint', `${server.url}/v1`, '--model', 'sim', '--state', state, '--out', out]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toContain('server finish reasons: context_length 3 (refused by the server: prompt and max_tokens beyond its context; not generated)');
    expect(run.stderr).toContain(`rollout-budget: warning: 1 prompt longer than the server's context with their max_tokens, not generated: "q0" (${MESSAGES.vllm.replace(/\.$/, '')}). Their rollouts are written as aborted`);
    const results = parseResults(readFileSync(out, 'utf8'), out).results;
    expect(results).toHaveLength(7);
    const observed = await cli(['observe', '--results', out, '--state', state]);
    expect(JSON.parse(observed.stdout)).toMatchObject({ applied: 4, aborted: 3 });
  });

  it('loop leaves a refused prompt out of its later rounds and steps (it was planned again every round)', async () => {
    const { candidates, sim } = simPrompts(4);
    const server = await serve({ prompts: sim, maxModelLen: 2048 });
    const withTokens = candidates.map((c) => ({ ...c, max_tokens: c.id === 'q1' ? 4096 : 1024 }));
    const planned: string[][] = [];
    const executor: PlanExecutor = (plan, prompts, opts) => {
      planned.push(plan.allocations.filter((a) => a.n > 0).map((a) => a.prompt_id).sort());
      return executePlan(plan, prompts, opts);
    };
    const allocator = new Allocator({ state: ':memory:' });
    try {
      const rows = await runLoop(allocator, withTokens, { rollouts: 16 }, { minN: 2, maxN: 8, seed: 1 }, options(`${server.url}/v1`), 3, undefined, 1, executor);
      expect(rows.map((r) => (r.report.too_long ?? []).map((p) => p.prompt_id))).toEqual([['q1'], [], []]);
      expect(planned).toEqual([['q0', 'q1', 'q2', 'q3'], ['q0', 'q2', 'q3'], ['q0', 'q2', 'q3']]);
      expect(rows.slice(1).every((r) => r.report.summary.rollouts === 16)).toBe(true); // the budget goes to the others
      // In rounds: the step's second round does not plan it again either.
      planned.length = 0;
      const fresh = new Allocator({ state: ':memory:' });
      try {
        const inRounds = await runLoop(fresh, withTokens, { rollouts: 32 }, { minN: 2, maxN: 8, seed: 1 }, options(`${server.url}/v1`), 1, undefined, 2, executor);
        expect(inRounds[0]!.rounds).toHaveLength(2);
        expect(planned[0]).toContain('q1');
        expect(planned[1]).not.toContain('q1');
        expect(inRounds[0]!.rounds.flatMap((r) => (r.too_long ?? []).map((p) => p.prompt_id))).toEqual(['q1']);
      } finally {
        fresh.close();
      }
    } finally {
      allocator.close();
    }
  });
});
