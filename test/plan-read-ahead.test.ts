import { copyFileSync, existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import seedrandom from 'seedrandom';
import { beforeAll, describe, expect, it } from 'vitest';
import { Allocator, formatPlan, parsePromptsFile } from '../src/index.js';
import { SCAN_AHEAD_BYTES } from '../src/store/scan-ahead.js';
import { cli } from './cli-helpers.js';
import { stateFileOf } from './state-file.js';
import { tempDir } from './temp.js';

// `plan` reads a state file of SCAN_AHEAD_BYTES or more in another thread while it reads the
// prompts (store/scan-ahead.ts). The plan must be the one the library makes reading the state
// itself (the same bytes), and a refused prompts file must leave the state as it was.

let dir: string;
let state: string;
let prompts: string;

beforeAll(() => {
  const random = seedrandom('read ahead');
  const groups = [null, 'math', 'code', 'ünïcode'];
  const rows = Array.from({ length: 170_000 }, (_, k) => {
    const n = Math.floor(random() * 40);
    const s = Math.floor(random() * (n + 1));
    const hint = random() < 0.2 ? random() : null;
    return [`prompt-${k}-${k % 7 === 0 ? 'é' : 'x'}`, groups[k % 4], s * 0.9, (n - s) * 0.9, Math.floor(random() * 30), n, s, s, s * 400, n - s, (n - s) * 900, hint, hint === null ? null : 16];
  });
  state = stateFileOf('rb-read-ahead-', rows, 29);
  dir = tempDir('rb-read-ahead-in-');
  prompts = join(dir, 'prompts.jsonl');
  const lines: string[] = [];
  for (let i = 0; i < 40_000; i++) {
    const id = i < 30_000 ? `prompt-${i * 5}-${(i * 5) % 7 === 0 ? 'é' : 'x'}` : `new-${i}`;
    const group = i % 3 === 0 ? `,"group":"${groups[1 + (i % 3)]}"` : '';
    lines.push(`{"id":"${id}","prompt_tokens":${40 + (i % 300)},"max_tokens":${1024 * (1 + (i % 4))}${group}}`);
  }
  writeFileSync(prompts, `${lines.join('\n')}\n`);
}, 60_000);

describe('plan on a state read ahead by another thread', () => {
  it('the state is large enough to be read ahead', () => {
    expect(statSync(state).size).toBeGreaterThanOrEqual(SCAN_AHEAD_BYTES);
  });

  it('writes the plan the library makes reading the state itself, byte for byte', async () => {
    const copy = join(dir, 'copy.db');
    copyFileSync(state, copy);
    const out = join(dir, 'plan.json');
    const run = await cli(['plan', '--prompts', prompts, '--state', state, '--budget-rollouts', '240000', '--seed', '11', '--out', out]);
    expect(run.code, run.stderr).toBe(0);
    const allocator = new Allocator({ state: copy });
    const plan = allocator.plan(parsePromptsFile(prompts).candidates, { rollouts: 240_000 }, { seed: 11 });
    allocator.close();
    const text = readFileSync(out, 'utf8');
    expect(JSON.parse(text).allocations.length).toBe(40_000);
    expect(text).toBe(formatPlan(plan, 'json'));
  }, 60_000);

  it('a refused prompts file: exit 2, the message, no plan, the state file as it was', async () => {
    const bad = join(dir, 'bad.jsonl');
    const lines = readFileSync(prompts, 'utf8').split('\n');
    lines[24_999] = '{"id":"broken","prompt_tokens":10,"max_tokens":-3}';
    writeFileSync(bad, lines.join('\n'));
    const before = readFileSync(state);
    const out = join(dir, 'refused.json');
    const run = await cli(['plan', '--prompts', bad, '--state', state, '--budget-rollouts', '1000', '--out', out]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('bad.jsonl:25000: "max_tokens" must be a positive integer, got -3');
    expect(existsSync(out)).toBe(false);
    expect(readFileSync(state).equals(before)).toBe(true);
  }, 60_000);
});
