import { spawn } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cli } from './cli-helpers.js';
import { PartialStore, SimServer, groupSeed, parseResults, type Plan } from '../src/index.js';
import { simPrompts } from './executor-helpers.js';
import { tempDir } from './temp.js';

let dir: string;
let server: SimServer | undefined;
beforeEach(() => {
  dir = tempDir('rb-cli4-');
});
afterEach(async () => {
  await server?.close();
  server = undefined;
});

function writePrompts(count: number, extra: (i: number) => Record<string, unknown> = () => ({})): string {
  const { candidates } = simPrompts(count);
  const path = join(dir, 'prompts.jsonl');
  writeFileSync(path, candidates.map((c, i) => JSON.stringify({ ...c, ...extra(i) })).join('\n') + '\n');
  return path;
}

async function startSim(count: number): Promise<string> {
  server = new SimServer({ prompts: simPrompts(count).sim });
  return server.start();
}

describe('plan --format', () => {
  it('json is the default and unchanged; jsonl, vllm-batch and sglang carry the same groups and seeds', async () => {
    const prompts = writePrompts(6);
    const state = join(dir, 'state.db');
    const common = ['plan', '--prompts', prompts, '--state', state, '--budget-rollouts', '40', '--seed', '3'];
    const plain = await cli(common);
    const json = await cli([...common, '--format', 'json']);
    expect(plain.code).toBe(0);
    expect(json.stdout).toBe(plain.stdout);
    const plan = JSON.parse(plain.stdout) as Plan;
    const groups = plan.allocations.filter((a) => a.n > 0);
    expect(groups.length).toBe(6);

    const lines = (await cli([...common, '--format', 'jsonl'])).stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(lines[0]).toMatchObject({ type: 'header', version: 1, step: plan.step, seed: 3 });
    expect(lines[0].allocations).toBeUndefined();
    // The prompts give no max_tokens: jsonl keeps null (a trainer applies its own response length);
    // the plan's only warning is the length it had to assume for them (issue 9).
    expect(lines[0].warnings).toEqual(['6 prompts have no length data (their own, their group\'s or any prompt\'s): expected tokens per rollout assumed, 6 without max_tokens at 1024']);
    expect(lines.slice(1)).toEqual(groups.map((a) => ({
      group_id: `${plan.step}/${a.prompt_id}`, prompt_id: a.prompt_id, n: a.n, max_tokens: null, seed: groupSeed(3, plan.step, a.prompt_id),
    })));
    expect(lines.slice(1).reduce((s: number, g: { n: number }) => s + g.n, 0)).toBe(plan.totals.rollouts);

    const texts = new Map(simPrompts(6).candidates.map((c) => [c.id, c.prompt as string]));
    const batchRun = await cli([...common, '--format', 'vllm-batch', '--model', 'Qwen/Qwen2.5-Math-1.5B']);
    expect(batchRun.stderr).toMatch(/warning: 6 planned prompts have no max_tokens .* uses 4096/);
    const batch = batchRun.stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(batch.length).toBe(6);
    for (const [i, b] of batch.entries()) {
      const a = groups[i]!;
      // vllm run-batch serves /v1/chat/completions (run_batch.py): a prompt string becomes one user message.
      expect(b).toEqual({
        custom_id: `${plan.step}/${a.prompt_id}`, method: 'POST', url: '/v1/chat/completions',
        body: { model: 'Qwen/Qwen2.5-Math-1.5B', messages: [{ role: 'user', content: texts.get(a.prompt_id) }], n: a.n, seed: groupSeed(3, plan.step, a.prompt_id), max_tokens: 4096, return_token_ids: true },
      });
    }

    const sg = JSON.parse((await cli([...common, '--format', 'sglang', '--max-tokens', '1000'])).stdout);
    // One entry per rollout: every entry has n = 1 (SGLang's equal-n rule) and its own seed.
    expect(sg.text.length).toBe(plan.totals.rollouts);
    const rids = groups.flatMap((a) => Array.from({ length: a.n }, (_, j) => `${plan.step}/${a.prompt_id}#${j}`));
    expect(sg.rid).toEqual(rids);
    expect(sg.sampling_params).toEqual(groups.flatMap((a) => Array.from({ length: a.n }, (_, j) => ({ max_new_tokens: 1000, sampling_seed: groupSeed(3, plan.step, a.prompt_id) + j }))));
    expect(sg.text).toEqual(groups.flatMap((a) => Array.from({ length: a.n }, () => texts.get(a.prompt_id))));
  });

  it('rejects vllm-batch without --model and an unknown format (exit 2)', async () => {
    const prompts = writePrompts(2);
    const base = ['plan', '--prompts', prompts, '--state', join(dir, 's.db'), '--budget-rollouts', '8'];
    const noModel = await cli([...base, '--format', 'vllm-batch']);
    expect(noModel.code).toBe(2);
    expect(noModel.stderr).toMatch(/--format vllm-batch needs --model/);
    const bad = await cli([...base, '--format', 'parquet']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/parquet/);
  });
});

describe('execute, observe and loop on the command line', () => {
  it('plan → execute → observe: results round-trip, and a second observe only finds duplicates', async () => {
    const url = await startSim(5);
    const prompts = writePrompts(5);
    const state = join(dir, 'state.db');
    const planPath = join(dir, 'plan.json');
    expect((await cli(['plan', '--prompts', prompts, '--state', state, '--budget-rollouts', '30', '--out', planPath])).code).toBe(0);
    const results = join(dir, 'results.jsonl');
    const exec = await cli(['execute', '--plan', planPath, '--prompts', prompts, '--endpoint', url, '--model', 'sim', '--state', state, '--out', results]);
    expect(exec.code).toBe(0);
    expect(exec.stderr).toMatch(/rollouts 30\/30 .*tokens \d+.*wall .* tokens\/s, latency p50 \d+ ms p99 \d+ ms/);
    const batch = parseResults(readFileSync(results, 'utf8'), 'results.jsonl');
    expect(batch.results.length).toBe(30);
    expect(new Set(batch.keys).size).toBe(30);
    const rewardSum = batch.results.reduce((s, r) => s + r.reward, 0);
    const obs = await cli(['observe', '--results', results, '--state', state]);
    expect(JSON.parse(obs.stdout)).toMatchObject({ applied: 30, duplicates: 0, aborted: 0, prompts: 5 });
    const again = await cli(['observe', '--results', results, '--state', state]);
    expect(JSON.parse(again.stdout)).toMatchObject({ applied: 0, duplicates: 30 });
    const inspect = await cli(['inspect', '--state', state]);
    expect(JSON.parse(inspect.stdout).prompts).toBe(5);
    let total = 0;
    for (let i = 0; i < 5; i++) total += JSON.parse((await cli(['inspect', '--state', state, '--prompt', `q${i}`])).stdout).reward_sum;
    expect(total).toBeCloseTo(rewardSum, 9);
  });

  it('loop runs plan → execute → observe for N steps, resuming aborted rollouts', async () => {
    server = new SimServer({ prompts: simPrompts(6).sim, msPerToken: 0.3 });
    const url = await server.start();
    const prompts = writePrompts(6);
    const state = join(dir, 'state.db');
    const run = await cli(['loop', '--prompts', prompts, '--endpoint', url, '--model', 'sim', '--state', state, '--steps', '3', '--budget-rollouts', '24', '--over-provision', '0.5']);
    expect(run.code).toBe(0);
    const rows = run.stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(rows.map((r) => r.step)).toEqual([0, 1, 2]);
    for (const r of rows) {
      expect(r.rollouts).toBe(r.planned);
      expect(r.applied).toBe(r.rollouts); // no rollout id repeats across the step's two rounds
      expect(r.rounds).toBe(2);
    }
    expect(rows[0].aborted).toBeGreaterThan(0);
    expect(rows[1].resumed + rows[2].resumed).toBeGreaterThan(0);
    expect(JSON.parse((await cli(['inspect', '--state', state])).stdout).last_step).toBe(2);
  });

  it('execute warns when the plan is for a step the state has observed (a plan run again, or one from another state)', async () => {
    const url = await startSim(4);
    const prompts = writePrompts(4);
    const state = join(dir, 'again.db');
    const planPath = join(dir, 'plan0.json');
    const planned = await cli(['plan', '--prompts', prompts, '--state', state, '--budget-rollouts', '8']);
    writeFileSync(planPath, planned.stdout);
    const args = ['execute', '--plan', planPath, '--prompts', prompts, '--endpoint', url, '--model', 'sim', '--state', state, '--out', join(dir, 'r0.jsonl')];
    const first = await cli(args);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stderr).not.toMatch(/warning: .* is for step/);
    expect((await cli(['observe', '--results', join(dir, 'r0.jsonl'), '--state', state])).code).toBe(0);
    const again = await cli(args);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toContain(`rollout-budget: warning: ${planPath} is for step 0, and ${state} has observed up to step 0: its rollouts' ids repeat those of a step observed (if it ran there), and observe counts them as duplicates; plan the next step (1) instead`);
  });

  it('a command: verifier that cannot run is named before any generation (it was found after the whole step)', async () => {
    const url = await startSim(4);
    const prompts = writePrompts(4);
    const state = join(dir, 'pre.db');
    const planPath = join(dir, 'plan-pre.json');
    writeFileSync(planPath, (await cli(['plan', '--prompts', prompts, '--state', state, '--budget-rollouts', '8'])).stdout);
    const out = join(dir, 'pre.jsonl');
    for (const command of ['execute', 'loop']) {
      const args = command === 'execute' ? ['execute', '--plan', planPath, '--out', out] : ['loop', '--budget-rollouts', '8'];
      const run = await cli([...args, '--prompts', prompts, '--endpoint', url, '--model', 'sim', '--state', state, '--verifier', 'command:no-such-grader-xyz --x']);
      expect(run.code, command).toBe(2);
      expect(run.stderr, command).toMatch(/^rollout-budget: --verifier command:no-such-grader-xyz --x: the shell cannot run it \(exit 127: .*not found\); checked before any generation\n$/);
    }
    expect(server!.stats.completedChoices).toBe(0);
    expect(existsSync(out)).toBe(false);
    // A grader that fails on no rollouts but grades every real batch is not refused.
    const picky = await cli(['execute', '--plan', planPath, '--out', out, '--prompts', prompts, '--endpoint', url, '--model', 'sim', '--state', state,
      '--verifier', "command:awk 'END { if (NR == 0) exit 3 } { print 1 }'"]);
    expect(picky.code, picky.stderr).toBe(0);
    expect(readFileSync(out, 'utf8').trim().split('\n').length).toBe(8);
  });

  it('loop: an unknown --policy is named before the servers are asked (it came after GET /v1/models, on the first plan)', async () => {
    // No server listens at this port: a loop that asked one first would say it cannot connect.
    const closed = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, '127.0.0.1', () => {
        const { port } = probe.address() as AddressInfo;
        probe.close(() => resolve(port));
      });
    });
    const prompts = writePrompts(4);
    const state = join(dir, 'bad-policy.db');
    const run = await cli(['loop', '--budget-rollouts', '8', '--prompts', prompts, '--endpoint', `http://127.0.0.1:${closed}`, '--model', 'sim', '--state', state, '--policy', 'bayz']);
    expect(run.code).toBe(2);
    expect(run.stderr).toBe('rollout-budget: --policy: unknown name "bayz"; registered: bayes, thompson, mean\n');
    expect(existsSync(state)).toBe(false);
  });

  it('loop, execute and grade name a bad --verifier or a missing --endpoint before they read their inputs (after 10⁶ prompts: 3.5–3.9 s)', async () => {
    // Every input file is bad at line 2 (or not JSON): a command that read it first would name it.
    const prompts = join(dir, 'bad-prompts.jsonl');
    writeFileSync(prompts, '{"id":"a","prompt":"x"}\n{"id":5}\n');
    const plan = join(dir, 'bad-plan.json');
    writeFileSync(plan, '{ not a plan');
    const state = join(dir, 'bad-verifier.db');
    const endpoint = ['--endpoint', 'http://127.0.0.1:8', '--model', 'sim'];
    const runs = [
      [['loop', '--budget-rollouts', '8', '--prompts', prompts, ...endpoint, '--state', state, '--verifier', 'bogus'], /^rollout-budget: unknown verifier "bogus"/],
      [['loop', '--budget-rollouts', '8', '--prompts', prompts, '--model', 'sim', '--state', state], /^rollout-budget: give at least one --endpoint <url>\n$/],
      [['execute', '--plan', plan, '--prompts', prompts, ...endpoint, '--state', state, '--verifier', 'bogus'], /^rollout-budget: unknown verifier "bogus"/],
      [['grade', '--batch-output', plan, '--plan', plan, '--prompts', prompts, '--verifier', 'bogus'], /^rollout-budget: unknown verifier "bogus"/],
    ] as const;
    for (const [argv, message] of runs) {
      const run = await cli([...argv]);
      expect(run.code, argv.join(' ')).toBe(2);
      expect(run.stderr, argv.join(' ')).toMatch(message);
    }
    expect(existsSync(state)).toBe(false);
  });

  it('loop --max-tokens reaches the planner: a token budget is planned at that length, as plan --max-tokens does', async () => {
    // It was sent to the server only: the planner assumed 1024 tokens a rollout, and a budget of
    // 3,000 tokens planned 2 rollouts where 30 of at most 100 tokens fit.
    const url = await startSim(10);
    const prompts = writePrompts(10);
    const run = await cli(['loop', '--prompts', prompts, '--endpoint', url, '--model', 'sim', '--state', join(dir, 'mt.db'), '--steps', '1',
      '--budget-rollouts', '500', '--budget-tokens', '3000', '--rounds', '1', '--max-tokens', '100']);
    expect(run.code, run.stderr).toBe(0);
    const row = JSON.parse(run.stdout.trim()) as { planned: number };
    expect(row.planned).toBe(30);
    expect(run.stderr).toMatch(/expected tokens per rollout assumed, 10 at their max_tokens/);
  });

  it('bad input: exit 2 with one message naming the file and field, and no output file', async () => {
    const url = await startSim(2);
    const prompts = writePrompts(2);
    const planPath = join(dir, 'plan.json');
    writeFileSync(planPath, JSON.stringify({ version: 1, step: 0, seed: 0, budget: { rollouts: 4, tokens: null }, allocations: [{ prompt_id: 'q0', n: -2, max_tokens: null }] }));
    const out = join(dir, 'results.jsonl');
    const bad = await cli(['execute', '--plan', planPath, '--prompts', prompts, '--endpoint', url, '--model', 'sim', '--state', join(dir, 's.db'), '--out', out]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/plan\.json: allocations\[0\]: "n" must be a non-negative integer, got -2/);
    expect(bad.stderr).not.toMatch(/at .*\.ts/);
    expect(existsSync(out)).toBe(false);
    // A group beyond what any plan gives, or rollout indices past an int32 seed: execute and
    // grade built a request or a row per rollout until the heap ran out (n = 1e9), or wrote
    // negative seeds (first_rollout 1e12). Refused before a state or a server is touched.
    for (const [allocation, message] of [
      [{ prompt_id: 'q0', n: 1e9, max_tokens: null }, /allocations\[0\]: "n" must be at most 4096 \(the largest group a plan gives: max_n's limit\), got 1000000000\n$/],
      [{ prompt_id: 'q0', n: 2, first_rollout: 1e12, max_tokens: null }, /allocations\[0\]: "first_rollout" \+ "n" must be at most 1073741824 .*, got 1000000000000 \+ 2\n$/],
    ] as const) {
      writeFileSync(planPath, JSON.stringify({ version: 1, step: 0, seed: 0, budget: { rollouts: 4, tokens: null }, allocations: [allocation] }));
      const state = join(dir, 'huge.db');
      const huge = await cli(['execute', '--plan', planPath, '--prompts', prompts, '--endpoint', url, '--model', 'sim', '--state', state, '--out', out]);
      expect(huge.code).toBe(2);
      expect(huge.stderr).toMatch(message);
      expect(existsSync(state)).toBe(false);
      const graded = await cli(['grade', '--plan', planPath, '--prompts', prompts, '--batch-output', planPath, '--out', out]);
      expect(graded.code).toBe(2);
      expect(graded.stderr).toMatch(message);
    }

    const noTruth = writePrompts(2, () => ({ ground_truth: undefined }));
    writeFileSync(planPath, JSON.stringify({ version: 1, step: 0, seed: 0, budget: { rollouts: 4, tokens: null }, allocations: [{ prompt_id: 'q1', n: 2, max_tokens: null }] }));
    const gt = await cli(['execute', '--plan', planPath, '--prompts', noTruth, '--endpoint', url, '--model', 'sim', '--state', join(dir, 's.db'), '--out', out]);
    expect(gt.code).toBe(2);
    expect(gt.stderr).toMatch(/prompt "q1": the math verifier needs "ground_truth"/);
    expect(existsSync(out)).toBe(false);
    expect(server!.stats.requests).toBe(0);

    const badUrl = await cli(['execute', '--plan', planPath, '--prompts', prompts, '--endpoint', 'localhost', '--model', 'sim']);
    expect(badUrl.code).toBe(2);
    expect(badUrl.stderr).toMatch(/"localhost" is not a URL; expected http:\/\/host:port or http:\/\/host:port\/v1/);

    // A plan file nested 20,000 levels deep: exit 2 naming the file and the depth limit (issue 12 item 5).
    writeFileSync(planPath, `${'['.repeat(20_000)}${']'.repeat(20_000)}`);
    const deep = await cli(['execute', '--plan', planPath, '--prompts', prompts, '--endpoint', url, '--model', 'sim', '--state', join(dir, 's.db'), '--out', out]);
    expect(deep.code).toBe(2);
    expect(deep.stderr).toMatch(/plan\.json: JSON nested deeper than 128 levels/);
    expect(existsSync(out)).toBe(false);
  });
});

describe('sim-server on the command line', () => {
  it('serves on 127.0.0.1 until SIGTERM and grades as the prompts file says', async () => {
    const prompts = writePrompts(3);
    const bin = join(import.meta.dirname, '..', 'bin', 'rollout-budget.js');
    const child = spawn(process.execPath, [bin, 'sim-server', '--port', '0', '--prompts', prompts, '--model', 'sim'], { stdio: ['ignore', 'pipe', 'pipe'] });
    try {
      const { url, banner } = await new Promise<{ url: string; banner: string }>((resolve, reject) => {
        let err = '';
        child.stderr.on('data', (b: Buffer) => {
          err += b.toString();
          const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(err);
          if (m) resolve({ url: m[1]!, banner: err });
        });
        child.on('exit', (code) => reject(new Error(`sim-server exited ${code}: ${err}`)));
      });
      expect(banner).toMatch(/a test double, not a model/);
      const text = simPrompts(3).candidates[1]!.prompt as string;
      const res = await fetch(`${url}/v1/completions`, {
        method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'sim', prompt: text, n: 4, max_tokens: 4000, seed: 1 }),
      });
      const body = (await res.json()) as { choices: { text: string; finish_reason: string }[] };
      expect(body.choices.length).toBe(4);
      for (const c of body.choices) expect(c.text).toMatch(/\\boxed\{(7|8)\}/);
      const wrongModel = await fetch(`${url}/v1/completions`, { method: 'POST', body: JSON.stringify({ model: 'other', prompt: text }) });
      expect(wrongModel.status).toBe(404);
    } finally {
      child.kill('SIGTERM');
    }
    const code = await new Promise<number | null>((resolve) => (child.exitCode !== null ? resolve(child.exitCode) : child.on('exit', (c) => resolve(c))));
    expect(code).toBe(0);
  });
});

describe('a server that goes away mid-run', () => {
  /** `running`'s result once the (only) sim-server was closed after 6 rollouts finished. */
  async function killedMidRun(running: ReturnType<typeof cli>): ReturnType<typeof cli> {
    const live = server!;
    while (live.stats.completedChoices < 6) await new Promise((resolve) => setTimeout(resolve, 20));
    await live.close();
    server = undefined;
    return running;
  }

  it('execute writes what finished and keeps what was in flight, as Ctrl-C does, then exits 1 saying so (the whole step was lost)', async () => {
    // The only server dies after some rollouts finished; the retries run out (--retries 1).
    server = new SimServer({ prompts: simPrompts(6).sim, msPerToken: 0.4 });
    const url = await server.start();
    const prompts = writePrompts(6);
    const state = join(dir, 'state.db');
    const planPath = join(dir, 'plan.json');
    const planned = await cli(['plan', '--prompts', prompts, '--state', state, '--budget-rollouts', '36', '--seed', '2']);
    expect(planned.code, planned.stderr).toBe(0);
    writeFileSync(planPath, planned.stdout);
    const out = join(dir, 'results.jsonl');
    const run = await killedMidRun(cli(['execute', '--plan', planPath, '--prompts', prompts, '--endpoint', url, '--model', 'sim', '--state', state, '--out', out,
      '--concurrency', '3', '--retries', '1', '--request-n', '1']));
    expect(run.code, run.stderr).toBe(1);
    const m = /generation failed: .*gave up after 2 attempts .*: (\d+) finished rollouts written to (.*), (\d+) in flight kept in (.*) to resume\n$/.exec(run.stderr);
    expect(m, run.stderr).not.toBeNull();
    const [finished, kept] = [Number(m![1]), Number(m![3])];
    expect([m![2], m![4]]).toEqual([out, state]);
    expect(finished).toBeGreaterThanOrEqual(6);
    const rows = readFileSync(out, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { finish_reason: string });
    expect(rows.filter((r) => r.finish_reason !== 'abort').length).toBe(finished);
    const observed = await cli(['observe', '--results', out, '--state', state]);
    expect(JSON.parse(observed.stdout)).toMatchObject({ applied: finished });
    // What was in flight with text is kept to resume (streamed: their tokens so far).
    const partials = new PartialStore(state);
    expect(partials.count()).toBe(kept);
    partials.close();
  });

  it('loop observes the finished rollouts of the step, plans no later round, then exits 1 saying so', async () => {
    server = new SimServer({ prompts: simPrompts(6).sim, msPerToken: 0.4 });
    const url = await server.start();
    const prompts = writePrompts(6);
    const state = join(dir, 'loop.db');
    const run = await killedMidRun(cli(['loop', '--prompts', prompts, '--endpoint', url, '--model', 'sim', '--state', state, '--steps', '3',
      '--budget-rollouts', '36', '--concurrency', '3', '--retries', '1', '--request-n', '1']));
    expect(run.code, run.stderr).toBe(1);
    const m = /generation failed: .*: step 0's (\d+) finished rollouts were observed, \d+ in flight kept to resume\n$/.exec(run.stderr);
    expect(m, run.stderr).not.toBeNull();
    const rows = run.stdout.trim().split('\n').map((l) => JSON.parse(l) as { step: number; applied: number; rounds: number });
    expect(rows.map((r) => r.step)).toEqual([0]);
    expect(rows[0]!.applied).toBe(Number(m![1]));
    expect(JSON.parse((await cli(['inspect', '--state', state])).stdout).last_step).toBe(0);
  });
});
