import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { base, ok, seededState, pgState, run, runFiles, schemaThere, sqliteState } from './backup-postgres-helpers.js';
import { cli } from './cli-helpers.js';
import { CLI, dropPgSchema, freshPgUrl } from './service-helpers.js';
import { Database } from './sqlite.js';
import { dumpState } from './state-file.js';
import { tempDir } from './temp.js';

// `backup --state <sqlite file> --out postgres://...?schema=<name>`: a SQLite state moved into a
// PostgreSQL schema, in one transaction. Before, `--out` refused a URL, and the copy users made
// by hand (`\copy` of prompts, seen and meta) left the pooled rows empty while their mark was
// set: plans differed, silently (2 of 60 allocations in the reviewer's repro). Here: what the
// copy holds (every row, plans of the same bytes), streamed past its batches, and no schema left
// by a copy killed midway. What it refuses: test/backup-postgres-refusals.test.ts; beside other
// commands: test/backup-postgres-concurrency.test.ts.

describe('backup --out postgres:// (no server needed)', () => {
  it('other commands still refuse a PostgreSQL URL as --out, its password hidden', async () => {
    const dir = tempDir('rb-pgmove-');
    const files = runFiles(dir);
    const r = await cli(['plan', '--state', join(dir, 's.db'), '--prompts', files.prompts, '--budget-rollouts', '8', '--out', 'postgres://rb:hunter2@127.0.0.1:1/x?schema=a']);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe("rollout-budget: postgres://rb:***@127.0.0.1:1/x?schema=a: a PostgreSQL URL, where a file path is expected (a state's URL goes to --state)\n");
    // The password as a parameter, which node-postgres takes too: hidden as well (it was printed).
    const param = await cli(['plan', '--state', join(dir, 's.db'), '--prompts', files.prompts, '--budget-rollouts', '8', '--out', 'postgres://rb@127.0.0.1:1/x?schema=a&password=hunter2']);
    expect(param.stderr).toBe("rollout-budget: postgres://rb@127.0.0.1:1/x?schema=a&password=***: a PostgreSQL URL, where a file path is expected (a state's URL goes to --state)\n");
  });
});

describe.skipIf(base === undefined)('backup --out postgres://...?schema=<name>', () => {
  it('copies every table of the state: the same rows, plans of the same bytes, inspect the same, old results all duplicates; pooled rows as observing gives them', async () => {
    const dir = tempDir('rb-pgmove-');
    const files = runFiles(dir);
    const state = join(dir, 'state.db');
    await run(state, files);
    const withPassword = freshPgUrl(base!).replace('postgres://rb@', 'postgres://rb:s3cret-pw@'); // the test server trusts: any password
    const url = withPassword.replace(':s3cret-pw', '');
    const observed = freshPgUrl(base!); // the same plans and results observed into PostgreSQL directly
    try {
      const before = dumpState(state, 'SELECT * FROM seen ORDER BY rollout_id');
      const copy = await ok(['backup', '--state', state, '--out', withPassword]);
      expect(copy.stdout).toBe(`${JSON.stringify({ out: withPassword.replace(':s3cret-pw@', ':***@'), prompts: 40, last_step: 2, rollout_ids: 480 })}\n`);
      expect(copy.stdout + copy.stderr).not.toContain('s3cret-pw');
      expect(copy.stderr).toBe('');
      expect(dumpState(state, 'SELECT * FROM seen ORDER BY rollout_id')).toBe(before); // the source as it was

      // Every row, every column, as the file has it (planned-only prompts with their group and hint too).
      const [onPg, onSqlite] = [await pgState(url), sqliteState(state)];
      expect(onPg.prompts).toHaveLength(48);
      expect(onPg.prompts).toEqual(onSqlite.prompts);
      expect(onPg.seen).toEqual(onSqlite.seen);
      expect(onPg.meta).toEqual(onSqlite.meta); // last_step and the pooled rows' mark

      // Pooled rows: what observing the same results into PostgreSQL keeps, but for the last bits.
      await run(observed, files);
      const reference = (await pgState(observed)).pooled;
      expect(onPg.pooled.map((r) => r.scope)).toEqual(['all', 'group:g-even', 'group:g-odd']);
      expect(reference.map((r) => r.scope)).toEqual(onPg.pooled.map((r) => r.scope));
      let compared = 0;
      for (const [k, row] of onPg.pooled.entries()) {
        for (const [column, value] of Object.entries(row)) {
          if (column === 'scope') continue;
          const want = reference[k]![column] as number;
          expect(Math.abs((value as number) - want), `${row.scope} ${column}: ${value} against ${want}`).toBeLessThanOrEqual(1e-12 * Math.max(1, Math.abs(want)));
          compared++;
        }
      }
      expect(compared).toBe(24);

      // Plans: the same bytes from the file and from the schema (json and jsonl), step 3 both.
      for (const format of ['json', 'jsonl']) {
        const plans = [];
        for (const [k, from] of [state, url].entries()) {
          const out = join(dir, `plan-${k}.${format}`);
          await ok(['plan', '--state', from, '--prompts', files.prompts, '--budget-rollouts', '160', '--format', format, '--out', out]);
          plans.push(readFileSync(out, 'utf8'));
        }
        expect(plans[0]!.length).toBeGreaterThan(2000);
        expect(plans[1], format).toBe(plans[0]);
      }
      for (const args of [[], ['--prompt', 'q-3'], ['--prompt', 'q-45']]) {
        const [a, b] = [await ok(['inspect', '--state', state, ...args]), await ok(['inspect', '--state', url, ...args])];
        expect(b.stdout, args.join(' ')).toBe(a.stdout);
      }

      // Every rollout observed before is a duplicate now.
      for (const results of files.results) {
        const again = await ok(['observe', '--state', url, '--results', results]);
        expect(JSON.parse(again.stdout)).toMatchObject({ applied: 0, duplicates: 160, prompts: 0, last_step: 2 });
      }
    } finally {
      await dropPgSchema(base!, url);
      await dropPgSchema(base!, observed);
    }
  });

  it('streams a state larger than its batches (12,000 prompts, 60,000 claimed keys); a kill -9 mid-copy leaves no schema', async () => {
    const { state, db } = await seededState();
    db.exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 12000)
      INSERT INTO prompts (id, grp, successes, failures, last_step, rollouts, reward_sum, correct_count, correct_tokens, wrong_count, wrong_tokens, prior_pass_rate, prior_samples)
      SELECT 'p-' || i, CASE WHEN i % 3 = 0 THEN 'g' || (i % 5) END, i % 4, 4 - i % 4, 0, 4, i % 4, i % 4, 100.5 * (i % 4), 4 - i % 4, 80.25 * (4 - i % 4), NULL, NULL FROM n;
      WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 60000) INSERT INTO seen (rollout_id) SELECT 'k-' || i FROM n;
      DELETE FROM meta WHERE key = 'pooled_version'; DELETE FROM pooled;`); // rows written by hand: the file's pooled rows are stale
    db.close();
    const url = freshPgUrl(base!);
    const killed = `${freshPgUrl(base!)}&application_name=rb_pgmove_kill`;
    try {
      const copy = await ok(['backup', '--state', state, '--out', url]);
      expect(JSON.parse(copy.stdout)).toEqual({ out: url, prompts: 12001, last_step: 0, rollout_ids: 60001 });
      const [onPg, onSqlite] = [await pgState(url), sqliteState(state)];
      expect(onPg.prompts).toEqual(onSqlite.prompts);
      expect(onPg.seen).toEqual(onSqlite.seen);
      // Summed from the prompts: 12,001 with evidence, groups g0..g4.
      expect(onPg.pooled.map((r) => [r.scope, r.count])).toEqual([['all', 12001], ...[0, 1, 2, 3, 4].map((g) => [`group:g${g}`, 800])]);

      // kill -9 inside the copy's transaction (it has written: the schema made, rows inserted):
      // the server rolls it back, and the schema it made goes with it. More keys, for a longer window.
      const more = new Database(state);
      more.exec("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 400000) INSERT INTO seen (rollout_id) SELECT 'x-' || i FROM n");
      more.close();
      const child = spawn(process.execPath, [CLI, 'backup', '--state', state, '--out', killed], { stdio: 'ignore' });
      const exited = new Promise((done) => child.on('exit', done));
      const watch = new pg.Client({ connectionString: base });
      await watch.connect();
      try {
        const backend = async (written: boolean) =>
          (await watch.query(`SELECT 1 FROM pg_stat_activity WHERE application_name = 'rb_pgmove_kill'${written ? ' AND backend_xid IS NOT NULL' : ''}`)).rowCount! > 0;
        let writing = false;
        for (let k = 0; k < 20_000 && !writing; k++) writing = await backend(true);
        expect(writing, 'the copy was seen inside its transaction').toBe(true);
        child.kill('SIGKILL');
        await exited;
        for (let k = 0; k < 200 && (await backend(false)); k++) await new Promise((r) => setTimeout(r, 50));
        expect(await backend(false)).toBe(false);
      } finally {
        await watch.end();
      }
      expect(await schemaThere(killed)).toBe(false);
    } finally {
      await dropPgSchema(base!, url);
      await dropPgSchema(base!, killed);
    }
  }, 60_000);
});
