import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { SqliteStore } from '../src/index.js';
import { cli } from './cli-helpers.js';
import { dropPgSchema, freshPgUrl, pgUrl } from './service-helpers.js';
import { tempDir } from './temp.js';

// `plan` and `inspect` take `--state postgres://...` as `observe` and `serve` do. The same
// results observed into a SQLite file and into a PostgreSQL schema must give the same plan and
// the same `inspect` output, SQLite's path the reference: every id, count and text equal, every
// fractional figure equal but for its last bits. A small SQLite state is read whole and its
// pooled figures summed row by row; PostgreSQL's plan reads the pooled rows that observe keeps
// (store/pooled.ts), summed in another order.

/** a and b alike: the same shape, strings and integers; other numbers within 1e-12 of each other (relative). */
function expectAlike(b: unknown, a: unknown, at: string): void {
  if (typeof a === 'number' && typeof b === 'number' && !(Number.isInteger(a) && Number.isInteger(b))) {
    expect(Math.abs(b - a), `${at}: ${b} against ${a}`).toBeLessThanOrEqual(1e-12 * Math.max(1, Math.abs(a)));
  } else if (a !== null && typeof a === 'object' && b !== null && typeof b === 'object') {
    expect(Object.keys(b), at).toEqual(Object.keys(a));
    for (const key of Object.keys(a)) expectAlike((b as Record<string, unknown>)[key], (a as Record<string, unknown>)[key], `${at}.${key}`);
  } else {
    expect(b, at).toBe(a);
  }
}

/** A plan file's JSON values: the whole file (json), or one a line (jsonl). */
const planValues = (text: string, format: string): unknown[] => (format === 'json' ? [JSON.parse(text)] : text.trim().split('\n').map((line) => JSON.parse(line)));

const PROMPTS = join(import.meta.dirname, '..', 'fixtures', 'oneshot-rlvr-dsr-sub', 'prompts.jsonl');

/** Rollouts over 120 of the fixture's prompts in three steps, with rollout ids, token counts and two groups. */
function results(ids: readonly string[]): string {
  const lines: string[] = [];
  let x = 1;
  for (let step = 0; step < 3; step++) {
    for (let i = 0; i < 120; i++) {
      const id = ids[(i * 7 + step) % ids.length]!;
      for (let k = 0; k < 4; k++) {
        x = (Math.imul(x, 1103515245) + 12345) >>> 0;
        lines.push(JSON.stringify({ prompt_id: id, step, reward: x % 3 === 0 ? 1 : 0, tokens: 200 + (x % 700), rollout_id: `${step}/${i}#${k}`, ...(i % 9 === 0 ? { group: `g${i % 2}` } : {}) }));
      }
    }
  }
  return `${lines.join('\n')}\n`;
}

describe('a PostgreSQL URL that no server answers', () => {
  it('exit 2 with one line naming the URL, the password hidden, and no plan file', async () => {
    const dir = tempDir('rb-cli-pg-');
    const out = join(dir, 'plan.json');
    const url = 'postgres://rb:s3cret-pw@127.0.0.1:1/nowhere';
    const plan = await cli(['plan', '--state', url, '--prompts', PROMPTS, '--budget-rollouts', '3224', '--out', out]);
    expect(plan.code).toBe(2);
    expect(plan.stderr.trim()).toBe('rollout-budget: postgres://rb:***@127.0.0.1:1/nowhere: cannot open the state database (connect ECONNREFUSED 127.0.0.1:1)');
    expect(existsSync(out)).toBe(false);
    for (const args of [[], ['--prompt', '0']]) {
      const inspect = await cli(['inspect', '--state', url.replace('postgres:', 'postgresql:'), ...args]);
      expect(inspect.code).toBe(2);
      expect(inspect.stderr.trim()).toBe('rollout-budget: postgresql://rb:***@127.0.0.1:1/nowhere: cannot open the state database (connect ECONNREFUSED 127.0.0.1:1)');
      expect(inspect.stdout).toBe('');
    }
  });

  it('execute and loop, which keep partial rollouts in SQLite, refuse a PostgreSQL state in one line, the password hidden; SqliteStore too', async () => {
    const dir = tempDir('rb-cli-pg-');
    const out = join(dir, 'results.jsonl');
    const fixture = join(import.meta.dirname, '..', 'fixtures', 'qwen-math100-k8');
    const common = ['--prompts', join(fixture, 'prompts.jsonl'), '--endpoint', 'http://127.0.0.1:1', '--model', 'm'];
    const runs = [
      await cli(['execute', '--state', 'postgres://rb:s3cret-pw@127.0.0.1:1/nowhere', '--plan', join(fixture, 'plan.json'), '--out', out, ...common]),
      await cli(['loop', '--state', 'postgres://rb:s3cret-pw@127.0.0.1:1/nowhere', '--budget-rollouts', '800', ...common]),
    ];
    for (const run of runs) {
      expect(run.code).toBe(2);
      expect(run.stderr.trim()).toBe("rollout-budget: --state postgres://rb:***@127.0.0.1:1/nowhere: execute and loop keep partial rollouts in a SQLite state file; a PostgreSQL state is not supported there (execute's results go into it with observe --state postgres://...)");
      expect(run.stdout).toBe('');
    }
    expect(existsSync(out)).toBe(false);
    expect(() => new SqliteStore('postgresql://rb:s3cret-pw@db.example/x')).toThrow(
      'postgresql://rb:***@db.example/x: a PostgreSQL URL, and this store opens SQLite files (PostgresStore.connect or openAsyncStore opens it)',
    );
  });

  it('reads the prompts file first: a bad line is named before any connection is tried', async () => {
    const dir = tempDir('rb-cli-pg-');
    const prompts = join(dir, 'prompts.jsonl');
    writeFileSync(prompts, '{"id":"a"}\n{"id":"b","max_tokens":"abc"}\n');
    const run = await cli(['plan', '--state', 'postgres://rb:s3cret-pw@127.0.0.1:1/nowhere', '--prompts', prompts, '--budget-rollouts', '8']);
    expect(run.code).toBe(2);
    expect(run.stderr.trim()).toBe(`rollout-budget: ${prompts}:2: "max_tokens" must be a positive integer, got "abc"`);
  });
});

const base = pgUrl();
describe.skipIf(base === undefined)('plan and inspect --state postgres://', () => {
  it('give what they give on a SQLite state with the same results (the last bits aside): the plan (json, jsonl), the summary, a prompt', async () => {
    const dir = tempDir('rb-cli-pg-');
    const ids = readFileSync(PROMPTS, 'utf8').trim().split('\n').map((line) => (JSON.parse(line) as { id: string }).id);
    const file = join(dir, 'results.jsonl');
    writeFileSync(file, results(ids));
    const sqlite = join(dir, 'state.db');
    const url = freshPgUrl(base!);
    try {
      for (const state of [sqlite, url]) {
        const observed = await cli(['observe', '--results', file, '--state', state]);
        expect(observed.code, observed.stderr).toBe(0);
        expect(JSON.parse(observed.stdout)).toMatchObject({ applied: 1440, prompts: 350, last_step: 2 });
      }
      for (const format of ['json', 'jsonl']) {
        const plans: string[] = [];
        for (const [k, state] of [sqlite, url].entries()) {
          const out = join(dir, `plan-${k}.${format}`);
          const run = await cli(['plan', '--state', state, '--prompts', PROMPTS, '--budget-rollouts', '3224', '--max-tokens', '3072', '--format', format, '--out', out]);
          expect(run.code, run.stderr).toBe(0);
          plans.push(readFileSync(out, 'utf8'));
        }
        expect(plans[0]!.length).toBeGreaterThan(10_000);
        expectAlike(planValues(plans[1]!, format), planValues(plans[0]!, format), format);
      }
      const plan = JSON.parse(readFileSync(join(dir, 'plan-1.json'), 'utf8')) as { step: number; allocations: { n: number }[] };
      expect(plan.step).toBe(3); // last observed + 1: the PostgreSQL state's last step was read
      expect(plan.allocations.reduce((sum, a) => sum + a.n, 0)).toBe(3224);
      for (const args of [[], ['--prompt', ids[0]!], ['--prompt', 'never-observed']]) {
        const [a, b] = [await cli(['inspect', '--state', sqlite, ...args]), await cli(['inspect', '--state', url, ...args])];
        expect(a.code, a.stderr).toBe(0);
        expect(b.code, b.stderr).toBe(0);
        expectAlike(JSON.parse(b.stdout), JSON.parse(a.stdout), `inspect ${args.join(' ')}`);
      }
      const summary = JSON.parse((await cli(['inspect', '--state', url])).stdout) as { prompts: number; last_step: number };
      expect([summary.prompts, summary.last_step]).toEqual([350, 2]);
    } finally {
      await dropPgSchema(base!, url);
    }
  });

  it('inspect on a schema with no state yet: an empty state\'s output, a one-line note, and no schema created', async () => {
    const url = freshPgUrl(base!);
    const schema = new URL(url).searchParams.get('schema');
    const schemaThere = async () => {
      const client = new pg.Client({ connectionString: base });
      await client.connect();
      try {
        return (await client.query('SELECT 1 FROM information_schema.schemata WHERE schema_name = $1', [schema])).rowCount === 1;
      } finally {
        await client.end();
      }
    };
    try {
      for (const args of [[], ['--prompt', 'a']]) {
        const onPg = await cli(['inspect', '--state', url, ...args]);
        expect(onPg.code, onPg.stderr).toBe(0);
        expect(onPg.stderr).toMatch(new RegExp(`^rollout-budget: note: no state tables at .*schema=${schema} yet: this is an empty state's (summary|posterior) \\(nothing was created\\)\n$`));
        // The same as a SQLite path with no state yet.
        const onSqlite = await cli(['inspect', '--state', join(tempDir('rb-cli-pg-'), 'none.db'), ...args]);
        expect(onPg.stdout).toBe(onSqlite.stdout);
        expect(JSON.parse(onPg.stdout)).toMatchObject(args.length === 0 ? { prompts: 0, last_step: null } : { id: 'a', rollouts: 0 });
      }
      expect(await schemaThere()).toBe(false);
      // Once observe has made the state, inspect reads it and notes nothing.
      expect((await cli(['observe', '--results', '-', '--state', url], '{"prompt_id":"a","reward":1}\n')).code).toBe(0);
      const made = await cli(['inspect', '--state', url, '--prompt', 'a']);
      expect(made.stderr).toBe('');
      expect(JSON.parse(made.stdout)).toMatchObject({ id: 'a', rollouts: 1 });
      expect(await schemaThere()).toBe(true);
    } finally {
      await dropPgSchema(base!, url);
    }
  });
});
