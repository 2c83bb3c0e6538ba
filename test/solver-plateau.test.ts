import seedrandom from 'seedrandom';
import { describe, expect, it } from 'vitest';
import { createValueRegistry, fnv1a, greedySolve, MonomialCurves, type SolverInput } from '../src/index.js';
import { expectSameSolution, violations } from './helpers.js';

/**
 * Instances where many prompts share one posterior (a fresh state has one prior for all; a
 * warm one repeats small counts), so many moves tie on their ratio: the plateau pass
 * (fill.ts drainPlateau) must take exactly the moves, in exactly the order, the heap pops.
 */
function tiedInstance(seed: string, size: number, kinds: number, shape: Partial<SolverInput> & { value?: string; costs?: boolean }): SolverInput {
  const random = seedrandom(seed);
  const posteriors = Array.from({ length: kinds }, () => [0.3 + Math.floor(random() * 8), 0.3 + Math.floor(random() * 8)] as const);
  const costs = Array.from({ length: kinds }, () => 100 * (1 + Math.floor(random() * 4)));
  const kind = Int32Array.from({ length: size }, () => Math.floor(random() * kinds));
  const alpha = Float64Array.from(kind, (k) => posteriors[k]![0]);
  const beta = Float64Array.from(kind, (k) => posteriors[k]![1]);
  const values = createValueRegistry();
  return {
    curves: new MonomialCurves(values.get(shape.value ?? 'balanced'), { kind: 'beta', alpha, beta }),
    surplus: new MonomialCurves(values.get('hit'), { kind: 'beta', alpha, beta }),
    tokensPerRollout: Float64Array.from(kind, (k) => (shape.costs === true ? costs[k]! : 0)),
    tieBreak: Uint32Array.from({ length: size }, (_, i) => fnv1a(`${seed}/${i}`)),
    minN: 2,
    maxN: 16,
    skip: false,
    rollouts: 8 * size,
    tokens: Infinity,
    saturation: 0.02,
    ...shape,
  };
}

describe('moves that tie on their ratio', () => {
  it('are taken in one pass exactly as the heap pops them (allocation, objective, bound: equal bits)', () => {
    const size = 20_000;
    const cases: (Partial<SolverInput> & { value?: string; costs?: boolean; kinds: number })[] = [
      { kinds: 1 }, // a fresh state: one prior for every prompt
      { kinds: 1, rollouts: 8 * size + 777 }, // the last level only partly fits: ties broken by id hash
      { kinds: 1, rollouts: 20 * size, maxN: 64 }, // into the surplus phase
      // Repeated tie-breaks over all 32 bits: equal ties are taken in index order (heap.ts popOrder).
      { kinds: 1, rollouts: 8 * size + 777, tieBreak: Uint32Array.from({ length: size }, (_, i) => (((i * 7919) % 1013) * 0x400001) >>> 0) },
      { kinds: 3, rollouts: 5 * size + 13 },
      { kinds: 5, costs: true, rollouts: Infinity, tokens: 6 * 250 * size },
      { kinds: 2, costs: true, rollouts: 6 * size, tokens: 5 * 200 * size },
      { kinds: 4, skip: true, rollouts: 3 * size, value: 'knapsack' },
      { kinds: 1, precommit: false, rollouts: 7 * size + 5 },
      { kinds: 1, multipleOf: 8, rollouts: 8 * size + 6 },
      { kinds: 6, minN: 1, maxN: 9, rollouts: 4 * size, value: 'hit' },
    ];
    let ran = 0;
    for (const [k, { kinds, ...shape }] of cases.entries()) {
      const input = tiedInstance(`plateau/${k}`, size, kinds, shape);
      const fast = greedySolve(input);
      const popped = greedySolve({ ...input, plateau: false });
      expect(fast.status, `case ${k}`).toBe('optimal');
      expect(violations({ fixedTokens: new Float64Array(size), ...input }, fast.n), `case ${k}`).toEqual([]);
      expectSameSolution(fast, popped, `case ${k}`);
      ran++;
    }
    expect(ran).toBe(cases.length);
  });
});
