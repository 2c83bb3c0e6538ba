import { createRequire } from 'node:module';
import fc from 'fast-check';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { dollarQuoted, pgArray } from '../src/store/pg-array.js';
import { pgUrl } from './service-helpers.js';

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

const url = pgUrl();
describe.skipIf(url === undefined)('dollarQuoted: a SQL string constant PostgreSQL reads back as the text', () => {
  it('round-trips text with quotes, backslashes, dollars and its own tags', async () => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const texts = ['', 'plain', "it's", '\\', '\\\\"', '$', '$$', '$k$', 'a$k$b$k0$c', '$k0$$k1$', '{"a\\\\b","c\\"d"}', 'é😀\n\t', '$k', 'k$'];
      for (const text of texts) {
        const { rows } = await client.query(`SELECT ${dollarQuoted(text)}::text AS t`);
        expect(rows[0].t, JSON.stringify(text)).toBe(text);
      }
      // random texts over the characters that matter ($, the tag's letters, quotes, backslash)
      const samples = fc.sample(fc.string({ unit: fc.constantFrom('$', 'k', '0', '1', "'", '\\', '"', 'x'), maxLength: 12 }), { numRuns: 200, seed: 15 });
      const { rows: back } = await client.query(`SELECT ${samples.map((t, k) => `${dollarQuoted(t)}::text AS t${k}`).join(', ')}`);
      expect(samples.map((_, k) => back[0][`t${k}`])).toEqual(samples);
      const keys = ['x', "o'k", 'b\\s', 'q"t', '$k$', ''];
      const { rows } = await client.query(`SELECT unnest(${dollarQuoted(pgArray(keys))}::text[]) AS k`);
      expect(rows.map((r) => r.k)).toEqual(keys);
    } finally {
      await client.end();
    }
  });
});
