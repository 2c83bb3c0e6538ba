import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { eachFlatJsonl, FALSE, FlatFields, NULL, NUMBER, STRING, TRUE } from '../src/io/flat-scan.js';
import { eachJsonl } from '../src/io/jsonl.js';
import { fileResultSource, lineChunks, parsePromptsAt, parseResults } from '../src/index.js';

/**
 * The fast path of JSONL reading (io/flat-scan.ts) must give what JSON.parse and the field
 * checks give, errors included. The careful path is reached for the same lines by appending a
 * no-break space to each: trim() removes it before JSON.parse, and the scanner, meeting a
 * non-ASCII byte, gives the line up.
 */
const careful = (text: string) => text.split('\n').map((line) => `${line}\u00a0`).join('\n');

const VALUES = ['"a"', '""', '"p-1"', '"prompt-1234567890123"', '"é"', '"a\\nb"', '"\\u0000"', '"\\ud800"', '"\\u0041"', '"tab\there"', '"\u007f"',
  '0', '-0', '1', '2', '3072', '0.5', '1.0', '1e0', '1E-2', '5e-1', '-1', '01', '1.', '.5', '-', '1e', '9007199254740991', '9007199254740993',
  '123456789012345', '1234567890123456789', '1e400', '-1e-400', 'true', 'false', 'null', 'nul', 'truex', '[]', '[0.5,1]', '[1,"a"]', '{}', '{"a":1}',
  '"stop"', '"length"', '"abort"', '"other"'];
const ID = ['"a"', '"p-1"', '"prompt-1234567890123"', '"b"', '""', '"é"'];
const COUNT = ['0', '-0', '1', '3072', '1.0', '1e2', '9007199254740991', '9007199254740993', '-1', '0.5', '123456789012345678'];
const REWARD = ['0', '1', '0.5', '-0', 'true', 'false', '1.0000000000000002', '1e-400', '2', '0.30000000000000004', '1e0'];
/** Values mostly of the kind each field takes, good and bad. */
const LIKELY: Record<string, string[]> = {
  id: ID, prompt_id: ID, group: ID, rollout_id: ID, prompt_tokens: COUNT, max_tokens: COUNT, step: COUNT, tokens: COUNT, prior_samples: COUNT,
  reward: REWARD, prior_pass_rate: REWARD, finish_reason: ['"stop"', '"length"', '"abort"', '"other"', 'null'], rewards: ['[1]', '[]', '1'],
};
const PROMPT_KEYS = ['id', 'prompt_tokens', 'max_tokens', 'group', 'partial_rewards', 'prior_pass_rate', 'prior_samples', 'x', '__proto__', 'é', 'a\\"b', ''];
const RESULT_KEYS = ['prompt_id', 'step', 'reward', 'tokens', 'finish_reason', 'rollout_id', 'group', 'rewards', 'prior_pass_rate', 'prior_samples', 'x', '__proto__'];
const SPACE = ['', '', '', ' ', '\t', '\r', '  '];

/** A field `"key": value` with odd spacing. */
const field = (keys: string[]) => fc.tuple(fc.constantFrom(...keys), fc.nat(4), fc.constantFrom(...SPACE)).chain(([k, pick, s]) =>
  fc.constantFrom(...(pick > 0 && Object.hasOwn(LIKELY, k) ? LIKELY[k]! : VALUES)).map((v) => `${s}"${k}"${s}:${s}${v}${s}`));

/** A line: mostly flat objects (the first field usually `first`), sometimes junk. */
const line = (first: string, keys: string[]) => fc.oneof(
  { weight: 8, arbitrary: fc.tuple(fc.option(field([first]), { freq: 8 }), fc.array(field(keys), { maxLength: 5 }), fc.constantFrom(...SPACE))
    .map(([head, fields, space]) => `${space}{${[...(head === null ? [] : [head]), ...fields].join(',')}}${space}`) },
  { weight: 1, arbitrary: fc.constantFrom('', '  ', '\r', '{', '}', '[]', '{"a":1}}', '{"a" 1}', '{"a":1,}', '{,}', '\u00a0{"id":"x"}', '\ufeff{"id":"x"}', '{"id":"x"} x', '"s"', '1', 'null', '{"id":"x"}{}') },
  { weight: 1, arbitrary: fc.string({ maxLength: 30 }) },
);
const textOf = (first: string, keys: string[]) =>
  fc.tuple(fc.array(line(first, keys), { maxLength: 8 }), fc.constantFrom('\n', '\r\n'), fc.boolean()).map(([lines, eol, last]) => lines.join(eol) + (last ? eol : ''));
const text = fc.oneof(textOf('id', PROMPT_KEYS), textOf('prompt_id', RESULT_KEYS));

/** The outcome of a call: its value, or the error's code and message. */
function outcome<T>(run: () => T): { value: T } | { error: string } {
  try {
    return { value: run() };
  } catch (error) {
    return { error: `${(error as { code?: string }).code} ${(error as Error).message}` };
  }
}

/** Objects as [key, value] lists (key order and -0 kept: toEqual tells -0 from 0). */
const entries = (values: readonly object[]) => values.map((v) => Object.entries(v));

describe('fast JSONL reading (io/flat-scan.ts) against JSON.parse and the field checks', () => {
  it('gives the values and errors of eachJsonl, line by line', () => {
    let fast = 0;
    fc.assert(
      fc.property(text, (t) => {
        const mine: unknown[] = [];
        const got = outcome(() =>
          eachFlatJsonl(t, Buffer.from(t), 'f', (fields, n) => {
            const value: Record<string, unknown> = {};
            for (let k = 0; k < fields.count; k++) {
              const kind = fields.kinds[k];
              value[fields.keys[k]!] = kind === STRING ? fields.strings[k] : kind === NUMBER ? fields.numbers[k] : kind === TRUE ? true : kind === FALSE ? false : null;
              expect(kind === NULL || kind === STRING || kind === NUMBER || kind === TRUE || kind === FALSE).toBe(true);
            }
            mine.push([n, Object.entries(value)]);
            fast++;
            return true;
          }, (value, n) => mine.push([n, Object.entries(value)]), 3),
        );
        const theirs: unknown[] = [];
        const want = outcome(() => eachJsonl(t, 'f', (value, n) => theirs.push([n, Object.entries(value)]), 3));
        expect('error' in got ? got : mine).toEqual('error' in want ? want : theirs);
      }),
      { numRuns: 3000 },
    );
    expect(fast).toBeGreaterThan(1000);
  });

  /** `parse` of the text and of each of its lines alone (a bad line hides the lines after it) against the careful path. */
  function sameAsCareful<T>(t: string, parse: (text: string) => T, same: (got: T, want: T) => void): number {
    let accepted = 0;
    for (const part of [t, ...t.split('\n')]) {
      const got = outcome(() => parse(part));
      const want = outcome(() => parse(careful(part)));
      if ('error' in got || 'error' in want) expect(got).toEqual(want);
      else {
        same(got.value, want.value);
        accepted++;
      }
    }
    return accepted;
  }

  it('parsePromptsAt: the candidates, their lines and the errors of the careful path', () => {
    let accepted = 0;
    const examples = ['{"id":"a","max_tokens":0}', '{"id":"a","partial_rewards":null}', '{"id":"a","prior_samples":3}', '{"id":"a","prior_pass_rate":1}', '{"id":"","group":"g"}',
      '{"group":"g","id":"prompt-1234567890123","prompt_tokens":-0,"max_tokens":1e2,"x":null,"y":true}', '{"id":"a"}\n{"id":"a"}'];
    fc.assert(
      fc.property(textOf('id', PROMPT_KEYS), (t) => {
        accepted += sameAsCareful(t, (text) => parsePromptsAt(text, 'p.jsonl'), (got, want) => {
          expect(entries(got.candidates)).toEqual(entries(want.candidates));
          expect([...got.lines]).toEqual([...want.lines]);
        });
      }),
      { numRuns: 1000, examples: examples.map((e) => [e]) },
    );
    expect(accepted).toBeGreaterThan(300);
  });

  it('parseResults: the results and errors of the careful path', () => {
    let accepted = 0;
    const examples = ['{"prompt_id":"a","reward":1,"rewards":1}', '{"prompt_id":"a","reward":1,"prior_pass_rate":0.5}', '{"prompt_id":"a","reward":true,"prior_samples":2}',
      '{"prompt_id":"a","reward":0.5,"finish_reason":"abort","rollout_id":"r","group":"g","step":3,"tokens":10,"x":[]}', '{"prompt_id":"a","step":1}'];
    fc.assert(
      fc.property(textOf('prompt_id', RESULT_KEYS), (t) => {
        accepted += sameAsCareful(t, (text) => parseResults(text, 'r.jsonl'), (got, want) => {
          expect(entries(got.results)).toEqual(entries(want.results));
          expect(got.keys.map((k) => k.replace(got.digest, ''))).toEqual(want.keys.map((k) => k.replace(want.digest, '')));
        });
      }),
      { numRuns: 1000, examples: examples.map((e) => [e]) },
    );
    expect(accepted).toBeGreaterThan(300);
  });

  it('reads the plain lines itself, and gives up the others', () => {
    const f = new FlatFields();
    const scan = (s: string) => f.scan(Buffer.from(s), 0, s, 0);
    expect(scan('{"id":"prompt-0","prompt_tokens":50,"max_tokens":3072}\n{')).toBe(55);
    expect([f.count, f.keys.slice(0, 3), f.strings[0], f.numbers[1], f.numbers[2]]).toEqual([3, ['id', 'prompt_tokens', 'max_tokens'], 'prompt-0', 50, 3072]);
    const last = ' {"a" : -0 , "b":1.5e3,"c":"a-long-string-of-ids"} \r';
    expect(scan(last)).toBe(last.length + 1); // a last line without a newline
    expect([Object.is(f.numbers[0], -0), f.numbers[1], f.strings[2]]).toEqual([true, 1500, 'a-long-string-of-ids']);
    for (const s of ['{"a":"\\n"}', '{"a":"é"}', '{"a":[1]}', '{"a":1,"a":2}', '{"__proto__":1}', '{"a":01}', '{"a":1} {}', '{"a":1}\u00a0', '[1]']) expect(scan(s), s).toBe(-1);
  });

  it('plain and careful lines mixed: line numbers and places stay right past non-ASCII lines', () => {
    const t = '{"id":"a","max_tokens":1}\n{"id":"é","x":"ü"}\n\n{"id":"\\u0062"}\r\n{"id":"c"}\n{"id":"a"}\n';
    expect(outcome(() => parsePromptsAt(t, 'p'))).toEqual({ error: 'BAD_INPUT p:6: "id" "a" repeats line 1' });
    const ok = parsePromptsAt(t.slice(0, t.lastIndexOf('{')), 'p');
    expect(ok.candidates.map((c) => c.id)).toEqual(['a', 'é', 'b', 'c']);
    expect([...ok.lines.values()]).toEqual(['p:1', 'p:2', 'p:4', 'p:5']);
  });
});

describe('a long text, encoded a piece at a time', () => {
  const lines = Array.from({ length: 6000 }, (_, i) =>
    i % 97 === 0 ? `{"id":"é${i}","x":"ü"}` : i === 3000 ? `{"id":"long","prompt":"${'a'.repeat(70_000)}"}` : i % 13 === 0 ? '' : `{"id":"prompt-${i}","max_tokens":${i + 1}}`);
  const text = `${lines.join('\n')}\r\n`;

  it('the candidates and places of the careful path, across pieces', () => {
    const got = parsePromptsAt(text, 'p');
    const want = parsePromptsAt(careful(text), 'p');
    expect(got.candidates.length).toBeGreaterThan(5000);
    expect(entries(got.candidates)).toEqual(entries(want.candidates));
    expect([...got.lines]).toEqual([...want.lines]);
    expect(got.lines.get('prompt-5999')).toBe('p:6000');
  });

  it('an error on a late line names that line', () => {
    const bad = `${text}{"id":"prompt-1","max_tokens":0}\n`;
    expect(outcome(() => parsePromptsAt(bad, 'p'))).toEqual({ error: 'BAD_INPUT p:6001: "max_tokens" must be a positive integer, got 0' });
    const results = `${text.replaceAll('"id"', '"prompt_id"').replaceAll(/"max_tokens":\d+|"x":"ü"|"prompt":"a+"/g, '"reward":0.5')}{"prompt_id":"p","reward":2}\n`;
    expect(parseResults(results.slice(0, results.lastIndexOf('{')), 'r').results.length).toBeGreaterThan(5000);
    expect(outcome(() => parseResults(results, 'r'))).toEqual({ error: 'BAD_INPUT r:6001: "reward" must be a number in [0, 1], got 2' });
  });
});

describe('results files read in pieces', () => {
  const dir = mkdtempSync(join(tmpdir(), 'rb-flat-scan-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('each piece comes with its bytes, the byte-order mark left out', () => {
    const path = join(dir, 'bom.jsonl');
    const body = '{"prompt_id":"é","reward":1}\n{"prompt_id":"b","reward":0}\n'.repeat(40);
    writeFileSync(path, `\ufeff${body}`);
    const pieces = Array.from(lineChunks(path, path, 256), ({ text, bytes }) => [text, bytes.toString('utf8')]); // bytes live until the next piece
    expect(pieces.length).toBeGreaterThan(5);
    for (const [t, b] of pieces) expect(b).toBe(t);
    expect(pieces.map(([t]) => t).join('')).toBe(body);
  });

  it('a file in small pieces gives the results of the whole text', () => {
    const path = join(dir, 'mixed.jsonl');
    const lines = Array.from({ length: 300 }, (_, i) =>
      i % 7 === 0 ? `{"prompt_id":"p\\u00e9${i % 11}","reward":0.5}` : `{"prompt_id":"prompt-${(i * 13) % 41}-and-more","step":${i % 3},"reward":${i % 2 ? 'true' : '0.25'},"tokens":${i}}`);
    const whole = `${lines.join('\n')}\n`;
    writeFileSync(path, whole);
    const results = [...fileResultSource(path, path, 300).chunks()].flatMap((c) => c.results);
    expect(entries(results)).toEqual(entries(parseResults(careful(whole), path).results));
  });
});
