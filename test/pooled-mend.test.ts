import { join } from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { batchOf, defaultDecay, PostgresStore, SqliteStore } from '../src/index.js';
import { cli } from './cli-helpers.js';
import { call, freshPgUrl, pgUrl, startService, stopService } from './service-helpers.js';
import { tempDir } from './temp.js';
import { POOLED_COLUMNS, samePooled } from '../src/store/pooled.js';

/**
 * The pooled rows (store/pooled.ts: the learned prior's and length model's sums, which `serve`
 * and `inspect`'s count read) left behind by a writer that does not keep them: a rollout-budget
 * older than the rows observing after this version opened the state (an upgrade review's
 * finding: the service's plan then differed from the CLI's in 104 fields, for good), or another
 * program's SQL. The old writer is reproduced here by its SQL: the prompts' rows written, the
 * pooled rows not. The expected figures come from the prompts themselves: their number, and the
 * rows a state rebuilds from them on open when its mark is gone (buildPooled, the path old states
 * have always taken).
 */

/** Five steps of results over 40 prompts in two groups, as a trainer's observes. */
function batches(): ReturnType<typeof batchOf>[] {
  return [0, 1, 2, 3, 4].map((step) => batchOf(Array.from({ length: 40 }, (_, i) => ({
    prompt_id: `p${i}`, group: `g${i % 2}`, step, reward: (i * 7 + step * 3) % 5 < 2 ? 1 : 0, tokens: 100 + ((i * 13 + step) % 9) * 50,
  }))));
}

/** What an old build's observe does to the prompts table: a new prompt and a changed one, the pooled rows untouched. */
const oldWrites = (id: string) => [
  `INSERT INTO prompts (id, grp, successes, failures, last_step, rollouts, reward_sum, correct_count, correct_tokens, wrong_count, wrong_tokens) VALUES ('${id}', 'g0', 3, 5, 5, 8, 3, 3, 900, 5, 2500)`,
  "UPDATE prompts SET successes = successes + 4, rollouts = rollouts + 4, reward_sum = reward_sum + 4, correct_count = correct_count + 4, correct_tokens = correct_tokens + 800, last_step = 5 WHERE id = 'p3'",
];

/** The pooled rows of a SQLite state, by scope. */
function pooledRows(path: string): Map<string, number[]> {
  const db = new (SqliteStore.driver())(path, { readonly: true });
  try {
    return new Map((db.prepare('SELECT * FROM pooled ORDER BY scope').raw().all() as [string, ...number[]][]).map(([scope, ...v]) => [scope, v]));
  } finally {
    db.close();
  }
}

function expectSameRows(a: Map<string, number[]>, b: Map<string, number[]>): void {
  expect([...a.keys()]).toEqual([...b.keys()]);
  for (const [scope, values] of a) values.forEach((v, k) => expect(v, `${scope}[${k}]`).toBeCloseTo(b.get(scope)![k]!, 9));
}

describe('pooled rows a writer left behind are rebuilt from the prompts', () => {
  it('SQLite: inspect and serve find them, say so once, and count from the prompts again', async () => {
    const dir = tempDir('rb-mend-');
    const path = join(dir, 'state.db');
    const store = new SqliteStore(path);
    for (const b of batches()) store.apply(b, defaultDecay);
    expect(store.mendPooled()).toBeUndefined(); // five observes' rounding is no mismatch
    store.close();

    const oldWriter = (id: string) => {
      const db = new (SqliteStore.driver())(path);
      for (const sql of oldWrites(id)) db.exec(sql);
      db.close();
    };
    // The rows an open rebuilds from the prompts when its mark is gone: what the mended rows must equal.
    const rebuilt = (() => {
      oldWriter('old-1');
      const copy = join(dir, 'copy.db');
      const db = new (SqliteStore.driver())(path);
      db.exec(`VACUUM INTO '${copy}'`);
      db.close();
      const c = new (SqliteStore.driver())(copy);
      c.exec("DELETE FROM pooled; DELETE FROM meta WHERE key = 'pooled_version'");
      c.close();
      new SqliteStore(copy).close();
      return pooledRows(copy);
    })();

    const inspect = await cli(['inspect', '--state', path]);
    expect(inspect.code).toBe(0);
    expect(JSON.parse(inspect.stdout).prompts).toBe(41); // it said 40: the pooled count
    expect(inspect.stderr).toContain('the pooled rows (the learned prior\'s and the length model\'s sums) did not sum the prompts');
    expectSameRows(pooledRows(path), rebuilt);
    const again = await cli(['inspect', '--state', path]);
    expect(again.stderr).not.toContain('pooled rows');

    // Another old write, then the service: its start mends them before the first request.
    oldWriter('old-2');
    const service = await startService(['--state', path]);
    try {
      expect(service.stderr()).toMatch(/note: .*state\.db: the pooled rows .* rebuilt from the prompts/);
      expect((await call(service.port, 'GET', '/healthz')).json).toMatchObject({ prompts: 42 });
    } finally {
      expect((await stopService(service)).code).toBe(0);
    }
  });

  const url = pgUrl();
  it.skipIf(url === undefined)('PostgreSQL: the same, through a schema an old writer changed', async () => {
    const stateUrl = freshPgUrl(url!);
    const schema = new URL(stateUrl).searchParams.get('schema')!;
    const store = await PostgresStore.connect(stateUrl);
    try {
      for (const b of batches()) await store.apply(b, defaultDecay);
      expect(await store.mendPooled()).toBeUndefined();
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      const rows = async () => new Map((await client.query(`SELECT * FROM "${schema}".pooled ORDER BY scope`)).rows.map((r) => [r.scope as string, Object.values(r).slice(1).map(Number)]));
      try {
        const before = await rows();
        for (const sql of oldWrites('old-1')) await client.query(sql.replace(/prompts/g, `"${schema}".prompts`));
        expect(await store.count()).toBe(40); // stale
        expect(await store.mendPooled()).toMatch(/the pooled rows .* rebuilt from the prompts$/);
        expect(await store.count()).toBe(41);
        expect(await store.mendPooled()).toBeUndefined();
        // inspect's summary does the same for a schema.
        for (const sql of oldWrites('old-2')) await client.query(sql.replace(/prompts/g, `"${schema}".prompts`));
        const inspect = await cli(['inspect', '--state', stateUrl]);
        expect(inspect.stderr).toMatch(/note: .*the pooled rows .* rebuilt from the prompts/);
        expect(JSON.parse(inspect.stdout).prompts).toBe(42);
        const after = await rows();
        // Two new prompts (8 rollouts each) and p3's 4 more, twice: the `all` scope's count up by two.
        expect(after.get('all')![0]).toBe(before.get('all')![0]! + 2);
        // The same rows as a fresh schema's rebuild of the same prompts (its mark removed).
        await client.query(`DELETE FROM "${schema}".pooled; DELETE FROM "${schema}".meta WHERE key = 'pooled_version'`);
        await (await PostgresStore.connect(stateUrl)).close();
        expectSameRows(after, await rows());
      } finally {
        await client.end();
      }
    } finally {
      await store.close();
    }
  });
});

describe('samePooled: stored rows against the prompts\' sums', () => {
  /** One `all` row: 10⁶ prompts, the other figures as a large state's. */
  const row = (change: Partial<Record<(typeof POOLED_COLUMNS)[number], number>> = {}) =>
    new Map([['all', POOLED_COLUMNS.map((c, k) => change[c] ?? [1e6, 330258.87, 241502.74, 4406.34, 9253077, 3.7e9, 15955755, 1.1e10][k]!)]]);

  it('takes the last bits a sum\'s order moves, and a count one off at 10⁶ prompts is not the same (a relative 1e-6 took it)', () => {
    expect(samePooled(row(), row())).toBe(true);
    expect(samePooled(row(), row({ sum_rate: 330258.87 * (1 + 1e-12), wrong_tokens: 1.1e10 + 1 }))).toBe(true);
    expect(samePooled(row(), row({ count: 1e6 + 1 }))).toBe(false);
    expect(samePooled(row(), row({ correct_count: 9253078 }))).toBe(false);
    expect(samePooled(row(), row({ sum_rate: 330258.87 * 1.001 }))).toBe(false);
  });

  it('Infinity against a number differs (its tolerance took any value); NaN against NaN is the same (rebuilt at every start)', () => {
    expect(samePooled(row(), row({ correct_tokens: Infinity }))).toBe(false);
    expect(samePooled(row({ correct_tokens: Infinity }), row({ correct_tokens: Infinity }))).toBe(true);
    expect(samePooled(row({ sum_noise: NaN }), row({ sum_noise: NaN }))).toBe(true);
    expect(samePooled(row({ sum_noise: NaN }), row())).toBe(false);
    // A scope on one side only reads as zeros there.
    expect(samePooled(row(), new Map([...row(), ['group:g', POOLED_COLUMNS.map(() => 0)]]))).toBe(true);
    expect(samePooled(row(), new Map([...row(), ['group:g', POOLED_COLUMNS.map(() => 1)]]))).toBe(false);
  });
});
