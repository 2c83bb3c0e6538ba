// Ctrl-C during `execute` and `loop`: the real CLI process gets a real SIGINT (or SIGTERM) while it generates
// against the sim-server (src/simserver: a TEST DOUBLE of a vLLM server, since no model can run
// here). Before, Node's default ended the process at once: the step's finished rollouts were
// not written (loop: not observed) and those in flight were not kept, so the work was lost.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { PartialStore, SimServer } from '../src/index.js';
import { parseSimPrompts } from '../src/simserver/prompts.js';
import { cli } from './cli-helpers.js';
import { CLI } from './service-helpers.js';
import { tempDir } from './temp.js';

const shipped = join(import.meta.dirname, '..', 'fixtures', 'oneshot-rlvr-dsr-sub', 'prompts.jsonl');

let server: SimServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

/** Starts the CLI, sends `signal` once the server has finished `after` choices, and waits for the exit. */
async function interrupted(argv: string[], sim: SimServer, after: number, signal: NodeJS.Signals = 'SIGINT'): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [CLI, ...argv], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (b: Buffer) => (stdout += b.toString('utf8')));
  child.stderr.on('data', (b: Buffer) => (stderr += b.toString('utf8')));
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  const started = Date.now();
  while (sim.stats.completedChoices < after && Date.now() - started < 30_000) await new Promise((resolve) => setTimeout(resolve, 20));
  child.kill(signal);
  return { code: await exited, stdout, stderr };
}

describe('Ctrl-C while generating', () => {
  it('execute: exit 130, the finished rollouts written, those in flight kept and resumed by the next run', async () => {
    const dir = tempDir('rb-interrupt-');
    // Slow enough (2 ms a token, responses of about 500 tokens) that most rollouts are in flight at the signal.
    server = new SimServer({ prompts: parseSimPrompts(readFileSync(shipped, 'utf8'), shipped, 'problem'), msPerToken: 2 });
    const url = await server.start();
    const plan = join(dir, 'plan.json');
    expect((await cli(['plan', '--prompts', shipped, '--state', join(dir, 'plan.db'), '--budget-rollouts', '96', '--skip', '--out', plan])).code).toBe(0);
    const state = join(dir, 'state.db');
    const out = join(dir, 'results.jsonl');
    const argv = ['execute', '--plan', plan, '--prompts', shipped, '--prompt-field', 'problem', '--endpoint', url, '--model', 'sim', '--state', state, '--out', out];
    const r = await interrupted(argv, server, 10);
    expect(r.stderr).toContain('rollout-budget: interrupted (Ctrl-C): stopping the generation; what finished is written, what is in flight is kept to resume (Ctrl-C again quits at once)\n');
    expect(r.code, r.stderr).toBe(130);
    const rows = readFileSync(out, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { finish_reason: string; rollout_id: string });
    const finished = rows.filter((x) => x.finish_reason !== 'abort');
    const aborted = rows.filter((x) => x.finish_reason === 'abort');
    expect(finished.length).toBeGreaterThan(0); // the server finished 10 before the signal; the client may not have read the last few
    expect(aborted.length).toBeGreaterThan(0);
    const store = new PartialStore(state);
    const kept = store.count();
    store.close();
    // An aborted rollout whose server had sent no text yet has nothing to resume and is not kept
    // (as in the loop's test below): the plan's 96 rollouts are more than the client keeps in flight.
    expect(kept).toBeGreaterThan(0);
    expect(kept).toBeLessThanOrEqual(aborted.length);
    expect(r.stderr).toContain(`rollout-budget: interrupted (Ctrl-C): ${finished.length} finished rollouts written to ${out}, ${kept} in flight kept in ${state} to resume\n`);
    // The next run of the plan resumes them first.
    const again = await cli(argv);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toMatch(new RegExp(`resumed ${kept}, `));
  }, 60_000);

  it.each([
    ['SIGINT', 'Ctrl-C', 130],
    ['SIGTERM', 'SIGTERM', 143],
  ] as const)('loop, %s: its exit code after the step in hand, its finished rollouts observed; the steps after it never run', async (signal, name, code) => {
    const dir = tempDir('rb-interrupt-');
    server = new SimServer({ prompts: parseSimPrompts(readFileSync(shipped, 'utf8'), shipped, 'problem'), msPerToken: 2 });
    const url = await server.start();
    const state = join(dir, 'state.db');
    const r = await interrupted(['loop', '--prompts', shipped, '--prompt-field', 'problem', '--endpoint', url, '--model', 'sim', '--steps', '5', '--budget-rollouts', '96', '--skip', '--state', state], server, 10, signal);
    expect(r.code, r.stderr).toBe(code);
    const steps = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as { step: number; applied: number; aborted: number; planned: number; rounds: number });
    expect(steps.map((s) => s.step)).toEqual([0]);
    expect(steps[0]!.applied).toBeGreaterThan(0);
    // Stopped in its first round, the step plans no later round: planned 267 against a budget of 120 was seen.
    expect(steps[0]!.rounds).toBe(1);
    expect(steps[0]!.planned).toBeLessThanOrEqual(96);
    const inspect = await cli(['inspect', '--state', state]);
    expect(JSON.parse(inspect.stdout)).toMatchObject({ last_step: 0 });
    const store = new PartialStore(state);
    const kept = store.count();
    store.close();
    // An aborted rollout whose server had sent no text yet has nothing to resume and is not kept
    // (execute.ts `continuable`): with many groups in flight at the signal, some may be such.
    expect(kept).toBeGreaterThan(0);
    expect(kept).toBeLessThanOrEqual(steps[0]!.aborted);
    expect(r.stderr).toContain(`rollout-budget: interrupted (${name}) in step 0, whose finished rollouts are observed; ${kept} partial rollouts are kept in ${state} and resumed first by the next run\n`);
  }, 60_000);
});
