import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Database } from './sqlite.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AsyncAllocator, openAsyncStore, parsePrompts, planRequestOf } from '../src/index.js';
import { cli } from './cli-helpers.js';
// @ts-expect-error plain JavaScript shared with the generator
import { cases, sha256, stateDump, states, writeInputs } from './golden/plans/cases.mjs';

/**
 * Plans stay byte-identical across the performance work of issue 15: the expected files were
 * written by main at 0748a87 (test/golden/plans/generate.mjs), before any change; the two
 * synth-pool plans (100,000 candidates: the precommit's three rounds) at 5f68e16. The states
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

  it.each(['oneshot-balanced.json', 'oneshot-rounds.json', 'synth-balanced.json'])('the service plans %s as the CLI did (from its candidates\' rows and the pooled rows)', async (name) => {
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
      const text = `${JSON.stringify(plan, null, 2)}\n`;
      if (c.compare === 'sha256') {
        // One observe: the pooled rows were summed in the order a full read sums them.
        matches(c, text);
        return;
      }
      // The service reads its candidates and the pooled rows the observes kept up to date by
      // differences (store/pooled.ts): the same plan up to the rounding of those sums.
      const want = JSON.parse(expected(c.name)) as Record<string, unknown>;
      const got = JSON.parse(text) as Record<string, unknown>;
      let numbers = 0;
      const close = (a: unknown, b: unknown, path: string): void => {
        if (typeof a === 'number' && typeof b === 'number') {
          numbers++;
          expect(Math.abs(a - b), `${path}: ${a} vs ${b}`).toBeLessThanOrEqual(1e-12 * Math.max(1, Math.abs(b)));
        } else if (a !== null && typeof a === 'object' && b !== null && typeof b === 'object') {
          expect(Object.keys(a), path).toEqual(Object.keys(b));
          for (const k of Object.keys(b)) close((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k], `${path}.${k}`);
        } else expect(a, path).toEqual(b);
      };
      close(got, want, 'plan');
      expect(numbers).toBeGreaterThan(1000);
      const n = (p: Record<string, unknown>) => (p.allocations as { prompt_id: string; n: number }[]).map((a) => `${a.prompt_id}:${a.n}`).join(',');
      expect(n(got)).toBe(n(want));
    } finally {
      await allocator.close();
    }
  });
});
