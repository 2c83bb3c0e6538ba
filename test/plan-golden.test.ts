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
 * The six single-round `balanced` plans were written again for the single-round rule of
 * 2026-11-29, a change of policy (golden/plans/cases.mjs says which and why).
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

/**
 * Node 20 and 22 (V8 11.3 and 12.4) give these plans and states byte for byte. Node 24's V8
 * rounds some Math results differently in the last bit (a p_low of 2.7789076127153548e-6 there
 * is …543 on Node 20), so on other Node versions the plans and states are compared number by
 * number within 1e-12 relative (every string and key exactly), and the 100,000-candidate
 * plans, kept only as a sha256, are not compared.
 */
const BYTE_EXACT = ['20', '22'].includes(process.versions.node.split('.')[0]!);

/** Compares `got` with `want` by structure, strings and keys exactly, numbers within 1e-12 relative; returns how many numbers it compared. */
function closeTo(got: unknown, want: unknown, path: string): number {
  if (typeof got === 'number' && typeof want === 'number') {
    expect(Math.abs(got - want), `${path}: ${got} vs ${want}`).toBeLessThanOrEqual(1e-12 * Math.max(1, Math.abs(want)));
    return 1;
  }
  if (got !== null && typeof got === 'object' && want !== null && typeof want === 'object') {
    expect(Object.keys(got), path).toEqual(Object.keys(want));
    let numbers = 0;
    for (const k of Object.keys(want)) numbers += closeTo((got as Record<string, unknown>)[k], (want as Record<string, unknown>)[k], `${path}.${k}`);
    return numbers;
  }
  expect(got, path).toEqual(want);
  return 0;
}

const matches = (c: Case, text: string) => {
  if (c.compare === 'sha256') expect(sha256(text)).toBe(expected(`${c.name}.sha256`).trim());
  else if (BYTE_EXACT) expect(text).toBe(expected(c.name));
  else expect(closeTo(parsed(c.name, text), parsed(c.name, expected(c.name)), 'plan')).toBeGreaterThan(100);
};

/** A plan's text as JSON: one value, or (`.jsonl`) one a line. */
const parsed = (name: string, text: string): unknown =>
  name.endsWith('.jsonl') ? text.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as unknown) : JSON.parse(text);

/** The cases this Node can compare: all on Node 20 and 22, elsewhere those kept as text. */
const comparable = (cases as Case[]).filter((c) => BYTE_EXACT || c.compare === 'text');

describe(`plans byte-identical to main before issue 15${BYTE_EXACT ? '' : ` (Node ${process.versions.node}: numbers within 1e-12)`}`, () => {
  it.each(Object.keys(states))('state %s: every stored number as observe wrote it before', (name) => {
    const dump = stateDump(Database, join(dir, `${name}.db`));
    if (BYTE_EXACT) {
      expect(dump).toBe(expected(`state-${name}.json`));
      return;
    }
    // The sha256 of every row cannot be compared within a tolerance: the first rows can.
    const { sum: _got, ...got } = JSON.parse(dump) as Record<string, unknown>;
    const { sum: _want, ...want } = JSON.parse(expected(`state-${name}.json`)) as Record<string, unknown>;
    expect(closeTo(got, want, 'state')).toBeGreaterThan(10);
  });

  // Listed as skipped where they cannot be compared.
  if (!BYTE_EXACT) it.skip('the plans kept only as a sha256 (compared on Node 20 and 22)', () => undefined);

  it.each(comparable.map((c) => [c.name, c] as const))('plan %s', async (_, c) => {
    const argv = c.argv.map((a, k) => (c.argv[k - 1] === '--prompts' ? join(dir, a) : a));
    const out = join(dir, `out-${c.name}`);
    const run = await cli(['plan', ...argv, '--state', join(dir, `${c.state}.db`), '--out', out]);
    expect(run.code, run.stderr).toBe(0);
    matches(c, readFileSync(out, 'utf8'));
    // The same plan on stdout.
    const piped = await cli(['plan', ...argv, '--state', join(dir, `${c.state}.db`)]);
    matches(c, piped.stdout);
  });

  it.each(['oneshot-balanced.json', 'oneshot-rounds.json', 'synth-balanced.json'].filter((name) => comparable.some((c) => c.name === name)))('the service plans %s as the CLI did (from its candidates\' rows and the pooled rows)', async (name) => {
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
      expect(closeTo(got, want, 'plan')).toBeGreaterThan(1000);
      const n = (p: Record<string, unknown>) => (p.allocations as { prompt_id: string; n: number }[]).map((a) => `${a.prompt_id}:${a.n}`).join(',');
      expect(n(got)).toBe(n(want));
    } finally {
      await allocator.close();
    }
  });
});
