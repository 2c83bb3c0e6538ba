import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Database } from './sqlite.js';
import { describe, expect, it } from 'vitest';
import { defaultDecay, fileResultSource, parseResults, SqliteStore, type ObserveSummary, type ResultSource, type RolloutResult } from '../src/index.js';
import { applyEvidence, EvidenceAccumulator } from '../src/store/accumulate.js';
import { ClaimConflict, SqliteWriter } from '../src/store/sqlite-apply.js';
import { tempDir } from './temp.js';

/** Lines with rollout ids `r<from>`..`r<to - 1>` over 13 prompts, each id `times` times in a row. */
function idLines(from: number, to: number, times = 1): string {
  const lines: string[] = [];
  for (let i = from; i < to; i++) for (let t = 0; t < times; t++) lines.push(JSON.stringify({ prompt_id: `p${i % 13}`, step: 1, reward: (i % 3) / 2, rollout_id: `r${i}` }));
  return `${lines.join('\n')}\n`;
}

describe('SQLite claims of rollout ids (store/sqlite-apply.ts)', () => {
  it('claims new keys, refuses stored ones in a statement that mixes both, and counts repeats in the batch as duplicates', () => {
    const dir = tempDir('rb-sqlite-claims-');
    const files = ['a', 'b', 'c'].map((name) => join(dir, `${name}.jsonl`));
    writeFileSync(files[0]!, idLines(0, 1200)); // parts of 500: all new
    writeFileSync(files[1]!, idLines(1000, 2500, 2)); // r1000..r1199 stored, the rest new, each twice
    writeFileSync(files[2]!, `${idLines(2400, 2600)}${idLines(0, 10)}`); // r2400..r2499 stored, r0..r9 stored
    const store = new SqliteStore(join(dir, 'state.db'));
    const expected = new SqliteStore(':memory:');
    try {
      expect(store.applySource(fileResultSource(files[0]!, files[0]!), defaultDecay)).toMatchObject({ applied: 1200, duplicates: 0 });
      // in chunks of 2 kB: statements with stored and new keys, repeats within a chunk and across chunks
      expect(store.applySource(fileResultSource(files[1]!, files[1]!, 2048), defaultDecay)).toMatchObject({ applied: 1300, duplicates: 1700 });
      expect(store.applySource(fileResultSource(files[2]!, files[2]!), defaultDecay)).toMatchObject({ applied: 100, duplicates: 110 });
      expect(store.applySource(fileResultSource(files[2]!, files[2]!), defaultDecay)).toMatchObject({ applied: 0, duplicates: 210 });
      // the same rollouts, each once, into a fresh state
      const once = join(dir, 'once.jsonl');
      writeFileSync(once, idLines(0, 2600));
      expected.applySource(fileResultSource(once, once), defaultDecay);
      for (let p = 0; p < 13; p++) {
        const [a, b] = [store.get(`p${p}`)!, expected.get(`p${p}`)!];
        expect(a.rollouts).toBe(b.rollouts);
        expect(a.successes).toBeCloseTo(b.successes, 9);
      }
    } finally {
      store.close();
      expected.close();
    }
  });
});

/** Every table of a state file, as text. */
function dump(path: string): string {
  const db = new Database(path, { readonly: true });
  try {
    return JSON.stringify(['prompts', 'seen', 'pooled', 'meta'].map((t) => db.prepare(`SELECT * FROM ${t} ORDER BY 1`).all()));
  } finally {
    db.close();
  }
}

/** Applies `source` with SqliteWriter.apply(…, hopeful) in one transaction (rolled back when it throws). */
function applyWriter(path: string, source: ResultSource, hopeful: boolean): ObserveSummary {
  new SqliteStore(path).close(); // the schema
  const db = new Database(path);
  try {
    return db.transaction(() => new SqliteWriter(db).apply(source, defaultDecay, hopeful)).immediate();
  } finally {
    db.close();
  }
}

describe('SQLite claims, hopeful first (store/sqlite-apply.ts, store/sqlite.ts)', () => {
  const dir = tempDir('rb-sqlite-hopeful-');
  const first = join(dir, 'first.jsonl');
  const second = join(dir, 'second.jsonl');
  const keyless = join(dir, 'keyless.jsonl');
  // new keys, then in a late chunk (of 2 kB) a key the first file stored; keyless lines
  writeFileSync(first, idLines(0, 50));
  writeFileSync(second, `${idLines(100, 400)}${idLines(40, 41)}${idLines(400, 420)}`);
  writeFileSync(keyless, `${JSON.stringify({ prompt_id: 'p1', step: 1, reward: 0.5 })}\n`);
  const source = (file: string) => fileResultSource(file, file, 2048);

  it('claims new keys hopefully, and throws ClaimConflict at a key stored before, or a batch applied before', () => {
    const path = join(dir, 'writer.db');
    expect(applyWriter(path, source(first), true)).toMatchObject({ applied: 50, duplicates: 0 });
    const before = dump(path);
    expect(() => applyWriter(path, source(second), true)).toThrow(ClaimConflict);
    expect(dump(path)).toBe(before);
    expect(applyWriter(path, source(keyless), true)).toMatchObject({ applied: 1 });
    expect(() => applyWriter(path, source(keyless), true)).toThrow(ClaimConflict);
  });

  it('a chunk whose new ids repeat: the hopeful claim gives each id to its first rollout, as the careful path does (store/claims.ts)', () => {
    const twice = join(dir, 'twice.jsonl');
    // each id twice in a row, first with reward 1, then 0: one chunk (512 kB), all ids new
    const lines: string[] = [];
    for (let i = 0; i < 300; i++) for (const reward of [1, 0]) lines.push(JSON.stringify({ prompt_id: `p${i % 13}`, step: 1, reward, rollout_id: `r${(i * 37) % 300}` }));
    writeFileSync(twice, `${lines.join('\n')}\n`);
    const [hopeful, careful] = ['twice-hopeful.db', 'twice-careful.db'].map((name) => join(dir, name)) as [string, string];
    const summary = applyWriter(hopeful, fileResultSource(twice, twice), true);
    expect(summary).toMatchObject({ applied: 300, duplicates: 300 });
    expect(summary).toEqual(applyWriter(careful, fileResultSource(twice, twice), false));
    expect(dump(hopeful)).toBe(dump(careful));
    const store = new SqliteStore(hopeful);
    try {
      let successes = 0;
      for (let p = 0; p < 13; p++) successes += store.get(`p${p}`)!.successes;
      expect(successes).toBeCloseTo(300, 9); // every first rollout (reward 1), no repeat (reward 0)
    } finally {
      store.close();
    }
  });

  it('a store meeting a stored key applies again without hope: the state and counts of the careful path alone', () => {
    const [hopeful, careful] = ['hopeful.db', 'careful.db'].map((name) => join(dir, name)) as [string, string];
    const store = new SqliteStore(hopeful);
    const summaries: ObserveSummary[] = [];
    try {
      for (const file of [first, second, keyless, keyless, second]) summaries.push(store.applySource(source(file), defaultDecay));
    } finally {
      store.close();
    }
    const expected = [first, second, keyless, keyless, second].map((file) => applyWriter(careful, source(file), false));
    expect(summaries).toEqual(expected);
    expect(summaries[1]).toMatchObject({ applied: 320, duplicates: 1 });
    expect(summaries[3]).toMatchObject({ applied: 0, duplicates: 1 });
    expect(dump(hopeful)).toBe(dump(careful));
  });
});

describe('SQLite observe reads the stored prompts by their place in each read (store/sqlite-apply.ts)', () => {
  it('a state holding every third prompt, observed over more prompts than one read takes and two steps: each row is applyEvidence over the stored one', () => {
    const dir = tempDir('rb-sqlite-reads-');
    const line = (i: number, step: number) => JSON.stringify({ prompt_id: `q${(i * 7) % 2600}`, step, reward: (i % 4) / 4, tokens: 10 + (i % 90), ...(i % 5 === 0 ? { group: `g${i % 3}` } : {}) });
    const first = join(dir, 'first.jsonl');
    const second = join(dir, 'second.jsonl');
    const seeded: string[] = [];
    for (let i = 0; i < 2600; i++) if ((i * 7) % 2600 % 3 === 0) seeded.push(line(i, 1));
    writeFileSync(first, `${seeded.join('\n')}\n`);
    const lines: string[] = [];
    for (let i = 0; i < 7800; i++) lines.push(line(i, i % 2 === 0 ? 3 : 2));
    writeFileSync(second, `${lines.join('\n')}\n`);
    const store = new SqliteStore(join(dir, 'state.db'));
    try {
      store.applySource(fileResultSource(first, first), defaultDecay);
      const ids = Array.from({ length: 2600 }, (_, i) => `q${i}`);
      const before = new Map(ids.map((id) => [id, store.get(id)]));
      expect([...before.values()].filter((s) => s !== undefined).length).toBe(867);
      const acc = new EvidenceAccumulator(0);
      for (const text of lines) acc.add(JSON.parse(text) as RolloutResult);
      const expected = new Map(before);
      for (const e of acc.evidence()) expected.set(e.prompt_id, applyEvidence(expected.get(e.prompt_id), e, defaultDecay));
      expect(store.applySource(fileResultSource(second, second), defaultDecay)).toMatchObject({ applied: 7800, prompts: 2600, last_step: 3 });
      for (const id of ids) expect(store.get(id)).toEqual(expected.get(id));
    } finally {
      store.close();
    }
  });
});

describe('SQLite observe settles keyless rollouts as they are read (store/claims.ts BatchClaims.taker)', () => {
  it('gives the state of the batch held whole (every sum bit for bit, line order kept), keyless and rollout-id lines mixed, aborts, a replay', () => {
    const dir = tempDir('rb-sqlite-taker-');
    const rewards = [0.1, 0.2, 0.3, 0.7, 0.05, 1];
    const lines: string[] = [];
    for (let i = 0; i < 4000; i++) {
      const line: Record<string, unknown> = { prompt_id: `p${(i >> 2) % 3}`, step: 1 + ((i >> 5) % 2), reward: rewards[(i * 5) % rewards.length], tokens: 7 + (i % 13) };
      if (i % 9 === 4 || (i > 2000 && i % 3 === 0)) line.rollout_id = `r${i % 3100}`; // r0..r899 again past 3100: duplicates
      if (i % 31 === 0) line.finish_reason = 'abort';
      lines.push(JSON.stringify(line));
    }
    const text = `${lines.join('\n')}\n`;
    const file = join(dir, 'mixed.jsonl');
    writeFileSync(file, text);
    const [chunked, whole] = ['chunked.db', 'whole.db'].map((name) => join(dir, name)) as [string, string];
    const a = new SqliteStore(chunked);
    const b = new SqliteStore(whole);
    try {
      for (let round = 0; round < 2; round++) {
        const sa = a.applySource(fileResultSource(file, file, 512), defaultDecay);
        const sb = b.apply(parseResults(text, file), defaultDecay);
        expect(sa).toEqual(sb);
        expect(round === 0 ? sa.applied : sa.duplicates).toBeGreaterThan(3000);
      }
    } finally {
      a.close();
      b.close();
    }
    expect(dump(chunked)).toBe(dump(whole));
  });
});
