import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { batchOf, fileResultSource, PostgresStore, SqliteStore, type DecayOptions, type PromptState } from '../src/index.js';
import { dropPgSchema, freshPgUrl, pgUrl } from './service-helpers.js';
import { tempDir } from './temp.js';

/**
 * Observe's writes to PostgreSQL (store/postgres.ts applySource): a prompt without a row is
 * inserted with its first step's evidence, one that has a row (or that another writer inserts
 * meanwhile) is locked and upserted. Each path must store what SQLite stores. A chunk's keys
 * are claimed while the next chunk is read.
 */
const decay: DecayOptions = { forgetPerStep: 0.9, reobserveDiscount: 0.8 };

/** Rollouts over prompts n0..n5, two steps each for some, groups and a hint on some lines. */
function results(tag: string): unknown[] {
  return Array.from({ length: 60 }, (_, i) => ({
    prompt_id: `n${i % 6}`,
    step: 3 + (i % 4 === 0 ? 1 : 0),
    reward: (i % 5) / 4,
    tokens: 100 + i,
    ...(i % 7 === 0 ? { group: `g${i % 2}` } : {}),
    rollout_id: `${tag}-${i}`,
  }));
}

function same(a: PromptState | undefined, b: PromptState | undefined, id: string): void {
  expect(b, id).toBeDefined();
  for (const k of ['group', 'lastStep', 'rollouts', 'correctCount', 'wrongCount', 'priorPassRate', 'priorSamples'] as const) expect(b![k], `${id}.${k}`).toBe(a![k]);
  for (const k of ['successes', 'failures', 'rewardSum', 'correctTokens', 'wrongTokens'] as const) expect(Math.abs(b![k] - a![k]), `${id}.${k}`).toBeLessThan(1e-9);
}

const url = pgUrl();
describe.skipIf(url === undefined)('observe into PostgreSQL: new and existing prompts', () => {
  it('stores what SQLite stores for new prompts, prompts with evidence, and planned-only prompts (a second batch, steps earlier and later)', async () => {
    const schemaUrl = freshPgUrl(url!);
    const store = await PostgresStore.connect(schemaUrl);
    const lite = new SqliteStore(':memory:');
    try {
      const meta = [{ id: 'n5', group: 'g9', priorPassRate: 0.25, priorSamples: 4 }];
      await store.recordPrompts(meta);
      lite.recordPrompts(meta);
      const first = batchOf(results('a'));
      const second = batchOf(results('b').map((r, i) => ({ ...(r as object), prompt_id: `n${(i % 9) + 2}`, step: 1 + (i % 5) })));
      for (const b of [first, second]) expect(await store.apply(b, decay)).toEqual(lite.apply(b, decay));
      for (let p = 0; p < 11; p++) same(lite.get(`n${p}`), await store.get(`n${p}`), `n${p}`);
      const [a, b] = [lite.snapshot(), await store.snapshot(['n0'], ['g0', 'g1', 'g9'])];
      for (const k of ['count', 'sumRate', 'correctTokens', 'wrongCount'] as const) expect(Math.abs(b.all[k] - a.all[k])).toBeLessThan(1e-9);
    } finally {
      lite.close();
      await store.close();
      await drop(schemaUrl);
    }
  });

  it('writes more prompts than one statement holds (WRITE_ROWS, 10,000) in several, new and then observed again', async () => {
    const schemaUrl = freshPgUrl(url!);
    const store = await PostgresStore.connect(schemaUrl);
    const lite = new SqliteStore(':memory:');
    try {
      const many = (step: number) => batchOf(Array.from({ length: 25_000 }, (_, i) => ({ prompt_id: `m${i}`, step, reward: (i % 3) / 2, tokens: i % 500 })));
      for (const b of [many(1), many(4)]) expect(await store.apply(b, decay)).toEqual(lite.apply(b, decay));
      expect(await store.count()).toBe(25_000);
      for (const p of [0, 9_999, 10_000, 19_999, 20_000, 24_999]) same(lite.get(`m${p}`), await store.get(`m${p}`), `m${p}`);
      const [a, b] = [lite.snapshot(), await store.snapshot(['m0'])];
      for (const k of ['count', 'sumRate', 'sumRate2', 'correctTokens', 'wrongCount'] as const) expect(Math.abs(b.all[k] - a.all[k])).toBeLessThan(1e-9 * Math.max(1, a.all[k]));
    } finally {
      lite.close();
      await store.close();
      await drop(schemaUrl);
    }
  });

  it('a new prompt that another transaction inserts meanwhile is waited for, then locked, read and upserted (not lost, not doubled)', async () => {
    const schemaUrl = freshPgUrl(url!);
    const schema = new URL(schemaUrl).searchParams.get('schema')!;
    const store = await PostgresStore.connect(schemaUrl);
    const lite = new SqliteStore(':memory:');
    const other = new pg.Client({ connectionString: url });
    await other.connect();
    try {
      // The other transaction writes what recordPrompts writes for a planned-only prompt (zero
      // evidence, so the pooled rows stay right), and commits only after observe has found no row.
      await other.query('BEGIN');
      await other.query(`INSERT INTO "${schema}".prompts (id, grp, successes, failures, last_step, rollouts, reward_sum, correct_count, correct_tokens, wrong_count, wrong_tokens)
        VALUES ('n2', 'g7', 0, 0, -1, 0, 0, 0, 0, 0, 0)`);
      const batch = batchOf(results('c'));
      const applying = store.apply(batch, decay);
      let waited = false;
      for (let k = 0; k < 100 && !waited; k++) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        const { rows } = await other.query(`SELECT count(*)::int AS n FROM pg_locks w WHERE NOT w.granted AND w.transactionid =
          (SELECT transactionid FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'transactionid' AND granted)`);
        waited = rows[0].n > 0;
      }
      expect(waited).toBe(true); // observe's insert of n2 waits for this transaction
      await other.query('COMMIT');
      const got = await applying;
      lite.recordPrompts([{ id: 'n2', group: 'g7' }]);
      expect(got).toEqual(lite.apply(batch, decay));
      for (let p = 0; p < 6; p++) same(lite.get(`n${p}`), await store.get(`n${p}`), `n${p}`);
      const [a, b] = [lite.snapshot(), await store.snapshot(['n0'], ['g0', 'g1', 'g7'])];
      for (const k of ['count', 'sumRate', 'sumRate2', 'correctTokens', 'wrongCount'] as const) expect(Math.abs(b.all[k] - a.all[k])).toBeLessThan(1e-9);
      for (const g of ['g0', 'g1']) for (const k of ['count', 'sumRate', 'correctCount'] as const) expect(Math.abs(b.group(g)![k] - a.group(g)![k])).toBeLessThan(1e-9);
      expect(b.group('g7')?.count ?? 0).toBe(0); // n2 left g7 for its results' group
    } finally {
      await other.end();
      lite.close();
      await store.close();
      await drop(schemaUrl);
    }
  });
});

describe.skipIf(url === undefined)('observe into PostgreSQL: claims sent while the next chunk is read', () => {
  it('a bad line in a late chunk, read while an earlier chunk\'s claim runs, applies nothing (no prompt, no key); the good file then applies whole', async () => {
    const dir = tempDir('rb-pg-writes-');
    const lines = Array.from({ length: 400 }, (_, i) => JSON.stringify({ prompt_id: `p${i % 17}`, step: 2, reward: i % 2, rollout_id: `id-"${i}"\\` }));
    const good = join(dir, 'good.jsonl');
    const bad = join(dir, 'bad.jsonl');
    writeFileSync(good, `${lines.join('\n')}\n`);
    writeFileSync(bad, `${[...lines.slice(0, 390), '{"prompt_id":"p1","reward":2}', ...lines.slice(390)].join('\n')}\n`);
    const schemaUrl = freshPgUrl(url!);
    const store = await PostgresStore.connect(schemaUrl);
    const lite = new SqliteStore(':memory:');
    try {
      await expect(store.applySource(fileResultSource(bad, bad, 1024), decay)).rejects.toThrow(`${bad}:391`);
      expect(await store.count()).toBe(0);
      const again = await store.applySource(fileResultSource(good, good, 1024), decay);
      expect(again).toEqual(lite.applySource(fileResultSource(good, good, 1024), decay));
      expect(again).toMatchObject({ applied: 400, duplicates: 0 });
      expect(await store.applySource(fileResultSource(good, good, 1024), decay)).toMatchObject({ applied: 0, duplicates: 400 });
      for (let p = 0; p < 17; p++) same(lite.get(`p${p}`), await store.get(`p${p}`), `p${p}`);
    } finally {
      lite.close();
      await store.close();
      await drop(schemaUrl);
    }
  });
});

const drop = (schemaUrl: string) => dropPgSchema(url!, schemaUrl);

describe.skipIf(url === undefined)('plans and observes of the same prompts at once, from two stores (two services)', () => {
  it('never deadlock (the record locked in another order than observe: 48 deadlocks in 100 rounds), and the pooled rows match the prompts', async () => {
    const schemaUrl = freshPgUrl(url!);
    const schema = new URL(schemaUrl).searchParams.get('schema')!;
    const admin = new pg.Client({ connectionString: url! });
    await admin.connect();
    const deadlocks = async () => Number((await admin.query('SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()')).rows[0].deadlocks);
    const before = await deadlocks();
    const a = await PostgresStore.connect(schemaUrl);
    const b = await PostgresStore.connect(schemaUrl);
    try {
      let step = 0;
      for (let r = 0; r < 30; r++) {
        // Half the prompts there already, half new, so each side's lock and insert phases interleave.
        const ids = Array.from({ length: 40 }, (_, i) => `r${r}_${String(i).padStart(2, '0')}`);
        await a.apply(batchOf(ids.filter((_, i) => i % 2 === 0).map((id) => ({ prompt_id: id, step, reward: 1, rollout_id: `${id}#pre`, group: 'g' }))), decay);
        step++;
        await Promise.all([
          b.recordPrompts(ids.map((id) => ({ id, group: 'g', priorPassRate: 0.5 }))),
          a.apply(batchOf(ids.map((id) => ({ prompt_id: id, step, reward: 0, rollout_id: `${id}#obs`, group: 'g' }))), decay),
        ]);
        step++;
      }
    } finally {
      await a.close(); // a backend's statistics are flushed when it ends
      await b.close();
    }
    try {
      await new Promise((r) => setTimeout(r, 300));
      expect(await deadlocks() - before).toBe(0);
      const pooled = await admin.query<{ scope: string; count: number }>(`SELECT scope, count::float8 AS count FROM "${schema}".pooled ORDER BY scope`);
      expect(pooled.rows.map((r) => [r.scope, r.count])).toEqual([['all', 1200], ['group:g', 1200]]);
    } finally {
      await admin.end();
      await drop(schemaUrl);
    }
  }, 120_000);
});

describe.skipIf(url === undefined)('a plan recording a new prompt while an observe inserts it', () => {
  it('counts the prompt once in the pooled rows (it was counted twice: 2,024 prompts of 1,600 under two services)', async () => {
    // The observe inserts X, then waits for the pooled rows another session holds; the plan's
    // record of X's group starts then. Its lock could not see the uncommitted insert, its upsert
    // waited for it and returned X with the observe's evidence, and that evidence was added to
    // the pooled rows again.
    const schemaUrl = freshPgUrl(url!);
    const schema = new URL(schemaUrl).searchParams.get('schema')!;
    const store = await PostgresStore.connect(schemaUrl);
    const other = new pg.Client({ connectionString: url! });
    await other.connect();
    try {
      await store.apply(batchOf([{ prompt_id: 'seed', step: 1, reward: 1, rollout_id: 's1', group: 'g' }]), decay);
      await other.query('BEGIN');
      await other.query(`SELECT scope FROM "${schema}".pooled FOR UPDATE`);
      const observe = store.apply(batchOf([{ prompt_id: 'X', step: 2, rewards: [1, 0, 1, 1], group: 'g' }]), decay);
      await new Promise((r) => setTimeout(r, 500));
      const record = store.recordPrompts([{ id: 'X', group: 'g' }]);
      await new Promise((r) => setTimeout(r, 500));
      await other.query('COMMIT');
      await Promise.all([observe, record]);
      const pooled = await other.query<{ scope: string; count: number }>(`SELECT scope, count FROM "${schema}".pooled ORDER BY scope`);
      expect(pooled.rows.map((r) => [r.scope, Number(r.count)])).toEqual([['all', 2], ['group:g', 2]]);
      expect(await store.count()).toBe(2);
      expect((await store.get('X'))!.rollouts).toBe(4);
    } finally {
      await other.query('ROLLBACK').catch(() => undefined);
      await other.end();
      await store.close();
      await drop(schemaUrl);
    }
  });
});
