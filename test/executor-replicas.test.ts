// Several replicas of a server (--endpoint repeated), one of them down or failing: a dead
// replica fails each request at once, so it always had the fewest in flight and drew every
// retry, until a group ran out of attempts and the whole run failed ("gave up after 5
// attempts", exit 1) although the other replica answered everything. With --server auto the
// dead replica's /v1/models failed the run before any request. Now an endpoint that failed
// rests while another answers (executor/dispatcher.ts), and detection takes an unreachable
// replica for the others' kind, with a note. The replicas are sim-servers, a TEST DOUBLE for
// vLLM (src/simserver/server.ts names the upstream behaviour it reproduces).
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Dispatcher, EndpointRests, SERVER_PROFILES, executePlan, mathVerifier, type ExecuteOptions, type ExecutedRollout } from '../src/index.js';
import { cli } from './cli-helpers.js';
import { planOf, simPrompts, simServers } from './executor-helpers.js';
import { tempDir } from './temp.js';

const serve = simServers();

/** A port nothing listens on: a replica that is down (connections refused). */
async function deadEndpoint(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return `http://127.0.0.1:${port}`;
}

function options(endpoints: string[]): ExecuteOptions {
  return {
    endpoints, server: SERVER_PROFILES.vllm, model: 'sim', concurrency: 16, requestN: 4, overProvision: 0, timeoutMs: 5000,
    retry: { retries: 4, backoffMs: 5, maxBackoffMs: 20 }, verifier: mathVerifier(undefined),
  };
}

const byId = (results: readonly ExecutedRollout[]) =>
  Object.fromEntries(results.map((r) => [r.rollout_id, [r.seed, r.tokens, r.reward, r.finish_reason]]));

describe('replicas, one of them down or failing', () => {
  const plan = planOf({ q0: 8, q1: 8, q2: 8, q3: 8, q4: 8, q5: 8, q6: 8, q7: 8 }, { maxTokens: 1024 });

  it.each(['down (connections refused)', 'answering 503 to everything'])('one %s: every rollout is generated on the other, the same as on it alone', async (how) => {
    const { candidates, sim } = simPrompts(8);
    const prompts = new Map(candidates.map((c) => [c.id, c]));
    const live = await serve({ prompts: sim });
    const sick = how.startsWith('down') ? await deadEndpoint() : (await serve({ prompts: sim, faults: { errorRate: 1 } })).url;
    const report = await executePlan(plan, prompts, options([sick, live.url]));
    expect(report.summary.rollouts).toBe(64);
    expect(report.summary.failures_per_endpoint[0]).toBeGreaterThan(0);
    expect(report.summary.failures_per_endpoint[1]).toBe(0);
    // The oracle: the same plan on the live replica alone (seeds fix every sample).
    const alone = await executePlan(plan, prompts, options([live.url]));
    expect(byId(report.results)).toEqual(byId(alone.results));
    // Once the sick replica failed, it got no request for its rest: fewer than one a group.
    expect(report.summary.failures_per_endpoint[0]).toBeLessThanOrEqual(report.summary.requests_per_endpoint[0]!);
    expect(report.summary.requests_per_endpoint[1]).toBeGreaterThanOrEqual(16);
  });

  it('runs that share their rests (loop\'s rounds and steps) do not send the next run\'s first requests to a replica that failed in the last', async () => {
    const { candidates, sim } = simPrompts(8);
    const prompts = new Map(candidates.map((c) => [c.id, c]));
    const live = await serve({ prompts: sim });
    const dead = await deadEndpoint();
    // A clock that stands still: every rest lasts the whole test, whatever the machine's speed.
    const still = { ...options([dead, live.url]), now: () => 0 };
    const rests = new EndpointRests(2);
    const first = await executePlan(plan, prompts, { ...still, rests });
    expect(first.summary.failures_per_endpoint[0]).toBeGreaterThan(0);
    const second = await executePlan(plan, prompts, { ...still, rests });
    expect(second.summary.requests_per_endpoint).toEqual([0, second.summary.requests]);
    expect(second.summary.rollouts).toBe(64);
    // Without them (each run its own, as every round had), the second run tries it again.
    const apart = await executePlan(plan, prompts, still);
    expect(apart.summary.failures_per_endpoint[0]).toBeGreaterThan(0);
    // A replica found unreachable before the run (--server auto) starts resting: no request at all.
    const detected = new EndpointRests(2);
    detected.failed(0, 0);
    const run = await executePlan(plan, prompts, { ...still, rests: detected });
    expect(run.summary.requests_per_endpoint[0]).toBe(0);
    expect(byId(run.results)).toEqual(byId(first.results));
    expect(() => new Dispatcher(['a', 'b'], 4, () => 0, new EndpointRests(3))).toThrow(/rests: an EndpointRests of 3 endpoints for 2 endpoints/);
  });

  it('execute with a replica down: with --server auto a note naming it and a rest from the start, exit 0; its failures in the summary line', async () => {
    const dir = tempDir();
    const { candidates, sim } = simPrompts(8);
    const live = await serve({ prompts: sim });
    const dead = await deadEndpoint();
    const promptsFile = join(dir, 'prompts.jsonl');
    writeFileSync(promptsFile, candidates.map((c) => JSON.stringify(c)).join('\n'));
    const planFile = join(dir, 'plan.json');
    writeFileSync(planFile, JSON.stringify(plan));
    const out = join(dir, 'results.jsonl');
    const run = await cli(['execute', '--plan', planFile, '--prompts', promptsFile, '--endpoint', live.url, '--endpoint', dead, '--model', 'sim',
      '--state', join(dir, 'state.db'), '--out', out, '--retries', '2']);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toContain(`rollout-budget: ${dead} did not answer /v1/models (ECONNREFUSED)`);
    expect(run.stderr).toContain('taking it for the same server as the others; its requests go to them while it does not answer');
    // It starts resting (it did not answer /v1/models): a run within its first second sends it
    // nothing, a longer one tries it again after that second.
    expect(run.stderr).toMatch(/rollouts 64\/64 .*requests \d+ \(retries \d+\), mean reward [\d.]+(; failed requests by endpoint: 0, [1-9]\d*)?\n/);
    expect(readFileSync(out, 'utf8').trim().split('\n')).toHaveLength(64);
    // Named (no detection, so no rest before its first failure), it fails, and the line says where.
    const named = await cli(['execute', '--plan', planFile, '--prompts', promptsFile, '--endpoint', live.url, '--endpoint', dead, '--model', 'sim',
      '--server', 'vllm', '--state', join(dir, 'state.db'), '--out', out, '--retries', '2']);
    expect(named.code, named.stderr).toBe(0);
    expect(named.stderr).toMatch(/rollouts 64\/64 .*; failed requests by endpoint: 0, [1-9]\d*\n/);
    // Every replica down is still an error.
    const none = await cli(['execute', '--plan', planFile, '--prompts', promptsFile, '--endpoint', dead, '--model', 'sim', '--state', join(dir, 'state.db'), '--out', out, '--retries', '1']);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain(`cannot reach ${dead}/v1/models to detect the server (ECONNREFUSED)`);
  });
});

describe('dispatcher: an endpoint that failed rests while another answers', () => {
  it('gets no request for 1 s, doubling with each failure in a row up to 30 s; an answer ends its rest; alone it is still used', async () => {
    let t = 0;
    const d = new Dispatcher(['a', 'b'], 8, () => t);
    d.failed(0);
    expect([await d.acquire(), await d.acquire(), await d.acquire()]).toEqual([1, 1, 1]);
    t = 1000;
    expect(await d.acquire()).toBe(0); // rested 1 s; the least loaded again
    d.failed(0);
    t = 2999;
    expect(await d.acquire()).toBe(1); // second failure in a row: 2 s
    t = 3000;
    expect(await d.acquire()).toBe(0);
    for (let k = 0; k < 10; k++) d.failed(0);
    t += 29_999;
    d.release(1);
    d.release(1);
    d.release(1);
    d.release(1);
    expect(await d.acquire()).toBe(1); // capped at 30 s: still resting 1 ms before its end
    expect(d.load()).toEqual([2, 1]);
    d.release(0);
    d.release(0);
    expect(await d.acquire()).toBe(1); // resting, though it has none in flight
    d.answered(0);
    expect(await d.acquire()).toBe(0);
    // Both resting: the least loaded of all, as before (never a wait for the rest to end).
    d.failed(0);
    d.failed(1);
    expect(d.load()).toEqual([1, 2]);
    expect(await d.acquire()).toBe(0);
  });
});
