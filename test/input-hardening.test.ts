import { spawnSync } from 'node:child_process';
import { closeSync, existsSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  MAX_JSON_DEPTH, RolloutBudgetError, batchOf, decodeUtf8, invalidUtf8At, nestedDeeperThan, parseJson, parsePrompts, quote, readText,
} from '../src/index.js';
import { binaryKind } from '../src/io/file-kind.js';
import { cli } from './cli-helpers.js';
import { CLI } from './service-helpers.js';
import { tempDir } from './temp.js';

// Issue 12, items 5 and 9 for files and stdin: deep JSON crashed plan/observe (exit 1 and a
// stack), bytes that are not UTF-8 became U+FFFD silently.
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

describe('numbers a double cannot hold', () => {
  it('a number literal beyond the largest double is named as one, not as a bare Infinity (a JSON file cannot hold Infinity)', async () => {
    const dir = tempDir();
    const prompts = join(dir, 'prompts.jsonl');
    writeFileSync(prompts, '{"id":"a","prompt_tokens":10}\n{"id":"b","prompt_tokens":1e400}\n');
    const p = await cli(['plan', '--prompts', prompts, '--state', ':memory:', '--budget-rollouts', '16']);
    expect(p.code).toBe(2);
    expect(p.stderr).toBe(`rollout-budget: ${prompts}:2: "prompt_tokens" must be a non-negative integer, got Infinity (a number beyond ±1.8e308)\n`);
    // 2^53 + 1 reads as 2^53: the message says the number it read is beyond what a JSON number holds exactly.
    const steps = join(dir, 'steps.jsonl');
    writeFileSync(steps, '{"prompt_id":"a","reward":1,"step":9007199254740993}\n');
    const big = await cli(['observe', '--results', steps, '--state', ':memory:']);
    expect(big.code).toBe(2);
    expect(big.stderr).toBe(`rollout-budget: ${steps}:1: "step" must be a non-negative integer, got 9007199254740992 (as read: an integer beyond 2^53 − 1 = 9007199254740991, the largest a JSON number holds exactly)\n`);
    const results = join(dir, 'results.jsonl');
    writeFileSync(results, '{"prompt_id":"a","reward":-1e999,"step":0}\n');
    const o = await cli(['observe', '--results', results, '--state', ':memory:']);
    expect(o.code).toBe(2);
    expect(o.stderr).toBe(`rollout-budget: ${results}:1: "reward" must be a number in [0, 1], got -Infinity (a number beyond ±1.8e308)\n`);
    expect(quote(Number.NaN)).toBe('NaN');
  });
});

describe('token counts beyond any context', () => {
  it('a rollout\'s tokens (a line, a group\'s), a prompt\'s prompt_tokens or max_tokens above 10⁷ are refused naming file, line, field and value; the state as it was', async () => {
    // Found by a hostile review: one results line with "tokens": 2^53 − 1 was taken (exit 0), the
    // pooled mean length became 1.6e13, and a later token-budget plan kept 5 of 18 prompts.
    const { readFileSync } = await import('node:fs');
    const dir = tempDir();
    const state = join(dir, 'state.db');
    const ok = join(dir, 'ok.jsonl');
    writeFileSync(ok, '{"prompt_id":"a","step":0,"reward":1,"tokens":10000000,"rollout_id":"a0"}\n');
    expect((await cli(['observe', '--results', ok, '--state', state])).code).toBe(0); // the largest taken
    const before = readFileSync(state);
    const at = '(10⁷ tokens, longer than any model\'s context)';
    const cases: [string, string][] = [
      ['{"prompt_id":"u","step":5,"reward":1,"tokens":9007199254740991,"rollout_id":"x1"}', `"tokens" must be at most 10000000 ${at}, got 9007199254740991`],
      ['{"prompt_id":"u","step":5,"rewards":[1,0],"tokens":[10,10000001]}', `"tokens[1]" must be at most 10000000 ${at}, got 10000001`],
      // The slow path's check too (a key the fast scanner leaves to it: an escaped one).
      ['{"prompt_id":"u","step":5,"reward":1,"tok\\u0065ns":10000001}', `"tokens" must be at most 10000000 ${at}, got 10000001`],
    ];
    for (const [line, message] of cases) {
      const file = join(dir, 'bad.jsonl');
      writeFileSync(file, `{"prompt_id":"b","step":5,"reward":0}\n${line}\n`);
      const r = await cli(['observe', '--results', file, '--state', state]);
      expect(r.code, line).toBe(2);
      expect(r.stderr, line).toBe(`rollout-budget: ${file}:2: ${message}\n`);
    }
    expect(readFileSync(state).equals(before)).toBe(true);
    for (const [key, value] of [['prompt_tokens', 10000001], ['max_tokens', 9007199254740991]] as const) {
      const prompts = join(dir, 'p.jsonl');
      writeFileSync(prompts, `{"id":"a"}\n{"id":"b","${key}":${value}}\n`);
      const p = await cli(['plan', '--prompts', prompts, '--state', ':memory:', '--budget-rollouts', '16']);
      expect(p.code, key).toBe(2);
      expect(p.stderr, key).toBe(`rollout-budget: ${prompts}:2: "${key}" must be at most 10000000 ${at}, got ${value}\n`);
    }
  });
});

describe('a file of another kind given in its place', () => {
  const fixture = join(import.meta.dirname, '..', 'fixtures', 'qwen-math100-k8');
  const plan = join(fixture, 'plan.json');
  const prompts = join(fixture, 'prompts.jsonl');

  it('a file whose line never ends is stopped at the longest string Node holds, not read on (a 600 MB line: 1.6 GB and a TypeError)', () => {
    const file = join(tempDir(), 'one-line.jsonl');
    writeFileSync(file, Buffer.alloc(2 ** 29, 0x78)); // 2^29 bytes of "x", no newline
    try {
      for (const argv of [['plan', '--prompts', file, '--state', ':memory:', '--budget-rollouts', '8'], ['observe', '--results', file, '--state', ':memory:']]) {
        const r = spawnSync(process.execPath, [CLI, ...argv], { encoding: 'utf8', timeout: 60_000 });
        expect(r.status, argv[0]).toBe(2);
        expect(r.stderr, argv[0]).toBe(`rollout-budget: ${file}:1: a line with no end after 536870912 bytes, more than Node can hold as one string (536870888 characters): no line of JSON this tool reads is that long\n`);
      }
    } finally {
      rmSync(file);
    }
  }, 120_000);

  it('a device (/dev/zero, /dev/urandom) is refused at once by every reader; stdin by its own names is still read', () => {
    // In a process of its own with a time limit: before, plan grew to 6.3 GB and observe and replay
    // copied the device into a temporary file without end.
    const run = (argv: string[]) => spawnSync(process.execPath, [CLI, ...argv], { encoding: 'utf8', timeout: 20_000 });
    for (const [argv, device] of [
      [['plan', '--prompts', '/dev/zero', '--state', ':memory:', '--budget-rollouts', '8'], '/dev/zero'],
      [['observe', '--results', '/dev/zero', '--state', ':memory:'], '/dev/zero'],
      [['replay', '--log', '/dev/urandom', '--policies', 'uniform'], '/dev/urandom'],
      [['simulate', '--scenario', '/dev/zero'], '/dev/zero'],
    ] as const) {
      const r = run([...argv]);
      expect(r.signal, argv[0]).toBeNull();
      expect(r.status, argv[0]).toBe(2);
      expect(r.stderr, argv[0]).toBe(`rollout-budget: ${device}: a device, not a file: give a file, or - for stdin\n`);
    }
    const file = join(tempDir(), 'results.jsonl');
    writeFileSync(file, '{"prompt_id":"a","reward":1}\n');
    const fd = openSync(file, 'r');
    try {
      const stdin = spawnSync(process.execPath, [CLI, 'observe', '--results', '/dev/stdin', '--state', ':memory:'], { encoding: 'utf8', timeout: 20_000, stdio: [fd, 'pipe', 'pipe'] });
      expect(stdin.status, stdin.stderr).toBe(0);
      expect(JSON.parse(stdin.stdout)).toMatchObject({ applied: 1 });
    } finally {
      closeSync(fd);
    }
  });

  it('a plan file (one JSON document over several lines) where JSONL goes says so', async () => {
    const multiLine = '{\n'; // the plan file's first line: the writer indents
    expect(readText(plan).startsWith(multiLine)).toBe(true);
    for (const argv of [['observe', '--results', plan, '--state', ':memory:'], ['plan', '--prompts', plan, '--state', ':memory:', '--budget-rollouts', '8']]) {
      const run = await cli(argv);
      expect(run.code).toBe(2);
      expect(run.stderr).toBe(`rollout-budget: ${plan}:1: malformed JSON: the line is only "{"; JSONL holds a whole JSON object on each line, and this looks like one JSON document over several lines\n`);
    }
  });

  it('JSONL where the plan file goes says what it seems to be; a plan that is merely malformed still says malformed JSON', async () => {
    const dir = tempDir();
    const jsonlPlan = join(dir, 'plan.jsonl');
    expect((await cli(['plan', '--prompts', prompts, '--state', ':memory:', '--budget-rollouts', '800', '--format', 'jsonl', '--out', jsonlPlan])).code).toBe(0);
    const cases: [string, string][] = [
      [prompts, ' (prompts, by its "id")'],
      [jsonlPlan, ' (a plan written with --format jsonl)'],
    ];
    for (const [file, kind] of cases) {
      const run = await cli(['execute', '--plan', file, '--prompts', prompts, '--endpoint', 'http://127.0.0.1:9/v1', '--model', 'm', '--out', join(dir, 'r.jsonl')]);
      expect(run.code).toBe(2);
      expect(run.stderr).toBe(`rollout-budget: ${file}:2: a second JSON value: this is JSONL, one object a line${kind}, not the one JSON document of a plan file, as \`plan\` writes it by default (--format json)\n`);
    }
    const broken = join(dir, 'broken.json');
    writeFileSync(broken, readText(plan).slice(0, 200));
    const run = await cli(['execute', '--plan', broken, '--prompts', prompts, '--endpoint', 'http://127.0.0.1:9/v1', '--model', 'm']);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/^rollout-budget: .*broken\.json: malformed JSON \(/);
  });

  it('a compressed, UTF-16, SQLite or Parquet file is named as one, with what to do; nothing is written', async () => {
    const dir = tempDir();
    const text = readText(prompts);
    const gz = join(dir, 'prompts.jsonl.gz');
    writeFileSync(gz, gzipSync(text)); // real gzip (node:zlib)
    const utf16 = join(dir, 'prompts-utf16.jsonl');
    writeFileSync(utf16, Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(text, 'utf16le')])); // as Notepad's "Unicode" saves it
    const state = join(dir, 'state.db');
    const results = join(dir, 'results.jsonl');
    writeFileSync(results, '{"prompt_id":"a","step":0,"rewards":[1,0]}\n');
    expect((await cli(['observe', '--results', results, '--state', state])).code).toBe(0); // a real state file
    // Not a whole Parquet file: its first bytes, the magic "PAR1" every Parquet file starts with
    // (apache/parquet-format README, "File format"), which is all the check reads.
    const parquet = join(dir, 'train.parquet');
    writeFileSync(parquet, Buffer.concat([Buffer.from('PAR1'), Buffer.from([0x15, 0x04, 0x15, 0x80, 0x01, 0x15, 0x00, 0x4c])]));
    const cases: [string, string][] = [
      [gz, 'this is gzip-compressed data, not UTF-8 text: decompress it first (gunzip -k, or zcat into a pipe)'],
      [utf16, 'this is UTF-16 text (little-endian, as Windows\' "Unicode"), not UTF-8 text: save it as UTF-8 (iconv -f UTF-16 -t UTF-8)'],
      [state, 'this is a SQLite database (a state file?), not UTF-8 text: a state goes to --state, and this place takes a text file'],
      [parquet, 'this is a Parquet file (as verl\'s datasets are), not UTF-8 text: write its rows as JSONL first, one JSON object a line (a verl dataset as prompts, with the ids the verl integration gives them: python -m rollout_budget.dataset <file>.parquet --out prompts.jsonl, from the Python package in python/; other rows, with pandas: pd.read_parquet(path).to_json(out, orient="records", lines=True))'],
    ];
    const out = join(dir, 'out');
    for (const [file, message] of cases) {
      for (const [argv, where] of [
        [['plan', '--prompts', file, '--state', join(dir, 'new.db'), '--budget-rollouts', '8', '--out', out], `${file}:1`],
        [['observe', '--results', file, '--state', join(dir, 'new.db')], `${file}:1`],
        [['replay', '--log', file, '--out', out], `${file}:1`],
        [['execute', '--plan', file, '--prompts', prompts, '--endpoint', 'http://127.0.0.1:9/v1', '--model', 'm', '--out', out], `${file}:1`],
      ] as const) {
        const run = await cli([...argv]);
        expect(run.code, `${argv.join(' ')}: ${run.stderr}`).toBe(2);
        expect(run.stderr).toBe(`rollout-budget: ${where}: ${message}\n`);
      }
    }
    expect(existsSync(join(dir, 'new.db'))).toBe(false);
    expect(existsSync(out)).toBe(false);
    // Through stdin too (spooled, then read as a file).
    const piped = spawnSync(process.execPath, [CLI, 'plan', '--prompts', '-', '--state', ':memory:', '--budget-rollouts', '8'], { input: gzipSync(text), encoding: 'utf8' });
    expect(piped.status).toBe(2);
    expect(piped.stderr).toBe(`rollout-budget: <stdin>:1: ${cases[0]![1]}\n`);
  });

  it('text that merely starts like one is not named so: a JSON line beginning with "PK" or "BZh" is malformed JSON as before', () => {
    expect(binaryKind(Buffer.from('{"id":"a"}'))).toBeUndefined();
    expect(binaryKind('BZh')).toBe('this is bzip2-compressed data, not UTF-8 text: decompress it first (bunzip2 -k)');
    expect(() => parseJson('PK', 'f:3')).toThrow('f:3: malformed JSON (');
    expect(() => parseJson('PK\u0003\u0004', 'f:3')).toThrow('f:3: this is a zip archive, not UTF-8 text: unzip it first');
    // Bytes that are text (a SQLite header before any binary page) are named by the JSON parse.
    expect(() => parseJson('SQLite format 3\u0000', 'plan.json')).toThrow('plan.json: this is a SQLite database (a state file?)');
  });
});

describe('a path stat(2) cannot follow', () => {
  it('a loop of symbolic links or a name too long is named with its errno, exit 2, for every reader and writer (it was an internal error with a stack trace)', async () => {
    // Found by a hostile review: observe --results, replay --log, --state and every --out crashed with exit 1.
    const { symlinkSync } = await import('node:fs');
    const dir = tempDir();
    const loop = join(dir, 'loop1');
    symlinkSync(join(dir, 'loop2'), loop);
    symlinkSync(loop, join(dir, 'loop2'));
    const long = join(dir, 'a'.repeat(300));
    const state = join(dir, 'state.db');
    const results = join(dir, 'r.jsonl');
    writeFileSync(results, '{"prompt_id":"a","reward":1}\n');
    expect((await cli(['observe', '--results', results, '--state', state])).code).toBe(0);
    const prompts = join(dir, 'p.jsonl');
    writeFileSync(prompts, '{"id":"a"}\n');
    let ran = 0;
    for (const [path, why] of [[loop, 'ELOOP: a loop of symbolic links'], [long, 'ENAMETOOLONG: a name in it is longer than the file system takes']] as const) {
      for (const args of [
        ['observe', '--results', path, '--state', state],
        ['replay', '--log', path, '--quiet'],
        ['inspect', '--state', path],
        ['plan', '--prompts', prompts, '--state', state, '--out', path],
        ['backup', '--state', state, '--out', path],
      ]) {
        const r = await cli(args);
        expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(2);
        expect(r.stderr, args[0]).toContain(`${path}: cannot `);
        expect(r.stderr, args[0]).toContain(why.split(':')[0]!);
        expect(r.stderr, args[0]).not.toContain('internal error');
        ran++;
      }
    }
    expect(ran).toBe(10);
  });

  it('a FIFO named like a step file in a log folder is refused, naming it (replay waited on it forever)', async () => {
    const dir = tempDir();
    const folder = join(dir, 'verl');
    const { mkdirSync } = await import('node:fs');
    mkdirSync(folder);
    for (const step of [1, 2]) writeFileSync(join(folder, `${step}.jsonl`), `{"input":"p","output":"x","score":1,"step":${step}}\n`);
    expect(spawnSync('mkfifo', [join(folder, '3.jsonl')]).status).toBe(0);
    // A process of its own, with a time limit: the code before waited in a blocking open(2).
    const r = spawnSync(process.execPath, [CLI, 'replay', '--log', folder, '--quiet', '--policies', 'uniform'], { encoding: 'utf8', timeout: 20_000 });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain(`${join(folder, '3.jsonl')}: a FIFO (named pipe), not a file, in the log folder ${folder}: move it out of the folder`);
  }, 30_000);
});

describe('the last step a state may hold', () => {
  it('a plan or an observe without a step takes that step again, not one past it that observe and --step refuse', async () => {
    // A statistician's review: at last step 2^31 − 1 the plan's default step was 2^31, and
    // observing that plan's results with the step it named was exit 2.
    const dir = tempDir();
    const state = join(dir, 'state.db');
    const results = join(dir, 'r.jsonl');
    writeFileSync(results, '{"prompt_id":"a","step":2147483647,"reward":1}\n');
    expect((await cli(['observe', '--results', results, '--state', state])).code).toBe(0);
    const prompts = join(dir, 'p.jsonl');
    writeFileSync(prompts, '{"id":"a"}\n');
    const plan = await cli(['plan', '--prompts', prompts, '--state', state, '--budget-rollouts', '4']);
    expect(plan.code, plan.stderr).toBe(0);
    expect(JSON.parse(plan.stdout).step).toBe(2147483647);
    writeFileSync(results, '{"prompt_id":"a","reward":0}\n');
    const o = await cli(['observe', '--results', results, '--state', state]);
    expect(o.code, o.stderr).toBe(0);
    expect(JSON.parse(o.stdout)).toMatchObject({ applied: 1, last_step: 2147483647 });
  });
});

describe('a report that cannot be written whole', () => {
  it('a folder where one of its files goes is named before anything is replaced: the last report stays whole, no temp file is left', async () => {
    // Found by a hostile review: summary.md a folder, and metrics.json was already this run's
    // beside the last run's summary and report, with two temp files left.
    const { mkdirSync, readdirSync, readFileSync } = await import('node:fs');
    const dir = tempDir();
    const log = join(dir, 'r.jsonl');
    writeFileSync(log, [0, 1, 2].flatMap((step) => ['a', 'b'].map((p) => JSON.stringify({ prompt_id: p, step, rewards: [1, 0, 1, 0] }))).join('\n') + '\n');
    const out = join(dir, 'rep');
    mkdirSync(out);
    writeFileSync(join(out, 'metrics.json'), 'the last run\n');
    mkdirSync(join(out, 'summary.md'));
    const r = await cli(['replay', '--log', log, '--quiet', '--policies', 'uniform', '--out', out]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`${out}: cannot write the report (summary.md there is a folder): move it away`);
    expect(readFileSync(join(out, 'metrics.json'), 'utf8')).toBe('the last run\n');
    expect(readdirSync(out).sort()).toEqual(['metrics.json', 'summary.md']);
    // A write failing after two temp files were written (here: the third's temp name is taken
    // by a folder; a full disk does the same) removes them. cli() runs in this process: its pid.
    rmSync(join(out, 'summary.md'), { recursive: true });
    mkdirSync(join(out, `.report.html.tmp-${process.pid}`));
    const cut = await cli(['replay', '--log', log, '--quiet', '--policies', 'uniform', '--out', out]);
    expect(cut.code).toBe(2);
    expect(cut.stderr).toContain(`${out}: cannot write the report (EISDIR)`);
    expect(readdirSync(out).sort()).toEqual([`.report.html.tmp-${process.pid}`, 'metrics.json']);
    expect(readFileSync(join(out, 'metrics.json'), 'utf8')).toBe('the last run\n');
  });
});

describe('a state on a full disk', () => {
  // Needs a small file system to fill: a tmpfs, which only root may mount (CI runs as root).
  const mountable = (() => {
    if (process.getuid?.() !== 0) return false;
    const probe = tempDir();
    const ok = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', probe]).status === 0;
    if (ok) spawnSync('umount', [probe]);
    return ok;
  })();
  it.runIf(mountable)('is named as such, even by inspect (it said "disk I/O error" alone)', async () => {
    const { copyFileSync } = await import('node:fs');
    const dir = tempDir();
    const state = join(dir, 'st.db');
    const results = join(dir, 'r.jsonl');
    writeFileSync(results, '{"prompt_id":"a","reward":1}\n');
    expect((await cli(['observe', '--results', results, '--state', state])).code).toBe(0);
    const full = join(dir, 'full');
    const { mkdirSync } = await import('node:fs');
    mkdirSync(full);
    expect(spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', full]).status).toBe(0);
    try {
      copyFileSync(state, join(full, 'st.db'));
      spawnSync('sh', ['-c', `head -c 2000000 /dev/zero > ${join(full, 'fill')}`]);
      const r = spawnSync(process.execPath, [CLI, 'inspect', '--state', join(full, 'st.db')], { encoding: 'utf8' });
      expect(r.status).toBe(2);
      expect(r.stderr).toContain(`${join(full, 'st.db')}: cannot open the state database (`);
      expect(r.stderr).toContain('the disk holding it is full (no bytes free): free space there; the state is as it was');
    } finally {
      spawnSync('umount', [full]);
    }
  });
});
