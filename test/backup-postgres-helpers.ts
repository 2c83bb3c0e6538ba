import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { expect } from 'vitest';
import { cli } from './cli-helpers.js';
import { pgUrl } from './service-helpers.js';
import { Database } from './sqlite.js';
import { tempDir } from './temp.js';

// What the tests of `backup --out postgres://...?schema=<name>` share (test/backup-postgres-*.test.ts):
// the test server's URL, a state's tables read from PostgreSQL and from SQLite, and a run of plans
// and observes that makes a state.

export const base = pgUrl();

/** The prompts table's columns, every one, integers as float8 (pg gives bigint as text). */
const PG_COLUMNS = `id, grp, successes, failures, last_step::float8 AS last_step, rollouts::float8 AS rollouts, reward_sum, correct_count::float8 AS correct_count,
  correct_tokens, wrong_count::float8 AS wrong_count, wrong_tokens, prior_pass_rate, prior_samples::float8 AS prior_samples`;
const POOLED = 'scope, count, sum_rate, sum_rate2, sum_noise, correct_count, correct_tokens, wrong_count, wrong_tokens';

export const schemaOf = (url: string) => new URL(url).searchParams.get('schema')!;

export async function withPg<T>(work: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: base });
  await c.connect();
  try {
    return await work(c);
  } finally {
    await c.end();
  }
}

/** A PostgreSQL state's tables as data: prompts (id order), claimed keys, meta, pooled rows. */
export async function pgState(url: string): Promise<{ prompts: unknown[]; seen: string[]; meta: unknown[]; pooled: Record<string, number | string>[] }> {
  const s = `"${schemaOf(url)}"`;
  return withPg(async (c) => ({
    prompts: (await c.query(`SELECT ${PG_COLUMNS} FROM ${s}.prompts ORDER BY id COLLATE "C"`)).rows,
    seen: (await c.query<{ k: string }>(`SELECT rollout_id AS k FROM ${s}.seen ORDER BY rollout_id COLLATE "C"`)).rows.map((r) => r.k),
    meta: (await c.query(`SELECT key, value::float8 AS value FROM ${s}.meta ORDER BY key COLLATE "C"`)).rows,
    pooled: (await c.query(`SELECT ${POOLED} FROM ${s}.pooled ORDER BY scope COLLATE "C"`)).rows,
  }));
}

/** Whether the schema is there. */
export const schemaThere = (url: string) =>
  withPg(async (c) => (await c.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schemaOf(url)])).rowCount === 1);

/** The same tables of a SQLite state, read as they are. */
export function sqliteState(path: string): { prompts: unknown[]; seen: string[]; meta: unknown[] } {
  const db = new Database(path, { readonly: true });
  try {
    return {
      prompts: db.prepare('SELECT id, grp, successes, failures, last_step, rollouts, reward_sum, correct_count, correct_tokens, wrong_count, wrong_tokens, prior_pass_rate, prior_samples FROM prompts ORDER BY id').all(),
      seen: db.prepare('SELECT rollout_id FROM seen ORDER BY rollout_id').pluck().all() as string[],
      meta: db.prepare("SELECT key, CAST(value AS REAL) AS value FROM meta ORDER BY key").all(),
    };
  } finally {
    db.close();
  }
}

/**
 * 48 prompts in two groups, a third of them with an offline hint; rollouts with ids for the
 * first 40 in three steps (the last 8 are only planned: a row with a group and hint, no
 * evidence). Returns the prompts file and the results files, one a step.
 */
export function runFiles(dir: string): { prompts: string; results: string[] } {
  const prompts = join(dir, 'prompts.jsonl');
  writeFileSync(prompts, Array.from({ length: 48 }, (_, i) => JSON.stringify({
    id: `q-${i}`, max_tokens: 1024, group: i % 2 === 0 ? 'g-even' : 'g-odd', ...(i % 3 === 0 ? { prior_pass_rate: (i % 7) / 7, prior_samples: 8 } : {}),
  })).join('\n') + '\n');
  let x = 7;
  const results = [0, 1, 2].map((step) => {
    const file = join(dir, `results-${step}.jsonl`);
    const lines: string[] = [];
    for (let i = 0; i < 40; i++) {
      for (let k = 0; k < 4; k++) {
        x = (Math.imul(x, 1103515245) + 12345) >>> 0;
        lines.push(JSON.stringify({ prompt_id: `q-${i}`, step, reward: (x >>> 8) % 100 < 10 + 2 * i ? 1 : 0, tokens: 100 + (x % 900), rollout_id: `${step}/q-${i}#${k}` }));
      }
    }
    writeFileSync(file, lines.join('\n') + '\n');
    return file;
  });
  return { prompts, results };
}

export async function ok(args: string[], stdin = '') {
  const r = await cli(args, stdin);
  expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(0);
  return r;
}

/**
 * A SQLite state in a new temp folder holding one observed rollout (`seed`, its key `seed#0`),
 * its tables made by the CLI, for a test to fill by SQL; `db` open on it (the test closes it).
 */
export async function seededState(): Promise<{ dir: string; state: string; db: InstanceType<typeof Database> }> {
  const dir = tempDir('rb-pgmove-');
  const state = join(dir, 'state.db');
  await ok(['observe', '--state', state, '--results', '-'], '{"prompt_id":"seed","reward":1,"rollout_id":"seed#0","step":0}\n');
  return { dir, state, db: new Database(state) };
}

/** Plans, then observes each step's results into `state`: what a trainer does (plans record groups and hints). */
export async function run(state: string, files: { prompts: string; results: string[] }): Promise<void> {
  for (const results of files.results) {
    await ok(['plan', '--state', state, '--prompts', files.prompts, '--budget-rollouts', '160', '--out', '/dev/null']);
    await ok(['observe', '--state', state, '--results', results]);
  }
}
