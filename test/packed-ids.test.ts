import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { fnv1a } from '../src/index.js';
import { fnv1aUnits } from '../src/math/hash.js';
import { PackedIdIndex } from '../src/posterior/packed-ids.js';

// PackedIdIndex keeps ids as UTF-16 code units in one array (posterior/packed-ids.ts). The
// oracle is a Map from id to its first position: what IdIndex and a Map both give.

const ids = fc.array(
  fc.oneof(
    fc.string({ maxLength: 12 }),
    fc.string({ unit: 'binary', maxLength: 30 }), // any code point, astral ones as surrogate pairs
    fc.string({ unit: fc.constantFrom('\ud800', '\udfff', 'a', '\u0000'), maxLength: 6 }), // lone surrogates, NUL
    fc.constantFrom('', 'prompt-1', 'prompt-1 ', 'é', 'e\u0301', 'x'.repeat(5000)),
  ),
  { minLength: 20, maxLength: 300 },
);

describe('PackedIdIndex', () => {
  it('adds, finds and gives back ids as a Map would: any UTF-16 text, repeats, growth past the first array', () => {
    let checked = 0;
    fc.assert(
      fc.property(ids, fc.nat({ max: 3 }), (list, slack) => {
        const index = new PackedIdIndex(list.length + slack);
        const first = new Map<string, number>();
        for (const id of list) {
          if (!first.has(id)) first.set(id, first.size);
          expect(index.add(id)).toBe(first.get(id));
        }
        expect(index.size).toBe(first.size);
        const copy = new PackedIdIndex(list.length + slack, index.parts());
        for (const [id, k] of first) {
          for (const ix of [index, copy]) {
            expect(ix.find(id)).toBe(k);
            expect(ix.find(id, fnv1a(id))).toBe(k);
            expect(ix.idAt(k)).toBe(id);
          }
          for (const other of [`${id}x`, id.slice(1), `${id}\u0000`]) if (!first.has(other)) expect(index.find(other)).toBe(-1);
          checked++;
        }
      }),
      { numRuns: 200 },
    );
    expect(checked).toBeGreaterThan(3000);
  });

  it('fnv1aUnits of an id\'s code units is fnv1a of the id, as an int32: any UTF-16 text', () => {
    fc.assert(
      fc.property(ids, fc.nat({ max: 5 }), (list, pad) => {
        for (const id of list) {
          const units = new Uint16Array(pad + id.length + 2).fill(0x41);
          for (let j = 0; j < id.length; j++) units[pad + j] = id.charCodeAt(j);
          expect(fnv1aUnits(units, pad, pad + id.length)).toBe(fnv1a(id) | 0);
        }
      }),
      { numRuns: 100 },
    );
  });

  it('push then index(): the table add() makes (same slots word for word), over blocks; false at a repeat', () => {
    let checked = 0;
    fc.assert(
      fc.property(ids, fc.nat({ max: 3 }), fc.nat({ max: 2000 }), (list, slack, extra) => {
        // Distinct ids, more than one block of index() (512) for some runs.
        const distinct = [...new Set([...list, ...Array.from({ length: extra }, (_, k) => `extra-${k}`)])];
        const added = new PackedIdIndex(distinct.length + slack);
        const pushed = new PackedIdIndex(distinct.length + slack);
        for (const [k, id] of distinct.entries()) {
          expect(added.add(id)).toBe(k);
          expect(pushed.push(id)).toBe(k);
        }
        expect(pushed.index()).toBe(true);
        expect([...pushed.parts().slots]).toEqual([...added.parts().slots]);
        for (const [k, id] of distinct.entries()) {
          expect(pushed.find(id)).toBe(k);
          expect(pushed.idAt(k)).toBe(id);
          checked++;
        }
        // An id again, anywhere after its first: index() says so.
        if (distinct.length > 0) {
          const again = new PackedIdIndex(distinct.length + 1);
          const at = slack % distinct.length;
          for (const id of [...distinct.slice(0, at + 1), distinct[at]!, ...distinct.slice(at + 1)]) again.push(id);
          expect(again.index()).toBe(false);
        }
      }),
      { numRuns: 100 },
    );
    expect(checked).toBeGreaterThan(10_000);
  });

  it('ids of the same hash are told apart by their units', () => {
    // 'Aa'/'BB'-style collisions are rare for FNV-1a; equal hashes come from the table: force them.
    const index = new PackedIdIndex(4);
    expect(index.add('ab')).toBe(0);
    expect(index.find('ab', fnv1a('ba'))).toBe(-1); // the hash given is trusted: no slot holds this one
    expect(index.add('ba')).toBe(1);
    expect(index.find('ba')).toBe(1);
    expect(index.find('ab')).toBe(0);
  });

  it('parts keep only the units used', () => {
    const index = new PackedIdIndex(3);
    for (const id of ['abc', 'de', '😀']) index.add(id);
    const parts = index.parts();
    expect(parts.size).toBe(3);
    expect([...parts.units]).toEqual([...'abcde😀'].join('').split('').map((c) => c.charCodeAt(0)));
    expect([...parts.ends.subarray(0, 3)]).toEqual([3, 5, 7]);
    // Untrimmed: a view of the index's own units (nothing copied), which an index made from
    // the parts reads as the trimmed copy.
    const view = index.parts(false);
    expect([...view.units]).toEqual([...parts.units]);
    expect(view.units.buffer).not.toBe(parts.units.buffer);
    expect(index.parts(false).units.buffer).toBe(view.units.buffer);
    const copy = new PackedIdIndex(3, view);
    for (const [k, id] of ['abc', 'de', '😀'].entries()) {
      expect(copy.find(id)).toBe(k);
      expect(copy.idAt(k)).toBe(id);
    }
  });
});

describe('PackedIdIndex.findMany', () => {
  it('gives find\'s answer for every id of a block: ids there, not there, repeated, any text, any block', () => {
    let checked = 0;
    fc.assert(
      fc.property(ids, ids, fc.nat({ max: 40 }), fc.nat({ max: 40 }), (stored, asked, cut, end) => {
        const index = new PackedIdIndex(stored.length);
        for (const id of stored) index.add(id);
        const items = [...asked, ...stored].map((id) => ({ id }));
        const hashes = Uint32Array.from(items, (item) => fnv1a(item.id));
        const from = Math.min(cut, items.length);
        const to = Math.max(from, items.length - end);
        const out = new Int32Array(to - from + 3).fill(-7);
        index.findMany(items, hashes, from, to, out);
        for (let i = from; i < to; i++) expect(out[i - from]).toBe(index.find(items[i]!.id));
        expect([...out.subarray(to - from)]).toEqual([-7, -7, -7]); // nothing written past the block
        checked += to - from;
      }),
      { numRuns: 200 },
    );
    expect(checked).toBeGreaterThan(3000);
  });

  it('tells apart ids whose first slot holds another id of the same hash', () => {
    const index = new PackedIdIndex(4);
    index.add('ab');
    index.add('cd');
    // The hashes given are trusted: 'ba' asked with 'ab''s hash lands on 'ab''s slot and is not 'ab'.
    const items = [{ id: 'ba' }, { id: 'ab' }, { id: 'cd' }];
    const out = new Int32Array(3);
    index.findMany(items, Uint32Array.of(fnv1a('ab'), fnv1a('ab'), fnv1a('cd')), 0, 3, out);
    expect([...out]).toEqual([-1, 0, 1]);
  });
});
