import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import seedrandom from 'seedrandom';
import { afterAll, describe, expect, it } from 'vitest';
import { parsePromptsAt, parsePromptsFile, readText } from '../src/index.js';

const dir = mkdtempSync(join(tmpdir(), 'rb-prompts-file-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The outcome of reading `path` one way: the candidates and their places, or the error's code and message. */
function outcome(read: () => { candidates: unknown[]; lines: Map<string, string> }): unknown {
  try {
    const parsed = read();
    return { candidates: parsed.candidates, lines: [...parsed.lines] };
  } catch (error) {
    return { code: (error as { code?: string }).code, message: (error as Error).message };
  }
}

// Lines good and bad, plain and tricky: the file reader must agree with reading the whole text.
const good = [
  (i: number) => `{"id":"p${i}","prompt_tokens":${i},"max_tokens":64}`,
  (i: number) => `  {"max_tokens": 8, "id": "q${i}"}  `,
  (i: number) => `{"id":"é${i} \\"x\\"","group":"g"}`,
  (i: number) => `{"id":"r${i}","partial_rewards":[1,0],"max_tokens":1e2}`,
  (i: number) => `{"id":"s${i}","id":"t${i}"}`,
  (i: number) => `{"id":"u${i}","prior_pass_rate":0.5,"prior_samples":4}\r`,
  () => '',
];
const bad = [
  () => '{"id":"x","max_tokens":-3}',
  () => '{"id":"x",',
  () => '[1]',
  () => '{"id":""}',
  () => '{"id":"p3"}', // repeats a good line's id, when there is one
];

describe('parsePromptsFile', () => {
  it('gives parsePromptsAt\'s prompts, places and errors on the whole text, over small pieces (bad bytes, repeats, BOM, CRLF)', () => {
    const random = seedrandom('prompts-file');
    let errors = 0;
    let rounds = 0;
    for (let round = 0; round < 150; round++) {
      const lines = Array.from({ length: Math.floor(random() * 40) }, (_, i) => (random() < 0.04 ? bad[Math.floor(random() * bad.length)]!() : good[Math.floor(random() * good.length)]!(i)));
      let bytes = Buffer.from((random() < 0.2 ? '\ufeff' : '') + lines.join(random() < 0.2 ? '\r\n' : '\n') + (random() < 0.5 ? '\n' : ''));
      if (random() < 0.15 && bytes.length > 0) {
        const at = Math.floor(random() * bytes.length);
        bytes = Buffer.concat([bytes.subarray(0, at), Buffer.from([0xff]), bytes.subarray(at)]);
      }
      const path = join(dir, `p${round}.jsonl`);
      writeFileSync(path, bytes);
      const whole = outcome(() => parsePromptsAt(readText(path), path));
      for (const chunkBytes of [16, 100, 1 << 22]) {
        expect(outcome(() => parsePromptsFile(path, path, chunkBytes)), `round ${round}, pieces of ${chunkBytes}`).toEqual(whole);
      }
      if ('code' in (whole as object)) errors++;
      rounds++;
    }
    expect(rounds).toBe(150);
    expect(errors).toBeGreaterThan(20);
    expect(errors).toBeLessThan(130);
  });

  it('a bad byte late in the file is the error, before a bad line or a repeat in an earlier piece', () => {
    const path = join(dir, 'late-byte.jsonl');
    const lines = Array.from({ length: 40 }, (_, i) => `{"id":"p${i}"}`);
    for (const early of ['{"id":"x","max_tokens":0}', '{"id":"p5"}']) {
      writeFileSync(path, Buffer.concat([Buffer.from(`${[early, ...lines].join('\n')}\n`), Buffer.from([0xc3, 0x28, 0x0a])]));
      const whole = outcome(() => parsePromptsAt(readText(path), path));
      expect(whole).toMatchObject({ code: 'BAD_INPUT', message: expect.stringContaining(`${path}:42: not valid UTF-8`) });
      expect(outcome(() => parsePromptsFile(path, path, 16))).toEqual(whole);
    }
  });

  it('names a missing file as reading the whole text does', () => {
    const path = join(dir, 'missing.jsonl');
    expect(outcome(() => parsePromptsFile(path))).toEqual(outcome(() => parsePromptsAt(readText(path), path)));
    expect(outcome(() => parsePromptsFile(dir))).toEqual(outcome(() => parsePromptsAt(readText(dir), dir)));
  });
});
