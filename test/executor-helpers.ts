import { afterEach } from 'vitest';
import type { Candidate, Plan, SimPrompt, SimServerOptions } from '../src/index.js';
import { SimModel, SimServer, groupSeed } from '../src/index.js';

/** Prompts the executor sends and the sim-server knows, with fixed pass rates. */
export function simPrompts(count: number, passRates: readonly number[] = [0.1, 0.5, 0.9, 0.3]): { candidates: Candidate[]; sim: SimPrompt[] } {
  const candidates: Candidate[] = [];
  const sim: SimPrompt[] = [];
  for (let i = 0; i < count; i++) {
    const text = `Problem ${i}: compute ${i} * 7. Put the answer in \\boxed{}.`;
    const truth = i % 3 === 0 ? `\\frac{${i + 1}}{7}` : String(i * 7);
    const p = passRates[i % passRates.length]!;
    candidates.push({ id: `q${i}`, prompt: text, ground_truth: truth, sim_pass_rate: p });
    sim.push({ id: `q${i}`, text, groundTruth: truth, passRate: p });
  }
  return { candidates, sim };
}

/** A hand-made plan (version 1) with the given n per prompt. */
export function planOf(ns: Record<string, number>, options: { step?: number; seed?: number; maxTokens?: number | null; tokens?: number | null } = {}): Plan {
  const allocations = Object.entries(ns).map(([prompt_id, n]) => ({
    prompt_id, n, max_tokens: options.maxTokens === undefined ? 4096 : options.maxTokens, expected_tokens: 300, p_mean: 0.5, p_low: 0.1, p_high: 0.9, value: 1,
  }));
  const rollouts = allocations.reduce((s, a) => s + a.n, 0);
  return {
    version: 1, step: options.step ?? 0, seed: options.seed ?? 7, policy: 'bayes', value: 'knapsack',
    budget: { rollouts, tokens: options.tokens ?? null },
    totals: { prompts: allocations.length, rollouts, expected_tokens: 300 * rollouts, objective: 0, upper_bound: 0, gap: 0, surplus_rollouts: 0 },
    allocations, warnings: [],
  };
}

/**
 * Oracle, independent of the executor: what the sim model answers for rollout j of a group
 * (seed = group seed + j) — its token count under max_tokens and whether the model drew it
 * correct (a cut response is wrong).
 */
export function expected(model: SimModel, prompt: SimPrompt, seed: number, maxTokens: number): { tokens: number; reward: number; finish: string } {
  const r = model.respond(prompt, prompt.text, seed);
  if (r.tokens.length > maxTokens) return { tokens: maxTokens, reward: 0, finish: 'length' };
  return { tokens: r.tokens.length, reward: r.correct ? 1 : 0, finish: 'stop' };
}

export { groupSeed };

/**
 * A sim-server starter for one test file (a TEST DOUBLE of an inference server): every server
 * it started is closed after each test.
 */
export function simServers(): (options: SimServerOptions) => Promise<SimServer> {
  const started: SimServer[] = [];
  afterEach(async () => {
    await Promise.all(started.splice(0).map((s) => s.close()));
  });
  return async (options) => {
    const server = new SimServer(options);
    started.push(server);
    await server.start();
    return server;
  };
}
