import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { RolloutResult } from '../src/index.js';
import { addRollout, emptyEvidence, EvidenceAccumulator, type StepEvidence } from '../src/store/accumulate.js';
import { PromptSlots } from '../src/store/prompt-slots.js';

/** The accumulator as it was: a map by step, then by prompt id. */
function reference(results: readonly RolloutResult[], defaultStep: number): StepEvidence[] {
  const bySteps = new Map<number, Map<string, StepEvidence>>();
  for (const r of results) {
    const step = r.step ?? defaultStep;
    let prompts = bySteps.get(step);
    if (prompts === undefined) bySteps.set(step, (prompts = new Map()));
    let e = prompts.get(r.prompt_id);
    if (e === undefined) prompts.set(r.prompt_id, (e = emptyEvidence(r.prompt_id, step)));
    if (r.group !== undefined) e.group = r.group;
    if (r.prior_pass_rate !== undefined) {
      e.priorPassRate = r.prior_pass_rate;
      e.priorSamples = r.prior_samples;
    }
    addRollout(e, r.reward, r.tokens);
  }
  return [...bySteps.keys()].sort((a, b) => a - b).flatMap((step) => [...bySteps.get(step)!.values()]);
}

const ids = ['a', 'b', 'p1', 'p10', 'é', '\u{1F600}', '', 'x'.repeat(40), '1', '01'];

const result: fc.Arbitrary<RolloutResult> = fc.record(
  {
    prompt_id: fc.oneof(fc.constantFrom(...ids), fc.string({ maxLength: 4 })),
    step: fc.constantFrom(0, 1, 2, 7),
    reward: fc.constantFrom(0, 1, 0.25, 0.1, 0.7),
    tokens: fc.integer({ min: 0, max: 5000 }),
    group: fc.constantFrom('g1', 'g2'),
    prior_pass_rate: fc.constantFrom(0.2, 0.9),
    prior_samples: fc.constantFrom(3, 10),
  },
  { requiredKeys: ['prompt_id', 'reward'] },
);

describe('EvidenceAccumulator (store/accumulate.ts)', () => {
  it('gives the evidence, in the order and with the sums, of a map by step and prompt id; touched() its prompts in that order', () => {
    let runs = 0;
    fc.assert(
      fc.property(fc.array(result, { maxLength: 300 }), fc.integer({ min: 0, max: 3 }), (results, defaultStep) => {
        const acc = new EvidenceAccumulator(defaultStep);
        for (const r of results) acc.add(r);
        const expected = reference(results, defaultStep);
        expect(acc.evidence()).toEqual(expected);
        expect(acc.applied).toBe(results.length);
        const { evidence, ids, at } = acc.touched();
        expect(evidence).toEqual(expected);
        expect(ids).toEqual([...new Set(expected.map((e) => e.prompt_id))]);
        expect([...at].map((k) => ids[k])).toEqual(expected.map((e) => e.prompt_id));
        runs++;
      }),
      { numRuns: 300, seed: 15 },
    );
    expect(runs).toBe(300);
  });

  it('keeps 10⁵ prompts over two steps apart, first met first (the table grown many times)', () => {
    const results: RolloutResult[] = [];
    for (let i = 0; i < 300_000; i++) results.push({ prompt_id: `prompt-${(i * 7919) % 100_000}`, step: i % 3 === 0 ? 5 : 4, reward: (i % 4) / 4, tokens: i % 1000 });
    const acc = new EvidenceAccumulator(0);
    for (const r of results) acc.add(r);
    expect(acc.evidence()).toEqual(reference(results, 0));
  });
});

describe('PromptSlots (store/prompt-slots.ts)', () => {
  it('numbers distinct ids 0, 1, 2… first met first, and gives an id met again its slot', () => {
    const slots = new PromptSlots();
    const seen = new Map<string, number>();
    let repeats = 0;
    for (let i = 0; i < 50_000; i++) {
      // equal strings made apart, ids that differ in one unit, non-ASCII
      const id = i % 3 === 0 ? `p${(i * 31) % 9000}` : i % 3 === 1 ? ['p', String((i * 17) % 9000)].join('') : `é${i % 500}\u{1F600}`;
      const expected = seen.get(id) ?? seen.size;
      if (seen.has(id)) repeats++;
      else seen.set(id, expected);
      expect(slots.slot(id)).toBe(expected);
    }
    expect(repeats).toBeGreaterThan(10_000);
    expect(slots.ids).toEqual([...seen.keys()]);
  });
});
