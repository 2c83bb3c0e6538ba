// execute and loop on a state file that is not there yet: bad input is named before a server is
// asked who it is or the state is opened, and a run that fails before it stored anything leaves
// no state file behind (plan, observe and serve do the same: test/cli-new-state.test.ts).
import { createServer } from 'node:net';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Allocator, PartialStore } from '../src/index.js';
import { cli } from './cli-helpers.js';
import { tempDir } from './temp.js';

const fixture = join(import.meta.dirname, '..', 'fixtures', 'qwen-math100-k8');
const stateFiles = (dir: string) => readdirSync(dir).filter((f) => f.startsWith('state.db'));

/** A local port where nothing listens: taken, then given back. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('execute and loop on a state file not there yet', () => {
  it('execute: a plan prompt missing from the prompts is named first (no server asked), and no state file is made', async () => {
    const dir = tempDir('rb-exec-new-');
    const prompts = join(dir, 'few.jsonl');
    // The first two prompts only: the plan names more.
    const lines = readFileSync(join(fixture, 'prompts.jsonl'), 'utf8').split('\n').slice(0, 2);
    writeFileSync(prompts, `${lines.join('\n')}\n`);
    const endpoint = `http://127.0.0.1:${await closedPort()}`;
    // --server auto (the default) would ask GET /v1/models, which nothing answers.
    const r = await cli(['execute', '--plan', join(fixture, 'plan.json'), '--prompts', prompts, '--endpoint', endpoint, '--model', 'm', '--state', join(dir, 'state.db'), '--out', join(dir, 'r.jsonl')]);
    expect(r.code).toBe(2);
    expect(r.stderr.trim()).toMatch(/^rollout-budget: .*plan\.json: allocations\[\d+\]: "prompt_id" "[^"]+" is not in .*few\.jsonl$/);
    expect(stateFiles(dir)).toEqual([]);
  });

  it('execute and grade: an --out in a folder that is not there is named before any work (no server asked)', async () => {
    const dir = tempDir('rb-exec-new-');
    const out = join(dir, 'missing', 'r.jsonl');
    const endpoint = `http://127.0.0.1:${await closedPort()}`;
    const runs = [
      ['execute', '--plan', join(fixture, 'plan.json'), '--prompts', join(fixture, 'prompts.jsonl'), '--endpoint', endpoint, '--model', 'm', '--state', join(dir, 'state.db'), '--out', out],
      ['grade', '--batch-output', join(fixture, 'batch-output.jsonl'), '--plan', join(fixture, 'plan.json'), '--prompts', join(fixture, 'prompts.jsonl'), '--out', out],
    ];
    for (const argv of runs) {
      const r = await cli(argv);
      expect(r.code, argv[0]).toBe(2);
      expect(r.stderr, argv[0]).toBe(`rollout-budget: ${out}: cannot write (ENOENT): there is no folder ${join(dir, 'missing')}\n`);
    }
    expect(readdirSync(dir)).toEqual([]);
  });

  it('execute and loop: a server that cannot be reached fails the run, and the state file it made is gone', async () => {
    const dir = tempDir('rb-exec-new-');
    const endpoint = `http://127.0.0.1:${await closedPort()}`;
    const common = ['--prompts', join(fixture, 'prompts.jsonl'), '--endpoint', endpoint, '--model', 'm', '--server', 'vllm', '--retries', '0', '--timeout-s', '5'];
    const runs = [
      ['execute', '--plan', join(fixture, 'plan.json'), '--out', join(dir, 'r.jsonl'), ...common],
      ['loop', '--budget-rollouts', '800', ...common],
    ];
    for (const argv of runs) {
      const r = await cli([...argv, '--state', join(dir, 'state.db')]);
      expect(r.code, argv[0]).not.toBe(0);
      expect(r.stderr, argv[0]).toMatch(/generation failed/);
      expect(stateFiles(dir), argv[0]).toEqual([]);
    }
  });

  it('holdsNothing, the check before a state file is removed: no partial rollout, no prompt with evidence', () => {
    const dir = tempDir('rb-exec-new-');
    const state = join(dir, 'state.db');
    const partials = new PartialStore(state); // its table only: nothing stored
    expect(partials.holdsNothing()).toBe(true);
    partials.replace([], [{ rollout_id: '0/0#0', prompt_id: '0', step: 0, seed: 1, text: 'x', tokens: 1, finish_reason: null }]);
    expect(partials.holdsNothing()).toBe(false);
    partials.replace(['0/0#0'], []);
    expect(partials.holdsNothing()).toBe(true);
    // The same file as a plan's state: prompts planned (group recorded) but not observed hold nothing; observed ones do.
    const allocator = new Allocator({ state });
    allocator.plan([{ id: 'p', group: 'g' }], { rollouts: 4 });
    expect(partials.holdsNothing()).toBe(true);
    allocator.observe([{ prompt_id: 'p', reward: 1 }]);
    expect(partials.holdsNothing()).toBe(false);
    allocator.close();
    partials.close();
  });

  it('loop: a state file that was there is kept after a failed run, with its evidence', async () => {
    const dir = tempDir('rb-exec-new-');
    const state = join(dir, 'state.db');
    const before = new Allocator({ state });
    before.observe([{ prompt_id: '0', reward: 1 }]);
    before.close();
    const endpoint = `http://127.0.0.1:${await closedPort()}`;
    const r = await cli(['loop', '--budget-rollouts', '800', '--prompts', join(fixture, 'prompts.jsonl'), '--endpoint', endpoint, '--model', 'm', '--server', 'vllm', '--retries', '0', '--timeout-s', '5', '--state', state]);
    expect(r.code).not.toBe(0);
    const after = new Allocator({ state });
    expect(after.posterior('0').rollouts).toBe(1);
    after.close();
  });
});
