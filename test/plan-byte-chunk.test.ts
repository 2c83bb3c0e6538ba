import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ByteChunk, chunkText } from '../src/plan/byte-chunk.js';
import { TextCache } from '../src/plan/text-cache.js';

/** The text of everything written to `chunk` by `write`, taken in pieces as a writer does. */
function written(chunk: ByteChunk, write: (c: ByteChunk) => void): string {
  write(chunk);
  return chunkText(chunk.take());
}

describe('plan byte chunks (plan/byte-chunk.ts)', () => {
  it('write JSON.stringify\'s text of any string, quoted or after its opening quote, and of numbers', () => {
    let runs = 0;
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), fc.double(), fc.integer(), (s, x, k) => {
        const chunk = new ByteChunk(8, 16, 64);
        expect(written(chunk, (c) => c.quoted(s))).toBe(JSON.stringify(s));
        expect(written(chunk, (c) => c.quoted(s, 1))).toBe(JSON.stringify(s).slice(1));
        expect(written(chunk, (c) => c.text(s))).toBe(new TextDecoder().decode(new TextEncoder().encode(s)));
        for (const v of [x, k, -0, 2 ** 31, 2 ** 31 - 1, -(2 ** 31), 1e21, NaN, Infinity]) expect(written(chunk, (c) => c.num(v))).toBe(JSON.stringify(v));
        runs++;
      }),
      { numRuns: 300, seed: 15 },
    );
    expect(runs).toBe(300);
  });

  it('write again bytes of the chunk itself, short (byte by byte) and long (copyWithin), across its growth', () => {
    let runs = 0;
    fc.assert(
      fc.property(fc.array(fc.string({ unit: 'binary', maxLength: 40 }), { minLength: 1, maxLength: 20 }), (list) => {
        const chunk = new ByteChunk(4, 8, 64); // grows many times
        let want = '';
        for (const s of list) {
          chunk.text('<');
          const from = chunk.length;
          chunk.quoted(s, 1);
          const n = chunk.length - from;
          chunk.text('|"');
          chunk.again(from, n);
          want += `<${JSON.stringify(s).slice(1)}|${JSON.stringify(s)}`;
        }
        expect(chunkText(chunk.take())).toBe(want);
        runs++;
      }),
      { numRuns: 300, seed: 16 },
    );
    expect(runs).toBe(300);
  });

  it('copy kept texts shorter and longer than a byte-by-byte copy takes', () => {
    const chunk = new ByteChunk(4, 8, 256);
    const texts = ['', 'a', 'fifteen-bytes!!', 'sixteen-bytes!!!', 'seventeen-bytes!!', 'x'.repeat(100)];
    const kept = texts.map((t) => chunk.keep(t));
    for (let round = 0; round < 3; round++) texts.forEach((t, k) => chunk.copy(kept[k]!, t.length));
    expect(chunkText(chunk.take())).toBe(texts.join('').repeat(3));
  });

  it('keep texts across a growing chunk and arena; pinned texts outlive a drop of the others', () => {
    const chunk = new ByteChunk(4, 8, 64);
    const pinned = chunk.keep('<pin>', true);
    const kept: [number, string][] = [];
    for (let i = 0; i < 5; i++) kept.push([chunk.keep(`t${i}-text`), `t${i}-text`]);
    expect(chunk.generation).toBe(0); // grown 8 -> 64, its limit
    let text = '';
    for (const [at, t] of kept) {
      chunk.copy(at, t.length);
      chunk.copy(pinned, 5);
    }
    text = chunkText(chunk.take());
    expect(text).toBe(kept.map(([, t]) => `${t}<pin>`).join(''));
    for (let i = 0; i < 20; i++) chunk.keep('another text');
    expect(chunk.generation).toBeGreaterThan(0);
    chunk.copy(pinned, 5);
    chunk.text('é✓');
    expect(chunkText(chunk.take())).toBe('<pin>é✓');
  });

  it('text caches miss after their chunk dropped its texts, and give each slot its own text', () => {
    const chunk = new ByteChunk(16, 16, 64);
    const cache = new TextCache(4, chunk);
    const texts = new Map<number, string>();
    let hits = 0;
    for (let round = 0; round < 40; round++) {
      const x = round < 20 ? round % 3 : round % 7; // 3 texts fit the arena, 7 do not
      let s = cache.get(x, 0.5, -0);
      if (s < 0) s = cache.put(`value ${x} ${'.'.repeat(x)}`);
      else hits++;
      cache.write(s);
      texts.set(round, `value ${x} ${'.'.repeat(x)}`);
      expect(chunkText(chunk.take())).toBe(texts.get(round));
    }
    expect(hits).toBeGreaterThan(0);
    expect(chunk.generation).toBeGreaterThan(0);
    expect(cache.get(NaN, 0, 0)).toBe(-1);
  });

  it('a text written into the chunk and kept from there (reuse, keepWritten) is the one a later hit copies, also after the arena dropped its texts', () => {
    const chunk = new ByteChunk(16, 16, 64);
    const cache = new TextCache(8, chunk); // 256 slots: the 3 texts' keys share none
    const pinned = chunk.keep('<row>', true);
    let hits = 0;
    let misses = 0;
    for (let round = 0; round < 60; round++) {
      const x = round < 30 ? round % 3 : round % 7; // 3 texts fit the arena, 7 do not
      const text = `value ${x} ${'.'.repeat(2 * x)}`;
      chunk.copy(pinned, 5); // the row's bytes before the cached run stay out of it
      if (cache.reuse(x, 0.5, -0)) hits++;
      else {
        misses++;
        chunk.text('value ');
        chunk.num(x);
        chunk.text(` ${'.'.repeat(2 * x)}`);
        cache.keepWritten(); // keeps what came after reuse(): not the row's bytes before it
      }
      expect(chunkText(chunk.take())).toBe(`<row>${text}`);
    }
    expect(hits).toBeGreaterThan(20);
    expect(misses).toBeGreaterThan(10);
    expect(chunk.generation).toBeGreaterThan(0);
  });

  it('a text cache that finds under a quarter of 4,096 lookups or more stops finding and keeping for the rest of the use; begin() starts again', () => {
    const chunk = new ByteChunk(1 << 16, 1 << 10, 1 << 20);
    const cache = new TextCache(12, chunk);
    const write = (x: number) => {
      if (cache.reuse(x, 0, 0)) return true;
      chunk.num(x);
      cache.keepWritten();
      return false;
    };
    // Kept while the texts found stay at a quarter or more: 1,024 numbers, each asked 4 times.
    let found = 0;
    for (let k = 0; k < 4096; k++) if (write(k >> 2)) found++;
    expect(found).toBe(3072);
    // Then numbers that never repeat: the share found falls under a quarter and it stops.
    let lookups = 4096;
    while (4 * found >= lookups + 1) {
      expect(write(1e6 + lookups)).toBe(false);
      lookups++;
    }
    expect(write(1e6 + lookups)).toBe(false); // this miss stops it
    expect(write(0)).toBe(false); // kept before, no longer found
    chunk.take();
    // Every text it was given was still written whole.
    chunk.num(0);
    expect(chunkText(chunk.take())).toBe('0');
    expect(write(7e6)).toBe(false);
    expect(write(7e6)).toBe(false); // nothing kept any more
    chunk.take();
    cache.begin(); // a new use: kept and found again
    expect(write(7e6)).toBe(false);
    expect(write(7e6)).toBe(true);
    expect(chunkText(chunk.take())).toBe('70000007000000');
  });
});
