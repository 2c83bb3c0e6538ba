import { describe, expect, it } from 'vitest';
import {
  History, dapoKeeps, dapoPolicy, gresoAdapt, gresoDefaults, gresoSkipProbability, gresoSkips, gresoUpdate, moppsUpdate,
  tQuantile, xrpoHalfWidth, xrpoPriority, type Candidate, type GroupOutcome, type StepContext,
} from '../src/index.js';

/** A step context over fixed outcomes: every group's rewards come from `rewardsOf`. */
function fakeStep(batches: Candidate[][], rewardsOf: (id: string, n: number) => number[]): { ctx: StepContext; generated: string[] } {
  const generated: string[] = [];
  const groups = new Map<string, GroupOutcome>();
  let next = 1;
  const ctx: StepContext = {
    step: 0, candidates: batches[0]!, batchSize: batches[0]!.length, budget: { rollouts: 8 * batches[0]!.length },
    minN: 2, maxN: 64, seed: 0, epoch: 0,
    generate(c, n) {
      generated.push(c.id);
      const g = groups.get(c.id) ?? { prompt_id: c.id, step: 0, rewards: [], tokens: null };
      g.rewards.push(...rewardsOf(c.id, n));
      groups.set(c.id, g);
      return g;
    },
    nextBatch: () => batches[next++] ?? [],
  };
  return { ctx, generated };
}

const batchOf = (tag: string, size: number): Candidate[] => Array.from({ length: size }, (_, i) => ({ id: `${tag}${i}` }));

describe('GRESO (presampling_selector.py, ray_trainer.py)', () => {
  it('skip probability 1 − max(p^z, 0.01), by hand', () => {
    expect(gresoSkipProbability(0.5, 0)).toBe(0);
    expect(gresoSkipProbability(0.5, 1)).toBeCloseTo(0.5, 15);
    expect(gresoSkipProbability(0.5, 3)).toBeCloseTo(0.875, 15);
    expect(gresoSkipProbability(0.5, 10)).toBeCloseTo(0.99, 15); // 0.5^10 = 0.00098 < 0.01
    expect(gresoSkipProbability(0.9, 2)).toBeCloseTo(0.19, 15);
  });

  it('targets 0.25/3 (easy) and 0.25·2/3 (hard); ±0.01 a step; clamped to [0.05, 0.95]', () => {
    expect(gresoDefaults.targetEasy).toBeCloseTo(0.0833333333, 9);
    expect(gresoDefaults.targetHard).toBeCloseTo(0.1666666667, 9);
    expect(gresoAdapt(0.5, 0.09, 0.25 / 3)).toBeCloseTo(0.49, 15); // at or above target: skip more
    expect(gresoAdapt(0.5, 0.08, 0.25 / 3)).toBeCloseTo(0.51, 15);
    expect(gresoAdapt(0.055, 1, 0.1)).toBe(0.05);
    expect(gresoAdapt(0.945, 0, 0.1)).toBe(0.95);
  });

  it('adapts from the second epoch on, by the step\'s shares of all-correct and all-wrong groups among all it generated', () => {
    // 12 groups: 1 all-correct (share 0.0833 ≥ 0.0833: p_easy down), 2 all-wrong (0.1667 ≥ 0.1667: down).
    const groups = [[1, 1, 1, 1], [0, 0, 0, 0], [0, 0, 0, 0], ...Array.from({ length: 9 }, () => [1, 0, 0, 1])];
    expect(gresoUpdate({ easy: 0.5, hard: 0.5 }, groups, 0)).toEqual({ easy: 0.5, hard: 0.5 });
    const moved = gresoUpdate({ easy: 0.5, hard: 0.5 }, groups, 1);
    expect(moved.easy).toBeCloseTo(0.49, 15);
    expect(moved.hard).toBeCloseTo(0.49, 15);
    // One all-wrong group fewer: hard share 1/12 < 1/6, p_hard goes up.
    const fewer = gresoUpdate({ easy: 0.5, hard: 0.5 }, [[1, 1], [0, 0], ...Array.from({ length: 10 }, () => [1, 0])], 3);
    expect(fewer.hard).toBeCloseTo(0.51, 15);
    expect(fewer.easy).toBeCloseTo(0.49, 15);
    // 60 steps of all-easy groups: p_easy stops at 0.05.
    let p = { easy: 0.5, hard: 0.5 };
    for (let k = 0; k < 60; k++) p = gresoUpdate(p, [[1, 1, 1]], 2);
    expect(p.easy).toBe(0.05);
    expect(p.hard).toBeCloseTo(0.95, 12);
  });

  it('easy at a group mean ≥ 0.98, hard at ≤ 0.11; easy tested first, a prompt never generated is kept', () => {
    const h = new History();
    const group = (id: string, rewards: number[]): GroupOutcome => ({ prompt_id: id, step: 0, rewards, tokens: null });
    h.observe([group('easy', Array.from({ length: 50 }, (_, j) => (j < 49 ? 1 : 0)))]); // 0.98
    h.observe([group('almost', [1, 1, 1, 1, 1, 1, 1, 0])]); // 0.875
    h.observe([group('hard', [1, ...Array(9).fill(0)])]); // 0.1
    h.observe([group('solvable', [1, ...Array(8).fill(0)])]); // 0.111
    expect([h.get('easy')!.easyStreak, h.get('almost')!.easyStreak, h.get('hard')!.hardStreak, h.get('solvable')!.hardStreak]).toEqual([1, 0, 1, 0]);
    h.observe([group('hard', [0, 0, 0, 0])]);
    expect(h.get('hard')!.hardStreak).toBe(2);
    const draws = (values: number[]) => () => values.shift()!;
    // Easy streak 1 at p_easy 0.5: skipped iff the first draw < 0.5.
    expect(gresoSkips(h.get('easy'), 0.5, 0.5, draws([0.49]))).toBe(true);
    expect(gresoSkips(h.get('easy'), 0.5, 0.5, draws([0.51]))).toBe(false);
    // Hard streak 2 at p_hard 0.5: skip probability 0.75, tested with a second draw.
    expect(gresoSkips(h.get('hard'), 0.99, 0.5, draws([0.99, 0.74]))).toBe(true);
    expect(gresoSkips(h.get('hard'), 0.99, 0.5, draws([0.99, 0.76]))).toBe(false);
    expect(gresoSkips(undefined, 0.05, 0.05, draws([0]))).toBe(false);
  });
});

describe('MoPPS (recipe/ours/mopps.py)', () => {
  it('α ← λα + (1 − λ)α₀ + k, β ← λβ + (1 − λ)β₀ + (n − k), by hand; λ defaults to 1', () => {
    expect(moppsUpdate({ alpha: 1, beta: 1 }, [1, 0, 1, 1])).toEqual({ alpha: 4, beta: 2 });
    // λ = 0.5 from Beta(5, 3) with one success and one failure: 2.5 + 0.5 + 1 = 4, 1.5 + 0.5 + 1 = 3.
    const half = moppsUpdate({ alpha: 5, beta: 3 }, [1, 0], 0.5);
    expect(half.alpha).toBeCloseTo(4, 15);
    expect(half.beta).toBeCloseTo(3, 15);
  });
});

describe('XRPO (the paper\'s allocator formulas)', () => {
  it('exact Student-t quantiles (t_{0.975,2} = 4.3027, not Cornish–Fisher\'s 3.85)', () => {
    // Table values of the Student-t distribution.
    expect(tQuantile(0.975, 1)).toBeCloseTo(12.7062047362, 6);
    expect(tQuantile(0.975, 2)).toBeCloseTo(4.3026527299, 6);
    expect(tQuantile(0.975, 5)).toBeCloseTo(2.5705818366, 6);
    expect(tQuantile(0.975, 30)).toBeCloseTo(2.0422724563, 6);
  });

  it('priority = h(n) − h(n+1) + λ·√(log(1 + T)/n), by hand', () => {
    // n = 3, s = 0.5: h(3) = 4.3026527299·0.5/√3, h(4) = 3.1824463053·0.5/2.
    const h3 = (4.3026527299 * 0.5) / Math.sqrt(3);
    const h4 = (3.1824463053 * 0.5) / 2;
    expect(xrpoHalfWidth(3, 0.5)).toBeCloseTo(h3, 8);
    expect(xrpoPriority(3, 0.5, 10)).toBeCloseTo(h3 - h4 + 0.5 * Math.sqrt(Math.log(11) / 3), 8);
    // No spread: the bonus alone; T = 0 still defined (log 1 = 0).
    expect(xrpoPriority(4, 0, 0)).toBe(0);
    expect(xrpoHalfWidth(1, 0.5)).toBe(Infinity);
  });
});

describe('DAPO (verl recipe/dapo: filter_groups)', () => {
  it('keeps groups with reward variance, and groups of one rollout', () => {
    expect(dapoKeeps([1])).toBe(true);
    expect(dapoKeeps([0])).toBe(true);
    expect(dapoKeeps([1, 1])).toBe(false);
    expect(dapoKeeps([0, 1, 0])).toBe(true);
  });

  it('trains on the first batch-size kept groups once it has them', () => {
    const run = dapoPolicy.create({ minN: 2, maxN: 64, seed: 0 });
    // Batch 1: every other group informative (2 of 4); batch 2: all informative.
    const { ctx, generated } = fakeStep([batchOf('a', 4), batchOf('b', 4)], (id, n) => (id === 'a1' || id === 'a3' || id.startsWith('b') ? [1, ...Array(n - 1).fill(0)] : Array(n).fill(0)));
    const d = run.decide(ctx);
    expect(generated).toEqual(['a0', 'a1', 'a2', 'a3', 'b0', 'b1', 'b2', 'b3']);
    expect(d.trained!.map((g) => g.prompt_id)).toEqual(['a1', 'a3', 'b0', 'b1']);
    expect(d.failed).toBeUndefined();
  });

  it('fails the step where verl raises: still short after 10 generation batches', () => {
    const run = dapoPolicy.create({ minN: 2, maxN: 64, seed: 0 });
    const batches = Array.from({ length: 12 }, (_, k) => batchOf(`g${k}-`, 3));
    const { ctx, generated } = fakeStep(batches, (_id, n) => Array(n).fill(0));
    const d = run.decide(ctx);
    expect(generated.length).toBe(30); // 10 batches of 3, not 12
    expect(d.trained).toEqual([]);
    expect(d.failed).toMatch(/max_num_gen_batches/);
  });
});
