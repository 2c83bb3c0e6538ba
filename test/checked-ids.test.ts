import seedrandom from 'seedrandom';
import { describe, expect, it } from 'vitest';
import { createAllocator, fnv1a, parsePrompts, type Candidate } from '../src/index.js';
import { carryIdCheck, firstRepeatedId } from '../src/plan/checked-ids.js';

/** The first repeat the plain way: a map of the ids seen. */
function mapRepeat(candidates: readonly Candidate[]): { at: number; before: number } | undefined {
  const first = new Map<string, number>();
  for (let i = 0; i < candidates.length; i++) {
    const before = first.get(candidates[i]!.id);
    if (before !== undefined) return { at: i, before };
    first.set(candidates[i]!.id, i);
  }
  return undefined;
}

const hashesOf = (candidates: readonly Candidate[]) => Uint32Array.from(candidates, (c) => fnv1a(c.id));
const lines = (ids: readonly string[]) => ids.map((id) => JSON.stringify({ id, max_tokens: 8 })).join('\n');

describe('a reader\'s id check reused by planStep (plan/checked-ids.ts)', () => {
  it('finds the repeat a map finds after any edit of a parsed array: ids changed, swapped, added, removed, hash-keeping', () => {
    // fnv1a('id-149599') === fnv1a('id-312382'): equal hashes, different ids.
    expect(fnv1a('id-149599')).toBe(fnv1a('id-312382'));
    const random = seedrandom('checked-ids');
    let repeats = 0;
    let rounds = 0;
    for (let round = 0; round < 300; round++) {
      const ids = Array.from({ length: 2 + Math.floor(random() * 300) }, (_, i) => `k-${i}`);
      if (random() < 0.5) ids.splice(Math.floor(random() * ids.length), 0, 'id-149599', 'id-312382');
      const candidates = parsePrompts(lines(ids), 'p.jsonl') as Candidate[];
      const edit = Math.floor(random() * 5);
      const i = Math.floor(random() * candidates.length);
      const j = Math.floor(random() * candidates.length);
      if (edit === 0) candidates[i]!.id = candidates[j]!.id;
      else if (edit === 1) [candidates[i], candidates[j]] = [candidates[j]!, candidates[i]!];
      else if (edit === 2) candidates.push({ id: candidates[j]!.id });
      else if (edit === 3) candidates.pop();
      else {
        // keeps every hash: a colliding id replaced by its twin
        const k = candidates.findIndex((c) => c.id === 'id-312382');
        if (k >= 0) candidates[k]!.id = 'id-149599';
      }
      const expected = mapRepeat(candidates);
      if (expected !== undefined) repeats++;
      expect(firstRepeatedId(candidates, hashesOf(candidates)), `round ${round}, edit ${edit}`).toEqual(expected);
      rounds++;
    }
    expect(rounds).toBe(300);
    expect(repeats).toBeGreaterThan(50);
    expect(repeats).toBeLessThan(250);
  });

  it('planStep rejects ids made equal after the file was read, a hash-keeping edit included; a carried check too', () => {
    const candidates = parsePrompts(lines(['a', 'id-149599', 'b', 'id-312382']), 'p.jsonl') as Candidate[];
    const a = createAllocator();
    expect(a.plan(candidates, { rollouts: 8 }).totals.prompts).toBe(4);
    candidates[3]!.id = 'id-149599';
    expect(() => a.plan(candidates, { rollouts: 8 })).toThrow('candidate 4: "id" "id-149599" repeats candidate 2');
    const copy = candidates.map((c) => ({ ...c }));
    carryIdCheck(candidates, copy);
    expect(() => a.plan(copy, { rollouts: 8 })).toThrow('candidate 4: "id" "id-149599" repeats candidate 2');
    copy[3]!.id = 'c';
    expect(a.plan(copy, { rollouts: 8 }).totals.prompts).toBe(4);
  });
});
