import { describe, expect, it } from 'vitest';
import { MetricsRecorder, SqliteStore, batchOf, createAllocator, defaultDecay, type GroupOutcome } from '../src/index.js';

// Small realistic bugs that once passed every test, each pinned by figures worked out by hand.

describe('learned prior: the binomial noise is removed from the spread of pass rates', () => {
  it('five prompts observed 0/4, 0/4, 0/4, 2/4, 3/4 give Beta(0.35, 1.05)', () => {
    // Rates 0, 0, 0, 0.5, 0.75: mean m = 0.25; spread = mean(r²) − m² = 0.1625 − 0.0625 = 0.1;
    // noise = mean(r(1 − r)/4) = (0.0625 + 0.046875)/5 = 0.021875; true variance 0.078125;
    // strength S = m(1 − m)/0.078125 − 1 = 1.4 (inside the clamp [0.5, 2]); α₀ = 0.35, β₀ = 1.05.
    // Without the correction: S = 0.1875/0.1 − 1 = 0.875, Beta(0.21875, 0.65625).
    const allocator = createAllocator({ state: ':memory:' });
    try {
      const counts = [0, 0, 0, 2, 3];
      allocator.observe(counts.map((k, i) => ({ prompt_id: `p${i}`, step: 0, rewards: [1, 1, 1, 1].map((_, j) => (j < k ? 1 : 0)) })));
      const fresh = allocator.posterior('never-seen');
      expect(fresh.alpha).toBeCloseTo(0.35, 12);
      expect(fresh.beta).toBeCloseTo(1.05, 12);
    } finally {
      allocator.close();
    }
  });
});

describe('length model: a rollout with reward ≥ 0.5 counts as correct', () => {
  it('reward 0.5 is correct, 0.49 is wrong', () => {
    const store = new SqliteStore(':memory:');
    try {
      store.apply(batchOf([
        { prompt_id: 'a', step: 0, reward: 0.5, tokens: 100, rollout_id: 'r1' },
        { prompt_id: 'a', step: 0, reward: 0.49, tokens: 300, rollout_id: 'r2' },
        { prompt_id: 'a', step: 0, reward: 1, tokens: 50, rollout_id: 'r3' },
      ]), defaultDecay);
      const a = store.get('a')!;
      expect([a.correctCount, a.correctTokens, a.wrongCount, a.wrongTokens]).toEqual([2, 150, 1, 300]);
    } finally {
      store.close();
    }
  });
});

describe('replay metrics, by hand', () => {
  const g = (id: string, rewards: number[], tokens: number[] | null = null): GroupOutcome => ({ prompt_id: id, step: 0, rewards, tokens });

  it('Brier is the mean squared error over groups (divided by their number, not one less)', () => {
    const m = new MetricsRecorder();
    const groups = [g('a', [1, 1, 0, 0]), g('b', [1, 1, 1, 1]), g('c', [0, 0])];
    const predicted = new Map([['a', 0.5], ['b', 0.75], ['c', 0.25]]);
    m.record(0, groups, groups, () => 0.5, predicted, {}, 0);
    // (0.5 − 0.5)² + (0.75 − 1)² + (0.25 − 0)² = 0.125, over 3 groups.
    expect(m.totals().brier).toBeCloseTo(0.125 / 3, 15);
  });

  it('a prompt whose pass rate is exactly 0.2 is hard: its success is a hard positive', () => {
    const m = new MetricsRecorder();
    const groups = [g('edge', [1, 0, 0, 0, 0]), g('above', [1, 0, 0]), g('below', [0, 0, 0, 1])];
    const rate = new Map([['edge', 0.2], ['above', 0.21], ['below', 0.1]]);
    m.record(0, groups, groups, (x) => rate.get(x.prompt_id)!, undefined, {}, 0);
    expect(m.totals().hard_positives).toBe(2); // edge and below, not above
  });

  it('hard positives count trained groups, as informative groups do: a group generated and dropped (dapo past its batch) counts in neither', () => {
    const m = new MetricsRecorder();
    const kept = g('kept', [1, 0, 0, 0]);
    const dropped = g('dropped', [0, 1, 0, 0]);
    // Both hard (rate 0.1), both with a success and with variance; only `kept` is trained.
    m.record(0, [kept, dropped], [kept], () => 0.1, undefined, {}, 0);
    const t = m.totals();
    expect(t.rollouts).toBe(8); // both generated
    expect(t.informative_groups).toBe(1);
    expect(t.hard_positives).toBe(1); // was 2: generated groups counted
    expect(t.hard_positives_per_1k_rollouts).toBeCloseTo(1000 / 8, 12);
  });

  it('per 1,000 rollouts and per million tokens', () => {
    const m = new MetricsRecorder();
    // 12 rollouts, 2 informative groups, 1 hard positive; 4,000 tokens.
    const groups = [g('x', [1, 0, 1, 0], [500, 500, 500, 500]), g('y', [1, 1, 1, 0], [250, 250, 250, 250]), g('z', [0, 0, 0, 0], [250, 250, 250, 250])];
    m.record(0, groups, groups, (x) => (x.prompt_id === 'x' ? 0.1 : 0.9), undefined, {}, 0);
    const t = m.totals();
    expect(t.rollouts).toBe(12);
    expect(t.informative_per_1k_rollouts).toBeCloseTo((2 * 1000) / 12, 12);
    expect(t.hard_positives_per_1k_rollouts).toBeCloseTo(1000 / 12, 12);
    expect(t.informative_per_mtok).toBeCloseTo(2 * 250, 12);
    expect(t.hard_positives_per_mtok).toBeCloseTo(250, 12);
  });
});
