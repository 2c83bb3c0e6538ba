import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  MAX_JSON_DEPTH, RolloutBudgetError, batchOf, decodeUtf8, invalidUtf8At, nestedDeeperThan, parseJson, parsePrompts, quote, readText,
} from '../src/index.js';
import { cli } from './cli-helpers.js';
import { CLI } from './service-helpers.js';
import { tempDir } from './temp.js';

// Issue 12, items 4, 5 and 9 for files and stdin: deep JSON crashed plan/observe (exit 1 and a
// stack), bytes that are not UTF-8 became U+FFFD silently; NUL and lone surrogates are refused
// before they are stored, and control characters reach the terminal escaped.
const dir = tempDir('rb-input-');
const file = (name: string, content: string | Buffer) => {
  const path = join(dir, name);
  writeFileSync(path, content);
  return path;
};
const deep = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;
const seed = (name: string) => [...name].reduce((h, c) => (Math.imul(h, 31) + c.charCodeAt(0)) | 0, 7);

describe('deeply nested JSON in files (item 5)', () => {
  it('plan and observe exit 2 naming file:line, with no stack, for depth 5,000 and 20,000', async () => {
    for (const depth of [5_000, 20_000]) {
      const prompts = file(`p${depth}.jsonl`, `{"id":"a"}\n{"id":${deep(depth)}}\n`);
      const results = file(`r${depth}.jsonl`, `{"prompt_id":"a","reward":1}\n{"prompt_id":"a","reward":${deep(depth)}}\n`);
      const state = join(dir, `d${depth}.db`);
      const p = await cli(['plan', '--prompts', prompts, '--state', state, '--budget-rollouts', '8']);
      expect(p.code).toBe(2);
      expect(p.stderr).toBe(`rollout-budget: ${prompts}:2: JSON nested deeper than ${MAX_JSON_DEPTH} levels of arrays and objects: ${quote(`{"id":${deep(depth)}}`)}\n`);
      const o = await cli(['observe', '--results', results, '--state', state]);
      expect(o.code).toBe(2);
      expect(o.stderr).toContain(`${results}:2: JSON nested deeper than ${MAX_JSON_DEPTH} levels`);
      expect(o.stderr).not.toContain('    at ');
    }
  });

  it('quote() and batchOf() never throw a RangeError on deep or circular values', () => {
    let v: unknown = 1;
    for (let k = 0; k < 20_000; k++) v = [v];
    expect(quote(v)).toBe('[...]');
    const loop: Record<string, unknown> = { prompt_id: 'a', reward: 1 };
    loop.self = loop;
    expect(quote(loop)).toBe('{...}');
    expect(() => batchOf([loop])).toThrow(RolloutBudgetError);
    expect(() => batchOf([{ prompt_id: 'a', reward: 1, x: v }])).toThrow(/results: cannot be written as JSON/);
  });

  it('nestedDeeperThan equals the depth of the parsed value (property)', () => {
    const depthOf = (x: unknown): number => (x !== null && typeof x === 'object' ? 1 + Math.max(0, ...Object.values(x as object).map(depthOf)) : 0);
    let checked = 0;
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 8 }), fc.integer({ min: 0, max: 9 }), (value, limit) => {
        const text = JSON.stringify(value);
        checked++;
        return nestedDeeperThan(text, limit) === depthOf(value) > limit;
      }),
      { seed: seed('nestedDeeperThan'), numRuns: 500 },
    );
    expect(checked).toBe(500);
    expect(() => parseJson(deep(MAX_JSON_DEPTH), 'x')).not.toThrow();
    expect(() => parseJson(deep(MAX_JSON_DEPTH + 1), 'x')).toThrow(/x: JSON nested deeper than 128/);
    expect(nestedDeeperThan('["[[[[", "\\"[[["]', 1)).toBe(false);
  });
});

describe('bytes that are not UTF-8 (item 9)', () => {
  it('plan and observe exit 2 naming file:line and the byte; nothing is applied', async () => {
    const prompts = file('bad-utf8.jsonl', Buffer.concat([Buffer.from('{"id":"a"}\n{"id":"caf'), Buffer.from([0xe9]), Buffer.from('"}\n')]));
    const state = join(dir, 'u.db');
    const p = await cli(['plan', '--prompts', prompts, '--state', state, '--budget-rollouts', '8']);
    expect(p.code).toBe(2);
    expect(p.stderr).toBe(`rollout-budget: ${prompts}:2: not valid UTF-8 text: byte 11 of the line (0xE9) starts no well-formed character; save it as UTF-8\n`);
    const results = file('bad-utf8-results.jsonl', Buffer.concat([Buffer.from('{"prompt_id":"ok","reward":1}\n{"prompt_id":"x\xed\xa0\x80","reward":1}\n', 'latin1')]));
    const o = await cli(['observe', '--results', results, '--state', state]);
    expect(o.code).toBe(2);
    expect(o.stderr).toContain(`${results}:2: not valid UTF-8 text: byte 16 of the line (0xED)`); // an encoded surrogate
    const view = await cli(['inspect', '--state', state]);
    expect(JSON.parse(view.stdout).prompts).toBe(0);
  });

  it('stdin that is not UTF-8 is named <stdin>:line (the real process, exit 2)', () => {
    const r = spawnSync(process.execPath, [CLI, 'observe', '--results', '-', '--state', join(dir, 'stdin.db')], {
      input: Buffer.concat([Buffer.from('{"prompt_id":"a","reward":1}\n\n{"prompt_id":"'), Buffer.from([0xc3, 0x28]), Buffer.from('","reward":1}\n')]),
    });
    expect(r.status).toBe(2);
    expect(r.stderr.toString()).toBe('rollout-budget: <stdin>:3: not valid UTF-8 text: byte 15 of the line (0xC3) starts no well-formed character; save it as UTF-8\n');
  });

  it('a byte-order mark is dropped, and well-formed text of every plane passes', () => {
    const path = file('bom.jsonl', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"id":"é🧮"}\n')]));
    expect(parsePrompts(readText(path), path)).toEqual([{ id: 'é🧮' }]);
  });

  it('invalidUtf8At agrees with a strict decoder on arbitrary bytes and on encoded strings (property)', () => {
    const strict = new TextDecoder('utf-8', { fatal: true });
    const valid = (b: Uint8Array) => {
      try {
        strict.decode(b);
        return true;
      } catch {
        return false;
      }
    };
    let invalid = 0;
    fc.assert(
      fc.property(
        fc.oneof(fc.uint8Array({ maxLength: 40 }), fc.string({ unit: 'binary', maxLength: 20 }).map((s) => new TextEncoder().encode(s))),
        (bytes) => {
          const at = invalidUtf8At(bytes);
          if (at >= 0) {
            invalid++;
            // the prefix before the bad sequence is well-formed
            if (!valid(bytes.subarray(0, at))) return false;
            expect(() => decodeUtf8(bytes, 'f')).toThrow(/^f:\d+: not valid UTF-8/);
          }
          return (at === -1) === valid(bytes);
        },
      ),
      { seed: seed('invalidUtf8At'), numRuns: 500 },
    );
    expect(invalid).toBeGreaterThan(50);
  });

  it('well-formed text longer than a string can hold is BAD_INPUT naming the file or line, not a TypeError (a 600 MB line crashed plan, observe, replay and the service)', () => {
    // One byte past V8's longest string (2^29 − 24 characters), all ASCII.
    const bytes = Buffer.alloc(2 ** 29 - 23, 0x78);
    const message = `${bytes.length} bytes of text in one piece, more than Node can hold as one string (536870888 characters): no line of JSON this tool reads is that long`;
    expect(() => decodeUtf8(bytes, 'f.jsonl')).toThrow(new RolloutBudgetError('BAD_INPUT', `f.jsonl: ${message}; split the file`));
    expect(() => decodeUtf8(bytes, 'f.jsonl', true, 41, false)).toThrow(new RolloutBudgetError('BAD_INPUT', `f.jsonl:42: ${message}; split the file`));
    expect(() => decodeUtf8(bytes, 'line 3', false)).toThrow(new RolloutBudgetError('BAD_INPUT', `line 3: ${message}`));
  });
});

describe('control characters from a file in an error message', () => {
  it('reach the terminal as \\u escapes, not raw (an ESC ] 0 ; ... BEL line retitled it)', async () => {
    const dir = tempDir('rb-control-');
    const prompts = join(dir, 'p.jsonl');
    writeFileSync(prompts, '{"id":"a"}\n\u001b]0;pwned\u0007\r\n');
    const r = await cli(['plan', '--prompts', prompts, '--state', ':memory:', '--budget-rollouts', '4']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(new RegExp(`^rollout-budget: ${prompts.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:2: malformed JSON `));
    expect(r.stderr.slice(0, -1)).not.toMatch(/[\u0000-\u0008\u000a-\u001f\u007f-\u009f]/);
    expect(r.stderr).toContain('\\u001b]0;pwned\\u0007');
  });
});

describe('stored text (item 4): NUL and lone surrogates are refused in every input format', () => {
  it('prompts files, results files and in-memory results name the field', async () => {
    const prompts = file('nul.jsonl', '{"id":"a\\u0000"}\n');
    const p = await cli(['plan', '--prompts', prompts, '--state', join(dir, 'n.db'), '--budget-rollouts', '4']);
    expect(p.code).toBe(2);
    expect(p.stderr).toContain(`${prompts}:1: "id" must not contain the NUL character \\u0000, got "a\\u0000"`);
    expect(() => batchOf([{ prompt_id: 'x', reward: 1, group: '\ud83d' }])).toThrow('results[0]: "group" must be well-formed Unicode (a lone surrogate \\ud800-\\udfff cannot be stored), got "\\ud83d"');
    expect(() => batchOf([{ prompt_id: '\ud83d\udc4d', reward: 1 }])).not.toThrow(); // a proper pair is fine
  });
});
