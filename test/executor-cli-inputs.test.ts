// Issues 11, 12 (item 7) and 16 (items 2, 3, 8): the executor's commands on the shipped
// fixture as it is, their error messages, plan --max-tokens, the SGLang export against the
// SGLang-profile sim-server (a TEST DOUBLE of SGLang's /generate, src/simserver/sglang.ts), and
// the command verifier's timeout.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cli } from './cli-helpers.js';
import { SimModel, SimServer, defaultSimModel, groupSeed, type Plan } from '../src/index.js';
import { simPrompts } from './executor-helpers.js';
import { tempDir } from './temp.js';

const shipped = join(import.meta.dirname, '..', 'fixtures', 'oneshot-rlvr-dsr-sub', 'prompts.jsonl');
const bin = join(import.meta.dirname, '..', 'bin', 'rollout-budget.js');
let dir: string;
const servers: SimServer[] = [];
const children: ChildProcess[] = [];
beforeEach(() => {
  dir = tempDir('rb-cli11-');
});
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGTERM');
});

/** Starts `rollout-budget sim-server` as a process and resolves to its URL. */
async function simServerProcess(args: string[]): Promise<string> {
  const child = spawn(process.execPath, [bin, 'sim-server', '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  return new Promise<string>((resolve, reject) => {
    let err = '';
    child.stderr!.on('data', (b: Buffer) => {
      err += b.toString();
      const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(err);
      if (m) resolve(m[1]!);
    });
    child.on('exit', (code) => reject(new Error(`sim-server exited ${code}: ${err}`)));
  });
}

describe('the shipped prompts fixture names its text "problem" (issue 16 item 2)', () => {
  const plan = (extra: string[]) => ['plan', '--prompts', shipped, '--state', join(dir, 's.db'), '--budget-rollouts', '24', '--skip', '--max-n', '8', ...extra];

  it('without --prompt-field: one exit-2 message with file:line, the prompt named once, and the fix', async () => {
    const run = await cli(plan(['--format', 'vllm-batch', '--model', 'sim']));
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/oneshot-rlvr-dsr-sub\/prompts\.jsonl:\d+: prompt "\d+": needs a "prompt" string or a "messages" array to send, got neither; it has "problem": pass --prompt-field problem/);
    expect(run.stderr).not.toMatch(/prompt "(\d+)": prompt "\1"/);
    expect(run.stderr.trim().split('\n').length).toBe(1);
    // execute says the same, before any request, naming the prompts file's line.
    const planPath = join(dir, 'plan.json');
    expect((await cli(plan(['--out', planPath]))).code).toBe(0);
    const exec = await cli(['execute', '--plan', planPath, '--prompts', shipped, '--endpoint', 'http://127.0.0.1:9', '--server', 'vllm', '--model', 'sim', '--state', join(dir, 's.db')]);
    expect(exec.code).toBe(2);
    expect(exec.stderr).toMatch(/^rollout-budget: .*oneshot-rlvr-dsr-sub\/prompts\.jsonl:\d+: prompt "\d+": needs a "prompt" string or a "messages" array to send, got neither; it has "problem": pass --prompt-field problem\n$/);
    // The field there but not text: named with its value ("got neither" said it was missing).
    const numeric = join(dir, 'numeric.jsonl');
    writeFileSync(numeric, '{"id":"a","problem":42,"ground_truth":"1"}\n');
    const bad = await cli(['plan', '--prompts', numeric, '--state', ':memory:', '--budget-rollouts', '4', '--format', 'sglang', '--prompt-field', 'problem']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe(`rollout-budget: ${numeric}:1: prompt "a": needs a "problem" string or a "messages" array to send, got "problem" 42, not a non-empty string\n`);
  });

  it('plan --format vllm-batch and sglang take --prompt-field problem; sim-server and execute (SGLang detected) run on the file as is', async () => {
    const problems = new Map(readFileSync(shipped, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { id: string; problem: string }).map((p) => [p.id, p.problem]));
    const batch = await cli(plan(['--format', 'vllm-batch', '--model', 'sim', '--prompt-field', 'problem']));
    expect(batch.code).toBe(0);
    const lines = batch.stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(lines.reduce((s, l) => s + l.body.n, 0)).toBe(24);
    for (const l of lines) expect(l.body.messages).toEqual([{ role: 'user', content: problems.get(l.custom_id.split('/')[1]) }]);

    const url = await simServerProcess(['--prompts', shipped, '--prompt-field', 'problem', '--profile', 'sglang']);
    const sg = await cli(plan(['--format', 'sglang', '--prompt-field', 'problem', '--max-tokens', '2048']));
    expect(sg.code).toBe(0);
    const request = JSON.parse(sg.stdout);
    const res = await fetch(`${url}/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(request) });
    expect(res.status).toBe(200);
    const outputs = (await res.json()) as { meta_info: { id: string; finish_reason: { type: string } } }[];
    expect(outputs.map((o) => o.meta_info.id)).toEqual(request.rid);

    const planPath = join(dir, 'plan.json');
    expect((await cli(plan(['--out', planPath]))).code).toBe(0);
    const out = join(dir, 'results.jsonl');
    const exec = await cli(['execute', '--plan', planPath, '--prompts', shipped, '--prompt-field', 'problem', '--endpoint', `${url}/v1`, '--model', 'sim', '--state', join(dir, 's.db'), '--out', out]);
    expect(exec.code).toBe(0);
    expect(readFileSync(out, 'utf8').trim().split('\n').length).toBe(24);
    // SGLang detected from /v1/models: one rollout per request.
    const stats = (await (await fetch(`${url}/stats`)).json()) as { sampling: { n: number }[]; byPath: Record<string, number> };
    expect(stats.byPath['/v1/completions']).toBe(24);
    expect(stats.sampling.every((s) => s.n === 1)).toBe(true);
  });
});

describe('the SGLang export against SGLang\'s /generate rules', () => {
  it('one entry per rollout is accepted for any mix of n, each with its own seed; a batch with unequal n is refused', async () => {
    const { candidates, sim } = simPrompts(3, [0.5]);
    const server = new SimServer({ prompts: sim, profile: 'sglang' });
    servers.push(server);
    await server.start();
    const prompts = join(dir, 'prompts.jsonl');
    writeFileSync(prompts, candidates.map((c, i) => JSON.stringify({ ...c, max_tokens: [300, 4000, 200][i] })).join('\n') + '\n');
    const planRun = await cli(['plan', '--prompts', prompts, '--state', join(dir, 's.db'), '--budget-rollouts', '9', '--min-n', '1', '--seed', '2']);
    const plan = JSON.parse(planRun.stdout) as Plan;
    expect(new Set(plan.allocations.map((a) => a.n)).size).toBeGreaterThan(0);
    const request = JSON.parse((await cli(['plan', '--prompts', prompts, '--state', join(dir, 's.db'), '--budget-rollouts', '9', '--min-n', '1', '--seed', '2', '--format', 'sglang'])).stdout);
    const res = await fetch(`${server.url}/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(request) });
    expect(res.status).toBe(200);
    const outputs = (await res.json()) as { text: string; meta_info: { id: string } }[];
    expect(outputs.length).toBe(9);
    const model = new SimModel(defaultSimModel);
    let k = 0;
    for (const a of plan.allocations) {
      for (let j = 0; j < a.n; j++, k++) {
        const full = model.respond(sim.find((p) => p.id === a.prompt_id), sim.find((p) => p.id === a.prompt_id)!.text, groupSeed(2, plan.step, a.prompt_id) + j).tokens;
        expect(outputs[k]!.text).toBe(full.slice(0, a.max_tokens!).join(''));
        expect(outputs[k]!.meta_info.id).toBe(`${plan.step}/${a.prompt_id}#${j}`);
      }
    }
    // The old shape: one entry per group with its own n.
    const old = { text: sim.map((p) => p.text), sampling_params: [{ n: 3 }, { n: 5 }, { n: 1 }] };
    const refused = await fetch(`${server.url}/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(old) });
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { error: { message: string } }).error.message).toBe('The parallel_sample_num should be the same for all samples in sample params.');
  });
});

describe('plan --max-tokens', () => {
  it('fills max_tokens of prompts that give none (their own kept); without it the JSON plan warns that a server would stop at 16 or 128 tokens', async () => {
    const { candidates } = simPrompts(3);
    const prompts = join(dir, 'prompts.jsonl');
    writeFileSync(prompts, candidates.map((c, i) => JSON.stringify(i === 0 ? { ...c, max_tokens: 512 } : c)).join('\n') + '\n');
    const base = ['plan', '--prompts', prompts, '--state', join(dir, 's.db'), '--budget-rollouts', '12'];
    const withLimit = await cli([...base, '--max-tokens', '2048']);
    expect(withLimit.code).toBe(0);
    // Only the plan's own warnings (the lengths a new state assumes), nothing about max_tokens missing.
    expect(withLimit.stderr).toBe((JSON.parse(withLimit.stdout) as Plan).warnings.map((w) => `rollout-budget: warning: ${w}\n`).join(''));
    expect(withLimit.stderr).not.toMatch(/have no max_tokens/);
    expect((JSON.parse(withLimit.stdout) as Plan).allocations.map((a) => [a.prompt_id, a.max_tokens])).toEqual([['q0', 512], ['q1', 2048], ['q2', 2048]]);
    const without = await cli(base);
    expect((JSON.parse(without.stdout) as Plan).allocations.map((a) => a.max_tokens)).toEqual([512, null, null]);
    expect(without.stderr).toMatch(/warning: 2 planned prompts have no max_tokens .*vLLM 16 tokens on \/v1\/completions, SGLang 128/);
    const bad = await cli([...base, '--max-tokens', '0']);
    expect(bad.code).toBe(2);
  });
});

describe('endpoint URLs on the command line (issue 16 item 8)', () => {
  it('a URL that cannot be sent fails when the command starts: exit 2, one line, no retries', async () => {
    const { candidates } = simPrompts(1);
    const prompts = join(dir, 'prompts.jsonl');
    writeFileSync(prompts, JSON.stringify(candidates[0]) + '\n');
    const planPath = join(dir, 'plan.json');
    writeFileSync(planPath, JSON.stringify({ version: 1, step: 0, seed: 0, budget: { rollouts: 2, tokens: null }, allocations: [{ prompt_id: 'q0', n: 2, max_tokens: null }] }));
    for (const endpoint of ['http://127.0.0.1:99999', 'http://127.0.0.1:8000/v1?x=1', 'tcp://127.0.0.1:8000']) {
      const run = await cli(['execute', '--plan', planPath, '--prompts', prompts, '--endpoint', endpoint, '--model', 'sim', '--state', join(dir, 's.db')]);
      expect(run.code).toBe(2);
      expect(run.stderr.trim().split('\n').length).toBe(1);
      expect(run.stderr).not.toMatch(/gave up|connection error/);
    }
  });
});

describe('command verifier timeout (issue 12 item 7)', () => {
  it('a hung verifier fails its batch with a clear message, its process group killed, and no results written', async () => {
    const { candidates, sim } = simPrompts(2);
    const server = new SimServer({ prompts: sim });
    servers.push(server);
    await server.start();
    const prompts = join(dir, 'prompts.jsonl');
    writeFileSync(prompts, candidates.map((c) => JSON.stringify(c)).join('\n') + '\n');
    const planPath = join(dir, 'plan.json');
    expect((await cli(['plan', '--prompts', prompts, '--state', join(dir, 's.db'), '--budget-rollouts', '4', '--out', planPath])).code).toBe(0);
    const pids = join(dir, 'pids');
    // The shell starts a background sleep (a grandchild) and waits: both must die.
    const cmd = `command:echo $$ > ${pids}; sleep 1000 & echo $! >> ${pids}; wait`;
    const out = join(dir, 'results.jsonl');
    const run = await cli(['execute', '--plan', planPath, '--prompts', prompts, '--endpoint', server.url, '--model', 'sim', '--state', join(dir, 's.db'), '--verifier', cmd, '--verifier-timeout', '1', '--out', out]);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/verifier "echo .* did not finish within 1 s \(--verifier-timeout\); its process group was killed and nothing was written/);
    expect(existsSync(out)).toBe(false);
    const ids = readFileSync(pids, 'utf8').trim().split('\n').map(Number);
    expect(ids.length).toBe(2);
    // SIGKILL is delivered at once; give the kernel a moment to reap.
    for (let i = 0; i < 50 && ids.some(alive); i++) await new Promise((r) => setTimeout(r, 20));
    expect(ids.filter(alive)).toEqual([]);
  });
});

/** Whether a process runs: signal 0 reaches it and it is not a zombie (an orphan waits for init to reap it). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}
