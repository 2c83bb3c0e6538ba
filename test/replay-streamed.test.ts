import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { readLog, replayEnvironment, runPolicies, type ReplayRun, type Visit } from '../src/index.js';
import { replayed, replayOptions, replayPolicies, splitGroupLog, withoutTimes } from './replay-helpers.js';
import { tempDir } from './temp.js';

/**
 * `replay` streams a results or verl log in step order (replay/streamed-run.ts): an index pass,
 * then each step's lines read again when asked for. It must answer exactly as the packed run of
 * the same log (replay/packed-run.ts, itself checked against a LoggedRun): steps, visits in
 * log order, lookups, pooled pass rates, step counts, and a replay's metrics; over chunk
 * boundaries, non-ASCII ids, a byte-order mark, blank and aborted lines, steps split across
 * files; and it must fall back to packing a log out of step order.
 */
const plain = (v: Visit) => ({ step: v.step, prompt_id: v.prompt_id, n: v.n, correct: v.correct, rewards: v.rewards, tokens: v.tokens });

function expectSameRun(streamed: ReplayRun, packed: ReplayRun): void {
  expect(streamed.steps).toEqual(packed.steps);
  // Backwards first: a step read after later ones, and again once evicted.
  for (const step of [...packed.steps].reverse().concat(packed.steps)) {
    expect(streamed.at(step).map(plain), `step ${step}`).toEqual(packed.at(step).map(plain));
    expect(streamed.counts(step)).toEqual(packed.counts(step));
    for (const v of packed.at(step)) {
      const s = streamed.visit(step, v.prompt_id)!;
      expect(plain(s)).toEqual(plain(v));
      expect(streamed.pooledRate(s), `${v.prompt_id} at ${step}`).toBe(packed.pooledRate(v));
    }
  }
  expect(streamed.at(-1)).toEqual([]);
  expect(streamed.counts(-1)).toEqual({ visits: 0, rollouts: 0, withTokens: 0 });
}

interface Line { prompt: number; step: number; reward: number; tokens?: number; abort: boolean; blank: boolean }

const line = fc.record({
  prompt: fc.integer({ min: 0, max: 7 }),
  step: fc.oneof(fc.integer({ min: 0, max: 25 }), fc.constant(2 ** 40)),
  reward: fc.oneof(fc.constantFrom(0, 1), fc.constantFrom(0.25, 0.5, 0.75)),
  tokens: fc.option(fc.oneof(fc.integer({ min: 0, max: 5000 }), fc.constant(10_000_000)), { nil: undefined }), // the most a line may say (io/jsonl.ts field.tokens)
  abort: fc.integer({ min: 0, max: 9 }).map((x) => x < 2),
  blank: fc.integer({ min: 0, max: 9 }).map((x) => x < 2),
}) as fc.Arbitrary<Line>;

/** Ids with a character of 1, 2, 3 and 4 bytes in UTF-8 for some prompts. */
const id = (p: number) => ['p0', 'p1', 'pé2', 'p€3', 'p😀4', 'p5', 'ü6', 'p7'][p]!;

const results = (lines: readonly Line[]) =>
  lines.map((l) => (l.blank ? '  \n' : '') + JSON.stringify({ prompt_id: id(l.prompt), step: l.step, reward: l.reward, ...(l.tokens === undefined ? {} : { tokens: l.tokens }), ...(l.abort ? { finish_reason: 'abort' } : {}) })).join('\n');

const verl = (lines: readonly Line[]) =>
  lines.map((l) => JSON.stringify({ input: `Problem ${id(l.prompt)}`, output: 'x', score: l.reward > 0.5 ? 1 : -1, step: l.step })).join('\n');

describe('streamed replay run', () => {
  it('answers as the packed run of the same log (property: random results logs in step order, small chunks)', async () => {
    const d = tempDir('rb-streamed-');
    let streamedRuns = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(line, { minLength: 1, maxLength: 80 }), fc.boolean(), fc.integer({ min: 16, max: 300 }), async (drawn, bom, chunkBytes) => {
        const lines = [...drawn].sort((a, b) => a.step - b.step);
        const path = join(d, 'log.jsonl');
        writeFileSync(path, (bom ? '\uFEFF' : '') + results(lines));
        const { run } = await readLog(path, { chunkBytes });
        const { run: packed } = await readLog(path, { packed: true });
        expect(run.constructor.name).toBe('StreamedRun');
        expectSameRun(run, packed);
        streamedRuns++;
      }),
      { numRuns: 150, seed: 15 },
    );
    expect(streamedRuns).toBeGreaterThanOrEqual(100);
  });

  it('a verl folder whose steps run across files answers as its packed run', async () => {
    const d = tempDir('rb-streamed-');
    let ran = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(line, { minLength: 1, maxLength: 60 }), fc.integer({ min: 1, max: 4 }), async (drawn, parts) => {
        const dir = join(d, `dump-${ran}`);
        mkdirSync(dir);
        const lines = [...drawn].sort((a, b) => a.step - b.step);
        const per = Math.ceil(lines.length / parts);
        for (let k = 0; k < parts; k++) writeFileSync(join(dir, `${k + 1}.jsonl`), verl(lines.slice(k * per, (k + 1) * per)));
        const { run, format } = await readLog(dir, { chunkBytes: 64 });
        expect(format).toBe('verl');
        expect(run.constructor.name).toBe('StreamedRun');
        expectSameRun(run, (await readLog(dir, { packed: true })).run);
        ran++;
      }),
      { numRuns: 40, seed: 16 },
    );
    expect(ran).toBe(40);
  });

  it('packs a log whose steps are out of order or interleaved, with the same answers', async () => {
    const d = tempDir('rb-streamed-');
    const path = join(d, 'log.jsonl');
    const row = (p: string, step: number, reward: number) => JSON.stringify({ prompt_id: p, step, reward });
    for (const text of [[row('a', 1, 1), row('a', 0, 0)], [row('a', 0, 1), row('b', 1, 0), row('c', 0, 1)]]) {
      writeFileSync(path, text.join('\n'));
      const { run } = await readLog(path);
      expect(run.constructor.name).toBe('PackedRun');
      expect(run.steps).toEqual([0, 1]);
    }
  });

  it('names the first bad line in file order, as the packed pass does', async () => {
    const d = tempDir('rb-streamed-');
    const path = join(d, 'log.jsonl');
    writeFileSync(path, ['{"prompt_id":"a","step":0,"reward":1}', '{"prompt_id":"a","step":1,"reward":2}', '{"prompt_id":"a","step":0,"reward":1}'].join('\n'));
    const streamed = await readLog(path).catch((e: Error) => e.message);
    expect(streamed).toMatch(/log\.jsonl:2/);
    expect(await readLog(path, { packed: true }).catch((e: Error) => e.message)).toBe(streamed);
  });

  it('a replay of a streamed run gives the metrics of the packed run, every policy, both streams', async () => {
    const d = tempDir('rb-streamed-');
    const path = join(d, 'log.jsonl');
    // 40 steps of 16 prompts from a pool of 40, 4 rollouts each (past KEPT_STEPS, so steps are read again); a group split in two.
    writeFileSync(path, splitGroupLog(Array.from({ length: 40 }, (_, step) => step)));
    const { run } = await readLog(path, { chunkBytes: 1000 });
    const { run: packed } = await readLog(path, { packed: true });
    expect(run.constructor.name).toBe('StreamedRun');
    expect(replayPolicies().length).toBeGreaterThanOrEqual(6);
    for (const stream of ['consumed', 'shared'] as const) {
      expect(replayed(run, stream), stream).toBe(replayed(packed, stream));
      // Without allocations (the CLI's replay: they grow with the log), the same metrics.
      const options = replayOptions(stream);
      const bare = runPolicies(replayEnvironment(run), { ...options, allocations: false });
      expect(bare.every((r) => r.allocations.length === 0)).toBe(true);
      const full = runPolicies(replayEnvironment(run), options);
      expect(full.every((r) => r.allocations.length === 40)).toBe(true);
      expect(withoutTimes(bare)).toBe(withoutTimes(full.map((r) => ({ ...r, allocations: [] }))));
    }
  });
});
