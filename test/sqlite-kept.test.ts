// Node 24 aborts (SIGABRT, exit 134) when V8 collects a better-sqlite3 Database, Statement or
// iterator outside a context (store/sqlite-kept.ts), so the driver's connections and statements
// are never let go. These tests hold that on any Node: what the driver makes is kept, what would
// make garbage of its own is refused, and a service's requests do not add kept objects (no
// statement prepared per request). test/package.test.ts runs the installed CLI on Node 24 where
// CI provides one.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { AsyncAllocator, PartialStore, Service, SqliteStore, asyncStoreOf } from '../src/index.js';
import { sqliteDriver } from '../src/store/sqlite-driver.js';
import { keptObjects } from '../src/store/sqlite-kept.js';
import { tempDir } from './temp.js';

describe('better-sqlite3 objects kept for the process (store/sqlite-kept.ts)', () => {
  it('keeps each connection and statement the driver makes, and refuses pragma() and iterate()', () => {
    const driver = sqliteDriver();
    const before = keptObjects();
    const db = new driver.Database(':memory:', driver.options);
    try {
      expect(keptObjects()).toBe(before + 1);
      const statement = db.prepare('SELECT 40 + 2 AS v');
      expect(keptObjects()).toBe(before + 2);
      expect(statement.get()).toEqual({ v: 42 });
      expect(() => statement.iterate()).toThrow(/iterate\(\) makes an iterator a call.*use all\(\)/);
      expect(() => db.pragma('user_version')).toThrow(/pragma\(\) prepares a statement a call.*use exec\('PRAGMA …'\)/);
      db.exec('PRAGMA user_version = 7');
      expect(db.prepare('PRAGMA user_version').pluck().get()).toBe(7);
    } finally {
      db.close();
    }
  });

  it('SqliteStore.driver() (tools, tests) keeps what it makes and still runs pragma() and iterate() as better-sqlite3 does', () => {
    const Database = SqliteStore.driver();
    const before = keptObjects();
    const db = new Database(':memory:');
    try {
      expect(db.pragma('synchronous = FULL')).toEqual([]);
      expect(db.pragma('synchronous', { simple: true })).toBe(2);
      expect(db.pragma('user_version')).toEqual([{ user_version: 0 }]);
      db.exec('CREATE TABLE t (x); INSERT INTO t VALUES (1), (2), (3)');
      expect([...(db.prepare('SELECT x FROM t ORDER BY x').pluck().iterate() as IterableIterator<number>)]).toEqual([1, 2, 3]);
      // The connection, four statements and the iterator.
      expect(keptObjects()).toBe(before + 6);
    } finally {
      db.close();
    }
  });

  it('a service\'s plans, observes, prompt reads and health checks keep nothing more after the first of each', async () => {
    const state = join(tempDir('rb-kept-'), 'state.db');
    const service = new Service(new AsyncAllocator(asyncStoreOf(new SqliteStore(state))));
    try {
      const candidates = Array.from({ length: 40 }, (_, i) => ({ id: `q${i}`, max_tokens: 1024, group: i % 2 === 0 ? 'math' : 'code', ...(i % 5 === 0 ? { prior_pass_rate: 0.3, prior_samples: 4 } : {}) }));
      const round = async (k: number) => {
        const plan = await service.handle({ method: 'POST', path: '/v1/plan', body: JSON.stringify({ candidates, budget: { rollouts: 320 }, options: { step: k } }) });
        expect(plan.status).toBe(200);
        const results = candidates.slice(0, 10).map((c, j) => ({ prompt_id: c.id, step: k, rollout_id: `${k}-${j}`, reward: (k + j) % 2, tokens: 300 }));
        expect((await service.handle({ method: 'POST', path: '/v1/observe', body: JSON.stringify(results) })).status).toBe(200);
        expect((await service.handle({ method: 'GET', path: '/v1/prompts/q3', body: '' })).status).toBe(200);
        expect((await service.handle({ method: 'GET', path: '/healthz', body: '' })).status).toBe(200);
        expect((await service.handle({ method: 'GET', path: '/metrics', body: '' })).status).toBe(200);
      };
      await round(0);
      await round(1);
      const settled = keptObjects();
      for (let k = 2; k < 30; k++) await round(k);
      expect(keptObjects()).toBe(settled);
    } finally {
      await service.allocator.close();
    }
  });

  it('an execute\'s partial-rollout store keeps nothing more batch after batch', () => {
    const partials = new PartialStore(join(tempDir('rb-kept-partials-'), 'state.db'));
    try {
      const batch = (k: number) => {
        const keep = [0, 1, 2].map((j) => ({ rollout_id: `${k}-${j}`, prompt_id: `q${j}`, step: k, seed: j, text: 'partial', tokens: 10, finish_reason: 'abort' }));
        partials.replace(k === 0 ? [] : [0, 1, 2].map((j) => `${k - 1}-${j}`), keep);
        expect(partials.forPrompts(['q0', 'q1']).size).toBe(2);
        expect(partials.count()).toBe(3);
        expect(partials.holdsNothing()).toBe(false);
        expect(partials.all()).toHaveLength(3);
      };
      batch(0);
      const settled = keptObjects();
      for (let k = 1; k < 20; k++) batch(k);
      expect(keptObjects()).toBe(settled);
    } finally {
      partials.close();
    }
  });
});
