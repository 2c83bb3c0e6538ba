import { randomBytes } from 'node:crypto';
import { appendFileSync, chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Database } from './sqlite.js';
import { afterAll, describe, expect, it } from 'vitest';
import { autoKey, defaultDecay, fileResultSource, parseResults, PostgresStore, SqliteStore } from '../src/index.js';
import { cli } from './cli-helpers.js';
import { dropPgSchema, freshPgUrl, pgUrl } from './service-helpers.js';
import { dumpState } from './state-file.js';

const dir = mkdtempSync(join(tmpdir(), 'rb-observe-stream-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const dump = (path: string) => dumpState(path, "SELECT * FROM meta WHERE key = 'last_step'");

/** 3,000 lines over 3 steps (out of order), fractional rewards, groups, ids on every third line, a repeated id, aborts. */
function resultsText(): string {
  const lines: string[] = [];
  for (let i = 0; i < 3000; i++) {
    const step = [2, 0, 1][i % 3]!;
    const line: Record<string, unknown> = { prompt_id: `p${(i * 7) % 211}`, step, reward: (i % 5) / 4 > 1 ? 1 : (i % 5) / 4, tokens: 100 + (i % 900) };
    if (i % 3 === 0) line.rollout_id = `r${(i / 3) % 950}`; // ids r0..r49 come twice: the second is a duplicate
    if (i % 97 === 0) line.finish_reason = 'abort';
    if (i % 11 === 0) line.group = `g${i % 4}`;
    lines.push(JSON.stringify(line));
    if (i % 500 === 0) lines.push(JSON.stringify({ prompt_id: `q${i}`, step: 1, rewards: [1, 0, 0.5], tokens: [10, 20, 30] }));
  }
  return `${lines.join('\n')}\n`;
}

describe('observe reads a results file in chunks, in one transaction', () => {
  const text = resultsText();
  const file = join(dir, 'results.jsonl');
  writeFileSync(file, text);

  it('gives the state that applying the whole file in memory gives (every number, every count), in chunks of 1 kB', () => {
    const whole = join(dir, 'whole.db');
    const chunked = join(dir, 'chunked.db');
    const a = new SqliteStore(whole);
    const b = new SqliteStore(chunked);
    const sa = a.apply(parseResults(text, file), defaultDecay);
    const source = fileResultSource(file, file, 1024);
    let chunks = 0;
    for (const _ of source.chunks()) chunks++;
    const sb = b.applySource!(source, defaultDecay);
    a.close();
    b.close();
    expect(chunks).toBeGreaterThan(100);
    // The same counts; the warning about ids repeated on other prompts is looked for within a
    // piece read (ids r0..r49 come again 2,850 lines on: in one piece of the whole file, not of 1 kB).
    const { warnings: wa, ...ca } = sa;
    const { warnings: wb, ...cb } = sb;
    expect(cb).toEqual(ca);
    expect(wa).toEqual([expect.stringMatching(/^48 rollouts repeat the rollout_id of a rollout of another prompt \(the first: "r1" of prompt "p137", given to "p21"\)/)]);
    expect(wb).toBeUndefined();
    expect(sa.duplicates).toBeGreaterThan(40);
    expect(sa.aborted).toBeGreaterThan(0);
    expect(dump(chunked)).toBe(dump(whole));
  });

  it('a file written to after its digest was taken, while it is read, applies nothing and says so', () => {
    // Lines without a rollout_id are keyed by the file's digest: lines appended while observe
    // read the file were applied under the digest of the file without them, then applied again
    // by the next observe of the whole file (under the whole file's digest): counted twice.
    const growing = join(dir, 'growing.jsonl');
    writeFileSync(growing, text);
    const state = join(dir, 'growing.db');
    const store = new SqliteStore(state);
    const before = dump(state);
    const source = fileResultSource(growing, growing, 1024);
    expect(source.digest).toMatch(/^[0-9a-f]{64}$/); // taken at the first keyless line, before the writer's next line
    let appended = false;
    const appending = {
      digest: '',
      *chunks(take?: Parameters<typeof source.chunks>[0]) {
        for (const chunk of source.chunks(take)) {
          if (!appended) {
            appendFileSync(growing, '{"prompt_id":"late","step":2,"reward":1}\n');
            appended = true;
          }
          yield chunk;
        }
      },
    };
    Object.defineProperty(appending, 'digest', { get: () => source.digest });
    expect(() => store.applySource!(appending, defaultDecay)).toThrow(`${growing}: the file changed while it was read (written to, or replaced): nothing was applied; observe it again once its writer is done`);
    store.close();
    expect(dump(state)).toBe(before);
    // Unchanged since, the file applies whole, once.
    const again = new SqliteStore(state);
    expect(again.applySource!(fileResultSource(growing, growing, 1024), defaultDecay).applied).toBeGreaterThan(2900);
    again.close();
  });

  /** Applies `path` through fileResultSource, calling `meddle(path)` once after its first chunk was read. */
  function applyMeddled(path: string, state: string, meddle: (path: string) => void) {
    const source = fileResultSource(path, path, 1024);
    expect(source.digest).toMatch(/^[0-9a-f]{64}$/);
    let done = false;
    const meddled = {
      digest: '',
      *chunks(take?: Parameters<typeof source.chunks>[0]) {
        for (const chunk of source.chunks(take)) {
          if (!done) {
            meddle(path);
            done = true;
          }
          yield chunk;
        }
      },
    };
    Object.defineProperty(meddled, 'digest', { get: () => source.digest });
    const store = new SqliteStore(state);
    try {
      return store.applySource!(meddled, defaultDecay);
    } finally {
      store.close();
    }
  }

  it('a file touched or chmod-ed while it is read (its bytes unchanged) applies whole; one rewritten to the same size applies nothing', () => {
    // Its change times move, its bytes do not: the stamp alone read as "changed" (a backup tool's chmod, a touch).
    const plain = join(dir, 'plain.db');
    const reference = new SqliteStore(plain);
    const want = reference.applySource!(fileResultSource(file, file, 1024), defaultDecay).applied;
    reference.close();
    for (const [name, meddle] of [
      ['touched', (path: string) => utimesSync(path, new Date(), new Date(Date.now() + 5000))],
      ['chmod', (path: string) => chmodSync(path, 0o600)],
    ] as const) {
      const path = join(dir, `${name}.jsonl`);
      writeFileSync(path, text);
      const state = join(dir, `${name}.db`);
      expect(applyMeddled(path, state, meddle).applied, name).toBe(want);
      expect(dump(state), name).toBe(dump(plain));
    }
    // The same size, other bytes (one reward changed), the inode kept: still an error, nothing applied.
    const path = join(dir, 'rewritten.jsonl');
    writeFileSync(path, text);
    const state = join(dir, 'rewritten.db');
    new SqliteStore(state).close();
    const before = dump(state);
    const rewrite = (p: string) => {
      const now = readFileSync(p, 'utf8');
      const at = now.lastIndexOf('"reward":0,');
      expect(at).toBeGreaterThan(0);
      writeFileSync(p, `${now.slice(0, at)}"reward":1,${now.slice(at + '"reward":0,'.length)}`);
    };
    expect(() => applyMeddled(path, state, rewrite)).toThrow(`${path}: the file changed while it was read (written to, or replaced): nothing was applied; observe it again once its writer is done`);
    expect(dump(state)).toBe(before);
  });

  it('a re-sent file, or the same file after a state with one key a line (older versions), applies nothing', async () => {
    const state = join(dir, 'again.db');
    const first = await cli(['observe', '--results', file, '--state', state]);
    expect(first.code, first.stderr).toBe(0);
    const before = dump(state);
    const again = await cli(['observe', '--results', file, '--state', state]);
    expect(JSON.parse(again.stdout)).toMatchObject({ applied: 0 });
    expect(dump(state)).toBe(before);
    // A state where an older version applied a keyless file: one seen row per rollout, no batch row.
    const keyless = '{"prompt_id":"z","step":0,"reward":1}\n{"prompt_id":"z","step":0,"rewards":[0,1]}\n';
    writeFileSync(join(dir, 'keyless.jsonl'), keyless);
    const old = join(dir, 'old.db');
    const store = new SqliteStore(old);
    const batch = parseResults(keyless, 'keyless.jsonl');
    store.close();
    const db = new Database(old);
    const put = db.prepare('INSERT INTO seen (rollout_id) VALUES (?)');
    for (const key of batch.keys) put.run(key);
    db.close();
    expect(batch.keys[0]).toBe(autoKey(batch.digest, 1, 0));
    const resent = await cli(['observe', '--results', join(dir, 'keyless.jsonl'), '--state', old]);
    expect(JSON.parse(resent.stdout)).toMatchObject({ applied: 0, duplicates: 3 });
  });

  it('a bad line in a late chunk applies nothing, names its line, and leaves no new state file behind', async () => {
    const bad = `${text}{"prompt_id":"x","reward":2}\n`;
    const path = join(dir, 'bad.jsonl');
    writeFileSync(path, bad);
    const line = bad.split('\n').length - 1;
    const state = join(dir, 'never.db');
    const run = await cli(['observe', '--results', path, '--state', state]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(`${path}:${line}: "reward" must be a number in [0, 1], got 2`);
    expect(existsSync(state)).toBe(false);
    // On an existing state: as before.
    const kept = join(dir, 'kept.db');
    expect((await cli(['observe', '--results', file, '--state', kept])).code).toBe(0);
    const before = dump(kept);
    expect((await cli(['observe', '--results', path, '--state', kept])).code).toBe(2);
    expect(dump(kept)).toBe(before);
  });

  it('names the line of a byte that is not UTF-8 in a later chunk, and drops a byte-order mark only at the start', () => {
    const path = join(dir, 'utf8.jsonl');
    const lines = Array.from({ length: 400 }, (_, i) => `{"prompt_id":"p${i}","reward":1}`);
    writeFileSync(path, Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(`${lines.join('\r\n')}\r\n`), Buffer.from('{"prompt_id":"\xff"}\n', 'latin1')]));
    const source = fileResultSource(path, path, 512);
    expect(() => [...source.chunks()]).toThrow(`${path}:401: not valid UTF-8 text: byte 15 of the line (0xFF)`);
    writeFileSync(path, Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(`${lines.join('\r\n')}\r\n`)]));
    const results = [...fileResultSource(path, path, 512).chunks()].flatMap((c) => c.results);
    expect(results.length).toBe(400);
    expect(results[0]!.prompt_id).toBe('p0');
    // The digest is the text's (mark dropped), as for a file read whole.
    expect(fileResultSource(path, path).digest).toBe(parseResults(`${lines.join('\r\n')}\r\n`, 'x').digest);
  });

  it('reads a file whose every rollout has an id once (its digest is never asked for); a keyless line reads the digest', () => {
    const withIds = join(dir, 'ids.jsonl');
    writeFileSync(withIds, Array.from({ length: 300 }, (_, i) => `{"prompt_id":"p${i % 7}","reward":${i % 2},"rollout_id":"r${i}"}\n`).join(''));
    const keyless = join(dir, 'no-ids.jsonl');
    writeFileSync(keyless, Array.from({ length: 300 }, (_, i) => `{"prompt_id":"p${i % 7}","reward":${i % 2}${i === 200 ? '' : `,"rollout_id":"s${i}"`}}\n`).join(''));
    const store = new SqliteStore(join(dir, 'digest.db'));
    const replaced = '{"prompt_id":"other","reward":1}\n';
    const digests: string[] = [];
    for (const path of [withIds, keyless]) {
      const source = fileResultSource(path, path, 512);
      expect(store.applySource!(source, defaultDecay)).toMatchObject({ applied: 300 });
      // The digest a source gives after the file changed tells whether it read the file before.
      writeFileSync(path, replaced);
      digests.push(source.digest);
    }
    store.close();
    expect(digests[0]).toBe(parseResults(replaced, 'x').digest);
    expect(digests[1]).not.toBe(parseResults(replaced, 'x').digest);
  });

  it('an empty results file is a warning, applies nothing, and leaves no new state file (a mistyped --state made one)', async () => {
    const empty = join(dir, 'empty.jsonl');
    writeFileSync(empty, '');
    const state = join(dir, 'from-empty.db');
    const run = await cli(['observe', '--results', empty, '--state', state]);
    expect(run.code).toBe(0);
    // In the summary's warnings too: a program reading stdout did not see it.
    expect(JSON.parse(run.stdout)).toEqual({ applied: 0, duplicates: 0, aborted: 0, prompts: 0, last_step: null, warnings: [`${empty} holds no results: nothing was applied`] });
    expect(run.stderr).toBe(`rollout-budget: warning: ${empty} holds no results: nothing was applied\n`);
    expect(existsSync(state)).toBe(false);
    // A state that was there is kept as it was.
    expect((await cli(['observe', '--results', '-', '--state', state], '{"prompt_id":"a","step":0,"reward":1}\n')).code).toBe(0);
    const before = dump(state);
    expect((await cli(['observe', '--results', empty, '--state', state])).code).toBe(0);
    expect(dump(state)).toBe(before);
  });

  it('names a results file that cannot be read before the state is opened: none is created', async () => {
    expect(() => fileResultSource(join(dir, 'missing.jsonl'), 'missing.jsonl')).toThrow(/missing\.jsonl: cannot read \(ENOENT\)/);
    expect(() => fileResultSource(dir, dir)).toThrow(`${dir}: cannot read (EISDIR: it is a folder, not a file)`);
    const state = join(dir, 'not-made.db');
    const run = await cli(['observe', '--results', dir, '--state', state]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(`${dir}: cannot read (EISDIR: it is a folder, not a file)`);
    expect(existsSync(state)).toBe(false);
  });
});

const url = pgUrl();
describe.skipIf(url === undefined)('observe --state postgres://', () => {
  it('streams a file into PostgreSQL with the SQLite result (counts and sums)', async () => {
    const text = resultsText();
    const file = join(dir, 'pg.jsonl');
    writeFileSync(file, text);
    const schemaUrl = freshPgUrl(url!);
    try {
      const run = await cli(['observe', '--results', file, '--state', schemaUrl]);
      expect(run.code, run.stderr).toBe(0);
      const sqlite = new SqliteStore(':memory:');
      const want = sqlite.apply(parseResults(text, file), defaultDecay);
      // The same counts and warnings; a file's warning names its lines (file:line), one parsed in memory cannot.
      const unplaced = (summary: { warnings?: string[] }) => ({ ...summary, warnings: summary.warnings?.map((w) => w.replace(/ \([^()]*:\d+\)/g, '')) });
      expect(unplaced(JSON.parse(run.stdout))).toEqual(unplaced(want));
      const store = await PostgresStore.connect(schemaUrl);
      try {
        for (const id of ['p0', 'p13', 'q500']) {
          const a = sqlite.get(id)!;
          const b = (await store.get(id))!;
          expect([b.rollouts, b.rewardSum, b.correctCount, b.wrongTokens, b.lastStep, b.group]).toEqual([a.rollouts, a.rewardSum, a.correctCount, a.wrongTokens, a.lastStep, a.group]);
          expect(b.successes).toBeCloseTo(a.successes, 9);
        }
        const again = await cli(['observe', '--results', file, '--state', schemaUrl]);
        expect(JSON.parse(again.stdout)).toMatchObject({ applied: 0, duplicates: want.applied + want.duplicates });
      } finally {
        await store.close();
      }
    } finally {
      await dropPgSchema(url!, schemaUrl);
    }
  });

  it('an id, rollout_id or group longer than PostgreSQL can index is exit 2 naming it, nothing written (was an internal error, exit 1)', async () => {
    const schemaUrl = freshPgUrl(url!);
    try {
      expect((await cli(['observe', '--results', '-', '--state', schemaUrl], '{"prompt_id":"a","step":1,"reward":1}\n')).code).toBe(0);
      // Random text: PostgreSQL compresses an index entry, so 3,000 of one letter fit.
      const noise = () => randomBytes(4000).toString('base64');
      // Over a page (8,191 bytes compressed), PostgreSQL says it otherwise, naming no index.
      const page = () => randomBytes(12000).toString('base64');
      const cases: [string, string, string][] = [
        ['a rollout_id', `{"prompt_id":"a","step":1,"reward":1,"rollout_id":"${noise()}"}\n`, '\\(2704 bytes\\); PostgreSQL: index row size'],
        ['a prompt id', `{"prompt_id":"${noise()}","step":1,"reward":1}\n`, '\\(2704 bytes\\); PostgreSQL: index row size'],
        ['an id, rollout_id or group', `{"prompt_id":"a","step":1,"reward":1,"rollout_id":"${page()}"}\n`, '\\(8191 bytes\\); PostgreSQL: index row requires'],
      ];
      for (const [what, line, limit] of cases) {
        const run = await cli(['observe', '--results', '-', '--state', schemaUrl], `{"prompt_id":"b","step":1,"reward":0,"rollout_id":"ok-1"}\n${line}`);
        expect(run.code, run.stderr).toBe(2);
        expect(run.stderr).toMatch(new RegExp(`^rollout-budget: ${what} of about \\d+ bytes is longer than a PostgreSQL state can index ${limit}`));
        expect(run.stderr).toMatch(/nothing was written\. On PostgreSQL keep ids, rollout ids and groups under about 2,700 bytes of UTF-8/);
      }
      const store = await PostgresStore.connect(schemaUrl);
      try {
        expect(await store.get('b')).toBeUndefined(); // the first line of each batch was not applied either
        expect((await store.get('a'))!.rollouts).toBe(1);
      } finally {
        await store.close();
      }
    } finally {
      await dropPgSchema(url!, schemaUrl);
    }
  });
});
