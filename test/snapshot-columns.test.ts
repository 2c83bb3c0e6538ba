import seedrandom from 'seedrandom';
import { describe, expect, it } from 'vitest';
import { fnv1a, snapshotOf, SqliteStore, type PromptState, type StateSnapshot } from '../src/index.js';
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { readStateAhead } from '../src/store/scan-ahead.js';
import { MMAP_BYTES } from '../src/store/sqlite.js';
import { STATE_COLUMNS, stateFileOf } from './state-file.js';
import { tempDir } from './temp.js';

// The whole-state snapshot of a SQLite state is read into columns (store/sqlite-scan.ts,
// posterior/state-columns.ts); these tests compare it with the snapshot made the careful way,
// snapshotOf over the rows as objects, on states with the values a state file can hold.

type Row = [string, string | null, number, number, number, number, number, number, number, number, number, number | null, number | null];

const COLUMNS = STATE_COLUMNS;

/** A state file holding `rows` (and `last_step` in meta when given). */
const stateFile = (rows: readonly Row[], lastStep?: number): string => stateFileOf('rb-columns-', rows, lastStep);

/** The snapshot the row path makes: every row as an object, in the table's order, then snapshotOf. */
function rowSnapshot(path: string): StateSnapshot {
  const db = new (SqliteStore.driver())(path, { readonly: true });
  const states = (db.prepare(`SELECT ${COLUMNS} FROM prompts`).raw().all() as Row[]).map((r): PromptState => ({
    id: r[0], group: r[1], successes: r[2], failures: r[3], lastStep: r[4], rollouts: r[5], rewardSum: r[6],
    correctCount: r[7], correctTokens: r[8], wrongCount: r[9], wrongTokens: r[10],
    ...(r[11] === null ? {} : { priorPassRate: r[11] }),
    ...(r[12] === null ? {} : { priorSamples: r[12] }),
  }));
  const meta = db.prepare("SELECT value FROM meta WHERE key = 'last_step'").pluck().get() as string | undefined;
  db.close();
  return snapshotOf(states, meta === undefined ? null : Number(meta));
}

/** Same fields, same order, same numbers (Object.is: -0 and 0 differ). */
function sameState(a: PromptState | undefined, b: PromptState | undefined, what: string): void {
  expect(a === undefined, what).toBe(b === undefined);
  if (a === undefined || b === undefined) return;
  expect(Object.keys(a), what).toEqual(Object.keys(b));
  for (const key of Object.keys(a) as (keyof PromptState)[]) {
    if (typeof a[key] === 'number') expect(Object.is(a[key], b[key]), `${what}.${key}: ${String(a[key])} vs ${String(b[key])}`).toBe(true);
    else expect(a[key], `${what}.${key}`).toStrictEqual(b[key]);
  }
}

/**
 * The same values field by field, where a field absent from one is undefined in the other:
 * eachOf's state (one object a call, StateSnapshot.eachOf) has the hint fields always, get's
 * only when set.
 */
function sameValues(a: PromptState | undefined, b: PromptState | undefined, what: string): void {
  expect(a === undefined, what).toBe(b === undefined);
  if (a === undefined || b === undefined) return;
  for (const key of new Set([...Object.keys(a), ...Object.keys(b)]) as Set<keyof PromptState>) {
    if (typeof a[key] === 'number') expect(Object.is(a[key], b[key]), `${what}.${key}: ${String(a[key])} vs ${String(b[key])}`).toBe(true);
    else expect(a[key], `${what}.${key}`).toStrictEqual(b[key]);
  }
}

function sameSnapshot(fast: StateSnapshot, slow: StateSnapshot, ids: readonly string[], groups: readonly string[]): void {
  expect(fast.lastStep).toBe(slow.lastStep);
  expect(fast.all).toStrictEqual(slow.all);
  for (const g of [...groups, 'no-such-group']) expect(fast.group(g), g).toStrictEqual(slow.group(g));
  for (const id of [...ids, 'no-such-id', '']) {
    sameState(fast.get(id), slow.get(id), id);
    sameState(fast.get(id, fnv1a(id)), slow.get(id), id);
  }
  // Many ids at once (the planner's lookup): every item once, in order, each the state `get`
  // gives; in an order other than the rows', with ids not there and repeats, over blocks.
  if (fast.eachOf !== undefined) {
    const random = seedrandom(`eachOf ${ids.length}`);
    const items = [...ids, ...ids.slice(0, 40), 'no-such-id', '', ...ids.map((id) => `${id}-not-there`)].map((id) => ({ id }));
    for (let i = items.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [items[i], items[j]] = [items[j]!, items[i]!];
    }
    const seen: number[] = [];
    fast.eachOf(items, Uint32Array.from(items, (item) => fnv1a(item.id)), (i, state) => {
      seen.push(i);
      sameValues(state, slow.get(items[i]!.id), `eachOf ${items[i]!.id}`);
    });
    expect(seen).toEqual(items.map((_, i) => i));
  }
  const [a, b] = [fast.states!(), slow.states!()];
  expect(a.length).toBe(b.length);
  a.forEach((s, k) => sameState(s, b[k], `states()[${k}]`));
  const [h, i] = [fast.hinted!(), slow.hinted!()];
  expect(h.length).toBe(i.length);
  h.forEach((s, k) => sameState(s, i[k], `hinted()[${k}]`));
}

const TRICKY_IDS = ['plain', 'é-ü', '😀 emoji', 'a\nb', 'quote"back\\slash', 'nul\u0000x', 'tab\tx', ' ', '\u2028', '𝒳'.repeat(40)];

/** Random rows: decayed (fractional) evidence, groups or none, hints or none, unobserved (meta-only) prompts. */
function randomRows(seed: string, count: number): Row[] {
  const random = seedrandom(seed);
  const groups = [null, null, 'math', 'code', 'ünïcode group', 'g"q'];
  return Array.from({ length: count }, (_, k): Row => {
    const id = k < TRICKY_IDS.length ? TRICKY_IDS[k]! : `p-${k}-${Math.floor(random() * 1e9)}`;
    const group = groups[Math.floor(random() * groups.length)]!;
    const unobserved = random() < 0.1;
    const decay = random() < 0.5 ? 1 : 0.9 ** Math.floor(random() * 20);
    const successes = unobserved ? 0 : Math.floor(random() * 30) * decay;
    const failures = unobserved ? 0 : Math.floor(random() * 30) * decay + (random() < 0.1 ? 1e-300 : 0);
    const rollouts = unobserved ? 0 : Math.floor(random() * 60);
    const correct = Math.floor(random() * rollouts);
    const hint = random() < 0.3 ? random() : null;
    const samples = hint !== null && random() < 0.5 ? Math.floor(random() * 100) : null;
    return [id, group, successes, failures, unobserved ? -1 : Math.floor(random() * 50), rollouts, successes + 0.5, correct,
      correct * 377.25, rollouts - correct, (rollouts - correct) * 901, hint, samples];
  });
}

describe('the columnar snapshot of a SQLite state', () => {
  it('equals the row path on tricky states: unicode and escaped ids, groups, hints, decayed counts, unobserved prompts', () => {
    let compared = 0;
    for (const [seed, count, lastStep] of [['a', 400, undefined], ['b', 1500, 61], ['c', TRICKY_IDS.length, 3]] as const) {
      const rows = randomRows(seed, count);
      const path = stateFile(rows, lastStep);
      const store = new SqliteStore(path);
      const fast = store.snapshot();
      store.close();
      // The columns make a state on each lookup; the row path keeps one object a prompt.
      expect(fast.get(rows[0]![0])).not.toBe(fast.get(rows[0]![0]));
      sameSnapshot(fast, rowSnapshot(path), rows.map((r) => r[0]), ['math', 'code', 'ünïcode group', 'g"q']);
      compared += rows.length;
    }
    expect(compared).toBeGreaterThan(1900);
  });

  it('without a last step in meta, lastStep is the latest of the prompts with rollouts: a prompt only planned, at a later step, does not count', () => {
    const rows = randomRows('latest', 200);
    const observed = rows.filter((r) => r[5] > 0);
    expect(observed.length).toBeGreaterThan(10);
    const latest = Math.max(...observed.map((r) => r[4]));
    rows[120] = [rows[120]![0], null, 0, 0, latest + 50, 0, 0, 0, 0, 0, 0, null, null]; // planned only
    const path = stateFile(rows);
    const store = new SqliteStore(path);
    const fast = store.snapshot();
    store.close();
    sameSnapshot(fast, rowSnapshot(path), rows.map((r) => r[0]), ['math', 'code']);
    expect(fast.lastStep).toBe(Math.max(...rows.filter((r) => r[5] > 0).map((r) => r[4])));
  });

  it('an empty state: no prompts, lastStep null', () => {
    const path = stateFile([]);
    const store = new SqliteStore(path);
    const fast = store.snapshot();
    store.close();
    sameSnapshot(fast, rowSnapshot(path), [], []);
    expect(fast.lastStep).toBeNull();
  });

  // Rows the columns cannot keep exactly: the snapshot is read the careful way, with the same result.
  for (const [what, bad] of [
    ['rollouts beyond 32 bits', (r: Row) => { r[5] = 2 ** 40; }],
    ['a negative last step beyond 32 bits', (r: Row) => { r[4] = -(2 ** 33); }],
    ['a fractional count in an integer column', (r: Row) => { r[7] = 2.5; }],
    ['text in a number column', (r: Row) => { r[2] = 'many' as unknown as number; }],
    ['a blob as the group', (r: Row) => { r[1] = Buffer.from('g') as unknown as string; }],
  ] as const) {
    it(`falls back to the row path on ${what}`, () => {
      const rows = randomRows(`fallback ${what}`, 300);
      bad(rows[150]!);
      const path = stateFile(rows);
      const store = new SqliteStore(path);
      const slowPath = store.snapshot();
      store.close();
      expect(slowPath.get(rows[0]![0])).toBe(slowPath.get(rows[0]![0]));
      sameSnapshot(slowPath, rowSnapshot(path), rows.map((r) => r[0]), ['math', 'code']);
    });
  }

  it('rows in the table order, also after updates, deletes and a vacuum', () => {
    const rows = randomRows('order', 600);
    const path = stateFile(rows);
    const db = new (SqliteStore.driver())(path);
    db.prepare('DELETE FROM prompts WHERE rowid % 7 = 0').run();
    db.prepare("UPDATE prompts SET successes = successes + 0.1, grp = 'math' WHERE rowid % 5 = 0").run();
    db.prepare("INSERT INTO prompts (id, grp, successes, failures, last_step, rollouts, reward_sum, correct_count, correct_tokens, wrong_count, wrong_tokens) VALUES ('a-late', 'code', 0.3, 0.7, 2, 1, 0.3, 0, 0, 1, 10)").run();
    db.exec('VACUUM');
    db.close();
    const store = new SqliteStore(path);
    const fast = store.snapshot();
    store.close();
    sameSnapshot(fast, rowSnapshot(path), [...rows.map((r) => r[0]), 'a-late'], ['math', 'code']);
  });
});

// The CLI's plan reads a large state in another thread while it reads the prompts
// (store/scan-ahead.ts, store/scan-thread.ts): the columns cross threads as buffers and must
// give the snapshot the store's own read gives; anything the thread cannot read gives
// undefined, and the store reads the state itself.
describe('a state read ahead by another thread', () => {
  const ahead = (path: string) => readStateAhead(path, MMAP_BYTES, 0);

  it('gives the row path\'s snapshot, unicode ids and groups included, and the store plans on it', async () => {
    let compared = 0;
    for (const [seed, count, lastStep] of [['ahead a', 3000, 17], ['ahead b', TRICKY_IDS.length, undefined]] as const) {
      const rows = randomRows(seed, count);
      const path = stateFile(rows, lastStep);
      const read = ahead(path);
      expect(read).toBeDefined();
      const scanned = await read!.result;
      expect(scanned).toBeDefined();
      sameSnapshot(scanned!.columns.snapshot(scanned!.lastStep), rowSnapshot(path), rows.map((r) => r[0]), ['math', 'code', 'ünïcode group', 'g"q']);
      // SqliteStore.useScan: the next full snapshot is the scan (a lookup makes a new object
      // each time, as the store's own columns do), the one after is read again.
      const store = new SqliteStore(path);
      store.useScan(scanned!);
      const used = store.snapshot();
      expect(used.get(rows[0]![0])).toStrictEqual(store.snapshot().get(rows[0]![0]));
      store.close();
      compared += rows.length;
    }
    expect(compared).toBeGreaterThan(3000);
  });

  it('the store uses a scan once, as it was read: a write after it shows in the next snapshot only', async () => {
    const rows = randomRows('ahead once', 50);
    const path = stateFile(rows, 4);
    const scanned = await ahead(path)!.result;
    const db = new (SqliteStore.driver())(path);
    db.prepare("UPDATE prompts SET successes = 1234.5 WHERE id = ?").run(rows[20]![0]);
    db.close();
    const store = new SqliteStore(path);
    store.useScan(scanned!);
    expect(store.snapshot().get(rows[20]![0])!.successes).toBe(rows[20]![2]);
    expect(store.snapshot().get(rows[20]![0])!.successes).toBe(1234.5);
    store.close();
  });

  const unreadable: [string, () => string][] = [
    ['a row the columns cannot hold', () => {
      const rows = randomRows('ahead bad row', 200);
      rows[100]![5] = 2 ** 40;
      return stateFile(rows);
    }],
    ['a state written before the prior columns existed', () => {
      const path = join(tempDir('rb-ahead-old-'), 'old.db');
      const db = new (SqliteStore.driver())(path);
      db.exec(`CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE prompts (id TEXT PRIMARY KEY, grp TEXT, successes REAL NOT NULL, failures REAL NOT NULL, last_step INTEGER NOT NULL, rollouts INTEGER NOT NULL,
          reward_sum REAL NOT NULL, correct_count INTEGER NOT NULL, correct_tokens REAL NOT NULL, wrong_count INTEGER NOT NULL, wrong_tokens REAL NOT NULL);
        INSERT INTO prompts VALUES ('a', NULL, 1, 2, 0, 3, 1, 1, 10, 2, 20);`);
      db.close();
      return path;
    }],
    ['a SQLite file without a prompts table', () => {
      const path = join(tempDir('rb-ahead-other-'), 'other.db');
      const db = new (SqliteStore.driver())(path);
      db.exec('CREATE TABLE t (x)');
      db.close();
      return path;
    }],
    ['a file that is not SQLite', () => {
      const path = join(tempDir('rb-ahead-text-'), 'notes.txt');
      writeFileSync(path, 'not a database\n'.repeat(1000));
      return path;
    }],
  ];
  it.each(unreadable)('%s: undefined, and the file unchanged', async (_, make) => {
    const path = make();
    const before = readFileSync(path);
    const read = ahead(path);
    expect(read).toBeDefined();
    expect(await read!.result).toBeUndefined();
    expect(readFileSync(path).equals(before)).toBe(true);
  });

  it('a state left with its WAL (a writer killed before a checkpoint): reads the WAL\'s rows and writes nothing', async () => {
    const rows = randomRows('ahead wal', 400);
    const live = stateFile(rows.slice(0, 300), 3);
    // A writer in WAL mode commits the last 100 rows and, before it closes (which would
    // checkpoint them into the file), its files are copied: what a kill -9 leaves behind.
    const writer = new (SqliteStore.driver())(live);
    writer.pragma('journal_mode = WAL');
    writer.pragma('wal_autocheckpoint = 0');
    const insert = writer.prepare(`INSERT INTO prompts (${COLUMNS}) VALUES (${COLUMNS.split(', ').map(() => '?').join(', ')})`);
    writer.transaction(() => {
      for (const row of rows.slice(300)) insert.run(...row);
      writer.prepare("UPDATE meta SET value = '4' WHERE key = 'last_step'").run();
    })();
    const path = join(tempDir('rb-ahead-wal-'), 'state.db');
    copyFileSync(live, path);
    copyFileSync(`${live}-wal`, `${path}-wal`);
    writer.close();
    const before = [readFileSync(path), readFileSync(`${path}-wal`)];
    expect(before[1]!.length).toBeGreaterThan(0);
    const scanned = await ahead(path)!.result;
    expect(scanned).toBeDefined();
    // The thread's connection is read-only: a read-write one, the last to close, would have
    // checkpointed the WAL into the file and removed it.
    expect(readFileSync(path).equals(before[0]!)).toBe(true);
    expect(readFileSync(`${path}-wal`).equals(before[1]!)).toBe(true);
    expect(scanned!.lastStep).toBe(4);
    sameSnapshot(scanned!.columns.snapshot(scanned!.lastStep), rowSnapshot(path), rows.map((r) => r[0]), ['math', 'code', 'ünïcode group', 'g"q']);
  });

  it('starts nothing for :memory:, a missing file, or a file under the size given', () => {
    const dir = tempDir('rb-ahead-none-');
    expect(readStateAhead(':memory:', MMAP_BYTES, 0)).toBeUndefined();
    expect(readStateAhead(join(dir, 'missing.db'), MMAP_BYTES, 0)).toBeUndefined();
    const small = stateFile(randomRows('ahead small', 10));
    expect(readStateAhead(small, MMAP_BYTES, 1 << 30)).toBeUndefined();
  });
});
