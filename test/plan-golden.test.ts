import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AsyncAllocator, openAsyncStore, parsePrompts, planRequestOf } from '../src/index.js';
import { cli } from './cli-helpers.js';
// @ts-expect-error plain JavaScript shared with the generator
import { cases, sha256, stateDump, states, writeInputs } from './golden/plans/cases.mjs';

/**
 * Plans stay byte-identical across the performance work of issue 15: the expected files were
 * written by main at 0748a87 (test/golden/plans/generate.mjs), before any change. The states
 * are built by `observe` with today's code and compared too (every stored number, exactly).
 */
interface Case { name: string; state: string; compare: 'text' | 'sha256'; argv: string[] }

const expectedDir = join(import.meta.dirname, 'golden', 'plans', 'expected');
const expected = (name: string) => readFileSync(join(expectedDir, name), 'utf8');
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'rb-golden-'));
  writeInputs(dir);
  for (const [name, steps] of Object.entries(states as Record<string, string[][]>)) {
    for (const [file, ...flags] of steps) {
      const run = await cli(['observe', '--results', join(dir, file!), '--state', join(dir, `${name}.db`), ...flags]);
      expect(run.code, run.stderr).toBe(0);
    }
  }
}, 120_000);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

const matches = (c: Case, text: string) => {
  if (c.compare === 'text') expect(text).toBe(expected(c.name));
  else expect(sha256(text)).toBe(expected(`${c.name}.sha256`).trim());
};

describe('plans byte-identical to main before issue 15', () => {
  it.each(Object.keys(states))('state %s: every stored number as observe wrote it before', (name) => {
    expect(stateDump(Database, join(dir, `${name}.db`))).toBe(expected(`state-${name}.json`));
  });

  it.each((cases as Case[]).map((c) => [c.name, c] as const))('plan %s', async (_, c) => {
    const argv = c.argv.map((a, k) => (c.argv[k - 1] === '--prompts' ? join(dir, a) : a));
    const out = join(dir, `out-${c.name}`);
    const run = await cli(['plan', ...argv, '--state', join(dir, `${c.state}.db`), '--out', out]);
    expect(run.code, run.stderr).toBe(0);
    matches(c, readFileSync(out, 'utf8'));
    // The same plan on stdout.
    const piped = await cli(['plan', ...argv, '--state', join(dir, `${c.state}.db`)]);
    matches(c, piped.stdout);
  });

  it.each(['oneshot-balanced.json', 'oneshot-rounds.json', 'synth-balanced.json'])('the service plans %s as the CLI did', async (name) => {
    const c = (cases as Case[]).find((k) => k.name === name)!;
    const flag = (f: string) => c.argv[c.argv.indexOf(f) + 1];
    const candidates = parsePrompts(readFileSync(join(dir, flag('--prompts')!), 'utf8'), 'prompts');
    const options: Record<string, unknown> = { policy: flag('--policy'), value: flag('--value') };
    if (c.argv.includes('--seed')) options.seed = Number(flag('--seed'));
    if (c.argv.includes('--rounds-left')) options.rounds_left = Number(flag('--rounds-left'));
    if (c.argv.includes('--multiple-of')) options.multiple_of = Number(flag('--multiple-of'));
    const body = JSON.stringify({ candidates, budget: { rollouts: Number(flag('--budget-rollouts')) }, options });
    const request = planRequestOf(body);
    const allocator = new AsyncAllocator(await openAsyncStore(join(dir, `${c.state}.db`)));
    try {
      const plan = await allocator.plan(request.candidates, request.budget, request.options);
      matches(c, `${JSON.stringify(plan, null, 2)}\n`);
    } finally {
      await allocator.close();
    }
  });
});
