import { createRequire } from 'node:module';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { pgArray } from '../src/store/pg-array.js';

/** pg's own conversion of a query parameter (what a plain array is sent as). */
const { prepareValue } = createRequire(import.meta.url)('pg/lib/utils.js') as { prepareValue: (v: unknown) => string };

describe('pgArray: the array literal pg sends for an array parameter', () => {
  it('equals pg\'s text for tricky strings, numbers and nulls', () => {
    const tricky = ['', 'a', '"', '\\', '\\"', 'a"b\\c', '{}', 'a,b', 'NULL', 'null', ' x ', 'é', '😀', '\u2028', "'", '\\\\"'];
    expect(pgArray(tricky)).toBe(prepareValue(tricky));
    const numbers = [0, -0, 1, -1, 0.1, 1e-7, 1.5e21, 2 ** 53 + 2, Number.MAX_VALUE, Number.MIN_VALUE, NaN, Infinity, -Infinity, 12345678901234];
    expect(pgArray(numbers)).toBe(prepareValue(numbers));
    expect(pgArray([null, 'x', null, 3, undefined])).toBe(prepareValue([null, 'x', null, 3, undefined]));
    expect(pgArray([])).toBe(prepareValue([]));
  });

  it('equals pg\'s text for random arrays (property)', () => {
    const element = fc.oneof(fc.string({ unit: 'binary' }), fc.double(), fc.integer(), fc.constant(null), fc.constantFrom('\\', '"', '\\"'));
    let runs = 0;
    fc.assert(fc.property(fc.array(element, { maxLength: 20 }), (values) => {
      runs++;
      expect(pgArray(values)).toBe(prepareValue(values));
    }), { numRuns: 300 });
    expect(runs).toBe(300);
  });
});
