import seedrandom from 'seedrandom';
import { describe, expect, it } from 'vitest';
import { fnv1a, snapshotOf, type PromptState } from '../src/index.js';

function state(id: string, successes: number): PromptState {
  return {
    id, group: null, successes, failures: 1, lastStep: 0, rollouts: successes + 1, rewardSum: successes,
    correctCount: 0, correctTokens: 0, wrongCount: 0, wrongTokens: 0,
  };
}

describe('snapshotOf lookups', () => {
  it('finds what a Map of the same states finds, the last of a repeated id winning', () => {
    const random = seedrandom('snapshot/map');
    const states = Array.from({ length: 5000 }, (_, k) => state(`q-${Math.floor(random() * 4000)}`, k));
    const map = new Map(states.map((s) => [s.id, s]));
    const snapshot = snapshotOf(states);
    let hits = 0;
    for (let k = 0; k < 6000; k++) {
      const id = `q-${k}`;
      expect(snapshot.get(id), id).toBe(map.get(id));
      expect(snapshot.get(id, fnv1a(id)), id).toBe(map.get(id));
      if (map.has(id)) hits++;
    }
    expect(hits).toBe(map.size);
    expect(hits).toBeGreaterThan(2000);
  });

  it('tells apart two ids with the same 32-bit hash', () => {
    // fnv1a('id-149599') === fnv1a('id-312382'): the index must compare the ids themselves.
    expect(fnv1a('id-149599')).toBe(fnv1a('id-312382'));
    const one = snapshotOf([state('id-149599', 1)]);
    expect(one.get('id-312382')).toBeUndefined();
    expect(one.get('id-149599')?.successes).toBe(1);
    const both = snapshotOf([state('id-149599', 1), state('id-312382', 2)]);
    expect(both.get('id-149599')?.successes).toBe(1);
    expect(both.get('id-312382')?.successes).toBe(2);
    expect(snapshotOf([]).get('id-149599')).toBeUndefined();
  });
});
