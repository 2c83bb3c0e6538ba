import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Database } from './sqlite.js';
import pg from 'pg';
import seedrandom from 'seedrandom';
import { afterAll, describe, expect, it } from 'vitest';
import {
  asyncStoreOf, batchOf, createRegistries, planStep, SqliteStore, snapshotOf, type AsyncStore, type GroupStats, type PromptState,
} from '../src/index.js';
import { metaChanges, snapshotWithMeta, type PromptMeta } from '../src/store/meta.js';
import { freshPgUrl, pgUrl } from './service-helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'rb-pooled-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A seeded batch: steps out of order, prompts changing group, fractional rewards, tokens, aborts. */
function batch(random: () => number, k: number): unknown[] {
  return Array.from({ length: 40 + Math.floor(random() * 80) }, (_, i) => ({
    prompt_id: `p${Math.floor(random() * 120)}`,
    step: Math.max(0, k + Math.floor(random() * 3) - 1),
    reward: Math.floor(random() * 5) / 4,
    ...(random() < 0.7 ? { tokens: 50 + Math.floor(random() * 900) } : {}),
    ...(random() < 0.3 ? { group: `g${Math.floor(random() * 4)}` } : {}),
    ...(random() < 0.03 ? { finish_reason: 'abort' } : {}),
    rollout_id: `b${k}-${i}`,
  }));
}

/** Pooled figures as the full read computes them (snapshotOf over every prompt). */
function fresh(states: PromptState[], groups: string[]): Map<string, GroupStats> {
  const full = snapshotOf(states);
  return new Map([['all', full.all], ...groups.map((g) => [`group:${g}`, full.group(g)!] as [string, GroupStats])].filter(([, v]) => v !== undefined));
}

const KEYS: (keyof GroupStats)[] = ['count', 'sumRate', 'sumRate2', 'sumNoise', 'correctCount', 'correctTokens', 'wrongCount', 'wrongTokens'];

async function checkAgainstFullRead(store: AsyncStore, label: string): Promise<number> {
  const full = await store.snapshot();
  const states: PromptState[] = [];
  for (let p = 0; p < 120; p++) {
    const s = full.get(`p${p}`);
    if (s !== undefined) states.push(s);
  }
  const groups = ['g0', 'g1', 'g2', 'g3'];
  const partial = await store.snapshot(['p0'], groups);
  const want = fresh(states, groups);
  let compared = 0;
  for (const [scope, w] of want) {
    const got = scope === 'all' ? partial.all : partial.group(scope.slice('group:'.length))!;
    for (const key of KEYS) {
      expect(Math.abs(got[key] - w[key]), `${label} ${scope}.${key}: ${got[key]} vs ${w[key]}`).toBeLessThanOrEqual(1e-9 * Math.max(1, Math.abs(w[key])));
      compared++;
    }
  }
  return compared;
}

/** Metadata records (store/meta.ts) between batches: groups given to observed prompts (moving them), hints. */
function records(random: () => number): PromptMeta[] {
  return Array.from({ length: 5 + Math.floor(random() * 20) }, () => ({
    id: `p${Math.floor(random() * 130)}`,
    ...(random() < 0.6 ? { group: `g${Math.floor(random() * 4)}` } : {}),
    ...(random() < 0.5 ? { priorPassRate: Math.floor(random() * 9) / 8, ...(random() < 0.5 ? { priorSamples: 8 } : {}) } : {}),
  }));
}

async function randomBatches(store: AsyncStore, label: string): Promise<number> {
  const random = seedrandom(`pooled/${label}`);
  let compared = 0;
  for (let k = 0; k < 25; k++) {
    await store.apply(batchOf(batch(random, k)), { forgetPerStep: 0.97, reobserveDiscount: 0.8 });
    await store.recordPrompts(records(random));
    if (k % 6 === 5 || k === 24) compared += await checkAgainstFullRead(store, `${label} batch ${k}`);
  }
  return compared;
}

describe('pooled rows kept by observe (store/pooled.ts)', () => {
  it('SQLite: equal to the sums over every prompt after 25 random batches and metadata records (groups moving, steps out of order)', async () => {
    const compared = await randomBatches(asyncStoreOf(new SqliteStore(':memory:')), 'sqlite');
    expect(compared).toBeGreaterThan(100);
  });

  it('SQLite: a state without pooled rows (written before them) gets them on open, equal to a full read bit for bit', () => {
    const path = join(dir, 'old.db');
    const store = new SqliteStore(path);
    const random = seedrandom('pooled/old');
    for (let k = 0; k < 5; k++) store.apply(batchOf(batch(random, k)), { forgetPerStep: 0.97, reobserveDiscount: 0.8 });
    store.close();
    const db = new Database(path);
    db.exec("DELETE FROM pooled; DELETE FROM meta WHERE key = 'pooled_version'");
    db.close();
    const reopened = new SqliteStore(path);
    const full = reopened.snapshot();
    const partial = reopened.snapshot(['p1'], ['g0', 'g1', 'g2', 'g3']);
    expect(partial.all).toEqual(full.all);
    for (const g of ['g0', 'g1', 'g2', 'g3']) expect(partial.group(g)).toEqual(full.group(g));
    reopened.close();
  });

  it('a plan from the candidates\' rows and the pooled rows allocates as a plan from every prompt', () => {
    const store = new SqliteStore(':memory:');
    const random = seedrandom('pooled/plan');
    for (let k = 0; k < 12; k++) store.apply(batchOf(batch(random, k)), { forgetPerStep: 0.97, reobserveDiscount: 0.8 });
    const registries = createRegistries();
    let planned = 0;
    for (let t = 0; t < 10; t++) {
      const candidates = Array.from({ length: 60 }, (_, i) => ({ id: `p${(i * 7 + t * 13) % 150}`, ...(i % 3 === 0 ? { group: `g${i % 4}` } : {}) }));
      const groups = [...new Set(candidates.flatMap((c) => (c.group === undefined ? [] : [c.group])))];
      const a = planStep(store.snapshot(), candidates, { rollouts: 480 }, { seed: t }, registries);
      const b = planStep(store.snapshot(candidates.map((c) => c.id), groups), candidates, { rollouts: 480 }, { seed: t }, registries);
      expect(b.allocations.map((x) => x.n), `plan ${t}`).toEqual(a.allocations.map((x) => x.n));
      b.allocations.forEach((x, j) => expect(x.p_mean).toBeCloseTo(a.allocations[j]!.p_mean, 12));
      expect(b.step).toBe(a.step);
      planned++;
    }
    expect(planned).toBe(10);
    store.close();
  });

  it('with offline hints and groups given to observed prompts: the partial read (hinted prompts read, rebuilt for the metadata) plans as the full read', () => {
    const store = new SqliteStore(':memory:');
    const random = seedrandom('pooled/hints');
    for (let k = 0; k < 12; k++) {
      store.apply(batchOf(batch(random, k)), { forgetPerStep: 0.97, reobserveDiscount: 0.8 });
      store.recordPrompts(records(random));
    }
    const hinted = store.snapshot().hinted!().length;
    expect(hinted).toBeGreaterThanOrEqual(30); // enough for the pooled hint calibration (hintMinPrompts)
    const registries = createRegistries();
    let regrouped = 0;
    for (let t = 0; t < 10; t++) {
      const candidates = Array.from({ length: 60 }, (_, i) => ({
        id: `p${(i * 7 + t * 13) % 150}`,
        ...(i % 3 === 0 ? { group: `g${(i + t) % 4}` } : {}),
        ...(i % 4 === 1 ? { prior_pass_rate: ((i + t) % 9) / 8 } : {}),
      }));
      const groups = [...new Set(candidates.flatMap((c) => (c.group === undefined ? [] : [c.group])))];
      const full = store.snapshot();
      const partial = store.snapshot(candidates.map((c) => c.id), groups, true);
      const changes = metaChanges(full, candidates);
      regrouped += changes.filter((m) => (full.get(m.id)?.rollouts ?? 0) > 0 && m.group !== undefined && m.group !== full.get(m.id)!.group).length;
      expect(metaChanges(partial, candidates)).toEqual(changes);
      const a = planStep(snapshotWithMeta(full, changes), candidates, { rollouts: 480 }, { seed: t }, registries);
      const b = planStep(snapshotWithMeta(partial, changes), candidates, { rollouts: 480 }, { seed: t }, registries);
      expect(b.allocations.map((x) => x.n), `plan ${t}`).toEqual(a.allocations.map((x) => x.n));
      b.allocations.forEach((x, j) => expect(x.p_mean, `plan ${t} ${x.id}`).toBeCloseTo(a.allocations[j]!.p_mean, 12));
      store.recordPrompts(changes);
    }
    expect(regrouped).toBeGreaterThan(5); // the rebuild of the partial read was exercised
    store.close();
  });
});

const url = pgUrl();
describe.skipIf(url === undefined)('pooled rows on PostgreSQL', () => {
  it('equal to the sums over every prompt after 25 random batches, and built on connect for a state without them', async () => {
    const { PostgresStore } = await import('../src/index.js');
    const schemaUrl = freshPgUrl(url!);
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    const schema = new URL(schemaUrl).searchParams.get('schema')!;
    try {
      const store = await PostgresStore.connect(schemaUrl);
      try {
        expect(await randomBatches(store, 'postgres')).toBeGreaterThan(100);
      } finally {
        await store.close();
      }
      await client.query(`DELETE FROM "${schema}".pooled; DELETE FROM "${schema}".meta WHERE key = 'pooled_version'`);
      const reopened = await PostgresStore.connect(schemaUrl);
      try {
        expect(await checkAgainstFullRead(reopened, 'postgres rebuilt')).toBeGreaterThan(10);
      } finally {
        await reopened.close();
      }
    } finally {
      await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await client.end();
    }
  });
});
