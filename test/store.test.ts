import { spawn } from 'node:child_process';
import { existsSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Database } from './sqlite.js';
import { describe, expect, it } from 'vitest';
import { SqliteStore, addEvidence, batchOf, createAllocator, defaultDecay, parseResults } from '../src/index.js';
import { tempDir } from './temp.js';

const tmp = () => tempDir('rb-store-');

/** Everything in the state as text, for before/after comparisons. */
function dump(path: string): string {
  const db = new Database(path, { readonly: true });
  try {
    const prompts = db.prepare('SELECT * FROM prompts ORDER BY id').all();
    const seen = db.prepare('SELECT COUNT(*) AS n FROM seen').get();
    const meta = db.prepare('SELECT * FROM meta ORDER BY key').all();
    return JSON.stringify({ prompts, seen, meta });
  } finally {
    db.close();
  }
}

describe('SQLite store', () => {
  it('observe is idempotent: the same file, or the same rollout_ids, change nothing the second time', () => {
    const store = new SqliteStore(':memory:');
    const text = '{"prompt_id":"a","step":3,"reward":1,"tokens":100}\n{"prompt_id":"a","step":3,"reward":0,"tokens":300}\n{"prompt_id":"b","step":3,"rewards":[1,0,0],"tokens":[5,6,7]}\n';
    const first = store.apply(parseResults(text, 'r.jsonl'), defaultDecay);
    expect(first).toMatchObject({ applied: 5, duplicates: 0, prompts: 2, last_step: 3 });
    const before = JSON.stringify([store.get('a'), store.get('b')]);
    const again = store.apply(parseResults(text, 'r.jsonl'), defaultDecay);
    expect(again).toMatchObject({ applied: 0, duplicates: 5 });
    expect(JSON.stringify([store.get('a'), store.get('b')])).toBe(before);
    // Same rollout ids in a different file: still nothing.
    const ids = '{"prompt_id":"c","reward":1,"rollout_id":"x1"}\n{"prompt_id":"c","reward":0,"rollout_id":"x2"}\n';
    expect(store.apply(parseResults(ids, 'one.jsonl'), defaultDecay).applied).toBe(2);
    expect(store.apply(parseResults(`\n${ids}`, 'two.jsonl'), defaultDecay)).toMatchObject({ applied: 0, duplicates: 2 });
    expect(store.get('c')!.rollouts).toBe(2);
  });

  it('a new state file has 16 kB pages; one an older version made with 4 kB pages keeps them, with the same rows', () => {
    const dir = tempDir();
    const text = Array.from({ length: 2000 }, (_, i) => JSON.stringify({ prompt_id: `p${i % 150}`, step: i % 3, reward: i % 2, rollout_id: `r${i}` })).join('\n');
    const fresh = join(dir, 'new.db');
    const older = join(dir, 'older.db');
    const db = new Database(older); // as SQLite made it before: its default page size, 4096
    db.pragma('journal_mode = WAL');
    db.exec('CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)'); // an older state's first table; not empty: SQLite keeps its page size
    db.close();
    const rows: string[] = [];
    for (const [path, pageSize] of [[fresh, 16_384], [older, 4096]] as const) {
      const store = new SqliteStore(path);
      store.apply(parseResults(text, 'r.jsonl'), defaultDecay);
      store.close();
      const check = new Database(path, { readonly: true });
      expect(check.pragma('page_size', { simple: true })).toBe(pageSize);
      rows.push(JSON.stringify([check.prepare('SELECT * FROM prompts ORDER BY id').all(), check.prepare('SELECT * FROM seen ORDER BY rollout_id').all()]));
      check.close();
    }
    expect(rows[1]).toBe(rows[0]);
  });

  it('aborted rollouts do not update the pass rate and can still count when they finish later', () => {
    const store = new SqliteStore(':memory:');
    store.apply(batchOf([{ prompt_id: 'a', step: 0, reward: 0, finish_reason: 'abort', rollout_id: 'r1' }]), defaultDecay);
    expect(store.get('a')).toBeUndefined();
    store.apply(batchOf([{ prompt_id: 'a', step: 0, reward: 1, finish_reason: 'stop', rollout_id: 'r1' }]), defaultDecay);
    expect(store.get('a')).toMatchObject({ successes: 1, failures: 0, rollouts: 1 });
  });

  it('applies evidence in step order with both decay scales, whatever the line order', () => {
    const decay = { forgetPerStep: 0.9, reobserveDiscount: 0.5 };
    const lines = [
      { prompt_id: 'a', step: 4, reward: 1 },
      { prompt_id: 'a', step: 1, reward: 0 },
      { prompt_id: 'a', step: 1, reward: 1 },
    ];
    const store = new SqliteStore(':memory:');
    store.apply(batchOf(lines), decay);
    // Step 1: s=1, f=1. Step 4: old · 0.9^3 · 0.5 + new.
    const k = 0.9 ** 3 * 0.5;
    expect(store.get('a')!.successes).toBeCloseTo(1 * k + 1, 12);
    expect(store.get('a')!.failures).toBeCloseTo(1 * k, 12);
    expect(store.get('a')!.lastStep).toBe(4);
    // A late result for step 2 is added, discounted by its age, without moving last_step.
    store.apply(batchOf([{ prompt_id: 'a', step: 2, reward: 0 }]), decay);
    expect(store.get('a')!.failures).toBeCloseTo(k + 0.9 ** 2, 12);
    expect(addEvidence(decay, { successes: 1, failures: 1, lastStep: 1 }, 4, 1, 0).successes).toBeCloseTo(k + 1, 12);
  });

  it('a batch with one bad line applies nothing', () => {
    const dir = tmp();
    const path = join(dir, 's.db');
    const allocator = createAllocator({ state: path });
    allocator.observe([{ prompt_id: 'a', reward: 1 }]);
    allocator.close();
    const before = dump(path);
    const again = createAllocator({ state: path });
    expect(() => again.observe([{ prompt_id: 'b', reward: 1 }, { prompt_id: 'c', reward: 2 }])).toThrow(/results\[1\]: "reward" must be a number in \[0, 1\], got 2/);
    again.close();
    expect(dump(path)).toBe(before);
  });

  it('kill -9 at any point of observe leaves the state as before or as after, never between', async () => {
    const dir = tmp();
    const path = join(dir, 's.db');
    const lines: string[] = [];
    for (let i = 0; i < 120_000; i++) lines.push(JSON.stringify({ prompt_id: `p${i % 5000}`, step: 1 + (i % 7), reward: i % 3 === 0 ? 1 : 0, tokens: 100 + (i % 50) }));
    const results = join(dir, 'big.jsonl');
    writeFileSync(results, `${lines.join('\n')}\n`);
    const cli = join(import.meta.dirname, '..', 'bin', 'rollout-budget.js');
    const runObserve = () => spawn(process.execPath, [cli, 'observe', '--results', results, '--state', path], { stdio: 'ignore' });
    // "after": the same observe run to completion on a copy.
    const clean = join(dir, 'clean.db');
    await new Promise<void>((resolve, reject) => {
      const p = spawn(process.execPath, [cli, 'observe', '--results', results, '--state', clean], { stdio: 'ignore' });
      p.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`observe exited ${code}`))));
    });
    const after = dump(clean);
    createAllocator({ state: path }).close();
    const before = dump(path);
    expect(after).not.toBe(before);
    const outcomes = { before: 0, after: 0 };
    for (const delay of [150, 400, 700, 1000, 1400, 1900, 2600]) {
      const child = runObserve();
      const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
      await new Promise((r) => setTimeout(r, delay));
      child.kill('SIGKILL');
      await exited;
      const now = dump(path);
      expect([before, after]).toContain(now);
      if (now === before) outcomes.before++;
      else {
        outcomes.after++;
        break;
      }
    }
    // A kill aimed inside the write transaction: the WAL file grows only while it runs.
    let midTransaction = 0;
    for (let attempt = 0; attempt < 3 && midTransaction === 0; attempt++) {
      const fresh = join(dir, `fresh${attempt}.db`);
      const wal = `${fresh}-wal`;
      const walSize = () => (existsSync(wal) ? statSync(wal).size : 0);
      createAllocator({ state: fresh }).close();
      const state0 = dump(fresh);
      const size0 = walSize();
      const child = spawn(process.execPath, [cli, 'observe', '--results', results, '--state', fresh], { stdio: 'ignore' });
      const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
      let running = true;
      void exited.then(() => (running = false));
      while (running && walSize() <= size0) await new Promise((r) => setTimeout(r, 2));
      if (running) {
        child.kill('SIGKILL');
        midTransaction++;
      }
      await exited;
      const now = dump(fresh);
      expect([state0, after]).toContain(now);
      if (now === state0) outcomes.before++;
    }
    expect(midTransaction).toBeGreaterThanOrEqual(1);
    expect(outcomes.before).toBeGreaterThanOrEqual(1);
    console.log(`kill -9 during observe: ${outcomes.before} kills left the state as before, ${outcomes.after} as after`);
  });
});

/**
 * A SQLite file that is not a state. Another program's database given as --state was given a
 * state's tables beside its own and switched to WAL; a state a newer release marked as a later
 * format was read as if this release knew it.
 */
describe('SQLite files that are not a state of this format', () => {
  it('another program\'s database is refused by observe, plan, inspect and execute, and left byte for byte as it was', async () => {
    const { cli } = await import('./cli-helpers.js');
    const { readFileSync, readdirSync } = await import('node:fs');
    const dir = tmp();
    const foreign = join(dir, 'app.db');
    const db = new Database(foreign);
    db.exec("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO users VALUES (1, 'ada')");
    db.close();
    const bytes = readFileSync(foreign);
    writeFileSync(join(dir, 'r.jsonl'), '{"prompt_id":"a","step":0,"rewards":[1,0]}\n');
    writeFileSync(join(dir, 'p.jsonl'), '{"id":"a"}\n');
    const message = `rollout-budget: ${foreign}: a SQLite database of another program (its tables: users), not a rollout-budget state; it was left as it was: give another --state path\n`;
    for (const argv of [
      ['observe', '--results', join(dir, 'r.jsonl'), '--state', foreign],
      ['plan', '--prompts', join(dir, 'p.jsonl'), '--state', foreign, '--budget-rollouts', '4'],
      ['inspect', '--state', foreign],
    ]) {
      const r = await cli(argv);
      expect(r.code, argv[0]).toBe(2);
      expect(r.stderr, argv[0]).toBe(message);
    }
    const { PartialStore } = await import('../src/executor/partials.js');
    expect(() => new PartialStore(foreign)).toThrow(`${foreign}: a SQLite database of another program`);
    expect(readFileSync(foreign).equals(bytes)).toBe(true);
    expect(readdirSync(dir).sort()).toEqual(['app.db', 'p.jsonl', 'r.jsonl']);
  });

  it('a state is marked format 1; one of a later format is refused, an unmarked one (made before the mark) is read and marked', async () => {
    const dir = tmp();
    const path = join(dir, 'state.db');
    const store = new SqliteStore(path);
    store.apply(batchOf([{ prompt_id: 'a', step: 0, reward: 1 }]), defaultDecay);
    store.close();
    const version = (set?: number) => {
      const db = new Database(path);
      if (set !== undefined) db.pragma(`user_version = ${set}`);
      const v = db.pragma('user_version', { simple: true });
      db.close();
      return v;
    };
    expect(version()).toBe(1);
    version(0);
    const older = new SqliteStore(path);
    expect(older.get('a')).toMatchObject({ successes: 1, rollouts: 1 });
    older.close();
    expect(version()).toBe(1);
    version(2);
    expect(() => new SqliteStore(path)).toThrow(`${path}: a state of format 2, made by a newer rollout-budget (this one reads format 1 and older): upgrade rollout-budget to use it`);
    expect(version()).toBe(2);
  });
});
