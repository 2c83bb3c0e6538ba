import fc from 'fast-check';
import seedrandom from 'seedrandom';
import { describe, expect, it } from 'vitest';
import { collidingHashes, firstRepeat as repeatWith, fnv1a, fnv1aAfter } from '../src/math/hash.js';

const firstRepeat = (count: number, keyOf: (i: number) => string, hashes: Uint32Array) => repeatWith(count, keyOf, hashes, collidingHashes(count, hashes));

/** The first repeat the plain way: a map of the keys seen. */
function mapRepeat(keys: readonly string[]): { at: number; before: number } | undefined {
  const first = new Map<string, number>();
  for (let i = 0; i < keys.length; i++) {
    const before = first.get(keys[i]!);
    if (before !== undefined) return { at: i, before };
    first.set(keys[i]!, i);
  }
  return undefined;
}

describe('firstRepeat', () => {
  it('finds the repeat a map finds, with colliding hashes of different keys and keys repeated many times', () => {
    const random = seedrandom('first-repeat');
    // fnv1a('id-149599') === fnv1a('id-312382'): equal hashes, different keys.
    expect(fnv1a('id-149599')).toBe(fnv1a('id-312382'));
    let repeats = 0;
    for (let round = 0; round < 200; round++) {
      const pool = Math.floor(random() * 3000) + 2;
      const keys = Array.from({ length: Math.floor(random() * 2000) }, () => (random() < 0.05 ? ['id-149599', 'id-312382'][Math.floor(random() * 2)]! : `k-${Math.floor(random() * pool)}`));
      const hashes = Uint32Array.from(keys, fnv1a);
      const expected = mapRepeat(keys);
      if (expected !== undefined) repeats++;
      expect(firstRepeat(keys.length, (i) => keys[i]!, hashes), `round ${round}`).toEqual(expected);
      // A longer hashes array: only the first `count` count.
      const longer = new Uint32Array(keys.length + 5);
      longer.set(hashes);
      expect(firstRepeat(keys.length, (i) => keys[i]!, longer), `round ${round} (longer)`).toEqual(expected);
    }
    expect(repeats).toBeGreaterThan(50);
    expect(repeats).toBeLessThan(200);
  });

  it('tells apart the colliding keys: no repeat when each appears once', () => {
    const keys = ['a', 'id-149599', 'b', 'id-312382', 'c'];
    expect(firstRepeat(keys.length, (i) => keys[i]!, Uint32Array.from(keys, fnv1a))).toBeUndefined();
    keys.push('id-149599');
    expect(firstRepeat(keys.length, (i) => keys[i]!, Uint32Array.from(keys, fnv1a))).toEqual({ at: 5, before: 1 });
  });
});

describe('collidingHashes', () => {
  it('gives the values that occur more than once, as counting them in a map does, for any hashes', () => {
    let runs = 0;
    let withRepeats = 0;
    fc.assert(
      fc.property(
        // Few distinct values (many repeats), any uint32, or values equal in their low or high bits.
        // Arrays of fast-check's 'medium' size: at its default small size most arrays had a few
        // elements and no repeat (14–34 runs of 400 had one; the minimum below failed a CI run).
        fc.array(fc.oneof(fc.integer({ min: 0, max: 40 }), fc.nat({ max: 0xffffffff }), fc.integer({ min: 0, max: 63 }).map((k) => (k << 26) >>> 0)), { maxLength: 300, size: 'medium' }),
        fc.nat({ max: 5 }),
        (values, extra) => {
          const hashes = new Uint32Array(values.length + extra); // only the first values.length count
          hashes.set(values);
          hashes.fill(7, values.length);
          const counts = new Map<number, number>();
          for (const v of values) counts.set(v, (counts.get(v) ?? 0) + 1);
          const expected = [...counts].filter(([, n]) => n > 1).map(([v]) => v).sort((a, b) => a - b);
          const got = collidingHashes(values.length, hashes);
          if (expected.length === 0) expect(got).toBeUndefined();
          else {
            expect([...got!].sort((a, b) => a - b)).toEqual(expected);
            withRepeats++;
          }
          runs++;
        },
      ),
      { numRuns: 400 },
    );
    expect(runs).toBe(400);
    // Both answers were checked many times (280–316 runs of 400 have a repeat at this size).
    expect(withRepeats).toBeGreaterThan(150);
    expect(runs - withRepeats).toBeGreaterThan(20);
    // 10⁵ hashes of distinct ids, then each again: every value repeats.
    const ids = Uint32Array.from({ length: 200_000 }, (_, i) => fnv1a(`prompt-${i % 100_000}`));
    expect(collidingHashes(ids.length, ids)!.size).toBe(new Set(ids).size);
    expect(new Set(ids).size).toBeGreaterThan(99_990);
  });

  it('hashes made to crowd its table (all in one slot, all different) give the same answer, by sorting', () => {
    // k · φ⁻¹ (mod 2³²), φ the table's multiplier: times φ it is k again, so every one of them
    // starts at slot 0 and the probes grow as k².
    let inverse = 0x9e3779b1;
    for (let step = 0; step < 5; step++) inverse = Math.imul(inverse, 2 - Math.imul(0x9e3779b1, inverse));
    expect(Math.imul(inverse, 0x9e3779b1)).toBe(1);
    const crowded = Uint32Array.from({ length: 1500 }, (_, k) => Math.imul(k % 1000, inverse) >>> 0);
    const got = collidingHashes(crowded.length, crowded)!;
    expect([...got].sort((a, b) => a - b)).toEqual(Array.from({ length: 500 }, (_, k) => Math.imul(k, inverse) >>> 0).sort((a, b) => a - b));
  });
});

describe('fnv1aAfter', () => {
  it('continues the hash of a prefix: fnv1aAfter(fnv1a(p), t) is fnv1a(p + t), for any texts', () => {
    let runs = 0;
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), fc.string({ unit: 'binary' }), (p, t) => {
        expect(fnv1aAfter(fnv1a(p), t)).toBe(fnv1a(p + t));
        runs++;
      }),
      { numRuns: 500 },
    );
    expect(runs).toBe(500);
    expect(fnv1aAfter(fnv1a('0/12/'), 'prompt-7')).toBe(fnv1a('0/12/prompt-7'));
  });
});
