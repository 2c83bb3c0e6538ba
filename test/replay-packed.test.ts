import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LoggedRun, loadLog, readLog, type ReplayRun, type Visit } from '../src/index.js';
import { replayed, replayPolicies, splitGroupLog } from './replay-helpers.js';
import { tempDir } from './temp.js';

/**
 * `replay` reads results and verl logs into a packed run (replay/packed-run.ts): typed arrays,
 * visit objects made per step. It must answer exactly as a LoggedRun over the same visits:
 * the steps, each step's visits in log order, lookups, the pooled pass rates, and a replay's
 * metrics, on logs whose steps come out of order, whose groups are split across the file,
 * whose prompts come back at several steps, with fractional rewards and missing lengths.
 */
const plain = (v: Visit) => ({ step: v.step, prompt_id: v.prompt_id, n: v.n, correct: v.correct, rewards: v.rewards, tokens: v.tokens });

function expectSameRun(packed: ReplayRun, logged: LoggedRun): void {
  expect(packed.steps).toEqual(logged.steps);
  for (const step of logged.steps) {
    expect(packed.at(step).map(plain), `step ${step}`).toEqual(logged.at(step).map(plain));
    for (const v of logged.at(step)) {
      const p = packed.visit(step, v.prompt_id)!;
      expect(plain(p)).toEqual(plain(v));
      expect(packed.pooledRate(p), `${v.prompt_id} at ${step}`).toBe(logged.pooledRate(v));
    }
  }
  expect(packed.at(-1)).toEqual([]);
  expect(packed.visit(logged.steps[0]!, 'no such prompt')).toBeUndefined();
}

interface Line { prompt: number; step: number; reward: number; tokens?: number }

const line = fc.record({
  prompt: fc.integer({ min: 0, max: 5 }),
  step: fc.oneof(fc.integer({ min: 0, max: 6 }), fc.constant(2 ** 40)),
  reward: fc.oneof(fc.constantFrom(0, 1), fc.constantFrom(0.25, 0.5, 0.75)),
  tokens: fc.option(fc.oneof(fc.integer({ min: 0, max: 5000 }), fc.constant(10_000_000)), { nil: undefined }), // the most a line may say (io/jsonl.ts field.tokens)
}) as fc.Arbitrary<Line>;

const text = (lines: readonly Line[]) =>
  lines.map((l) => JSON.stringify({ prompt_id: `p${l.prompt}`, step: l.step, reward: l.reward, ...(l.tokens === undefined ? {} : { tokens: l.tokens }) })).join('\n');

describe('packed replay run', () => {
  it('answers as a LoggedRun over the same visits (property: random results logs)', async () => {
    const d = tempDir('rb-packed-');
    let ran = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(line, { minLength: 1, maxLength: 60 }), fc.constantFrom('drawn', 'step', 'group'), async (drawn, order) => {
        // In step order, groups split or together (the store moves nothing when they are together).
        const lines = order === 'drawn' ? drawn : [...drawn].sort((a, b) => a.step - b.step || (order === 'group' ? a.prompt - b.prompt : 0));
        const path = join(d, 'log.jsonl');
        writeFileSync(path, text(lines));
        const { run } = await readLog(path);
        const { visits } = await loadLog(path);
        expectSameRun(run, new LoggedRun(visits));
        // loadLog's visits, from the lines alone: step order, first seen first within a step,
        // each group's rollouts in log order.
        const groups = new Map<string, ReturnType<typeof plain>>();
        for (const l of lines) {
          const key = `${l.step}/${l.prompt}`;
          const g = groups.get(key) ?? { step: l.step, prompt_id: `p${l.prompt}`, n: 0, correct: 0, rewards: [], tokens: [] };
          groups.set(key, g);
          g.n++;
          if (l.reward >= 0.5) g.correct++;
          (g.rewards as number[]).push(l.reward);
          (g.tokens as (number | undefined)[]).push(l.tokens);
        }
        expect(visits.map(plain)).toEqual([...groups.values()].sort((a, b) => a.step - b.step));
        ran++;
      }),
      { numRuns: 150, seed: 15 },
    );
    expect(ran).toBeGreaterThanOrEqual(150);
  });

  it('a replay of a packed run gives the metrics of a LoggedRun, every policy, both streams', async () => {
    const d = tempDir('rb-packed-');
    const path = join(d, 'log.jsonl');
    // 12 steps of 16 prompts from a pool of 40, 4 rollouts each; a prompt's group split in two; step 5 logged before step 4.
    writeFileSync(path, splitGroupLog([0, 1, 2, 3, 5, 4, 6, 7, 8, 9, 10, 11]));
    const { run } = await readLog(path);
    const logged = new LoggedRun((await loadLog(path)).visits);
    expectSameRun(run, logged);
    expect(replayPolicies().length).toBeGreaterThanOrEqual(6);
    for (const stream of ['consumed', 'shared'] as const) expect(replayed(run, stream), stream).toBe(replayed(logged, stream));
  });

  it('refuses a visit that is not its own when asked for a pooled rate', async () => {
    const d = tempDir('rb-packed-');
    writeFileSync(join(d, 'log.jsonl'), '{"prompt_id":"a","step":0,"reward":1}\n');
    const { run } = await readLog(join(d, 'log.jsonl'));
    expect(() => run.pooledRate({ step: 0, prompt_id: 'a', n: 1, correct: 1 })).toThrow(/not from this run/);
  });
});
