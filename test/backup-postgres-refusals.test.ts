import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { base, ok, seededState, pgState, run, runFiles, schemaOf, schemaThere, sqliteState, withPg } from './backup-postgres-helpers.js';
import { cli } from './cli-helpers.js';
import { dropPgSchema, freshPgUrl } from './service-helpers.js';
import { Database } from './sqlite.js';
import { tempDir } from './temp.js';

// `backup --state <sqlite file> --out postgres://...?schema=<name>` refuses what it must not
// copy, and writes nothing then: a schema that already holds a state (a copy is never merged
// into another), a source that is not a state, and a row PostgreSQL refuses after a whole batch
// went in (the copy rolled back). A state's partial rollouts stay in its file, with a note.

describe.skipIf(base === undefined)('backup --out postgres://...?schema=<name>', () => {
  it('refuses a schema that holds a state, naming it, and changes nothing; takes one with an empty state', async () => {
    const dir = tempDir('rb-pgmove-');
    const files = runFiles(dir);
    const state = join(dir, 'state.db');
    await run(state, { ...files, results: files.results.slice(0, 1) });
    const url = freshPgUrl(base!);
    const empty = freshPgUrl(base!);
    try {
      await ok(['observe', '--state', url, '--results', files.results[1]!]);
      const before = await pgState(url);
      const r = await cli(['backup', '--state', state, '--out', url.replace('postgres://rb@', 'postgres://rb:s3cret-pw@')]);
      expect(r.code).toBe(2);
      expect(r.stderr).toBe(
        `rollout-budget: ${url.replace('postgres://rb@', 'postgres://rb:***@')}: schema ${schemaOf(url)} already holds a state (40 prompts, 40 of them observed, claimed rollout ids, last step 1); ` +
          'a copy goes into a new schema or one with no state in it, never merged into another: nothing was written. Give another ?schema=\n',
      );
      expect(r.stdout).toBe('');
      expect(await pgState(url)).toEqual(before);

      // Prompts only planned (a plan recorded their group) are a state too; the message says none was observed (inspect: 0 prompts).
      const planned = freshPgUrl(base!);
      try {
        const grouped = join(dir, 'grouped.jsonl');
        writeFileSync(grouped, '{"id":"a","group":"g"}\n{"id":"b","group":"g"}\n');
        await ok(['plan', '--state', planned, '--prompts', grouped, '--budget-rollouts', '8', '--out', '/dev/null']);
        const refused = await cli(['backup', '--state', state, '--out', planned]);
        expect(refused.code).toBe(2);
        expect(refused.stderr).toContain(`schema ${schemaOf(planned)} already holds a state (2 prompts, 0 of them observed, no claimed rollout ids, no last step)`);
      } finally {
        await dropPgSchema(base!, planned);
      }

      // A schema with the tables but no state (an observe of nothing made it): the copy goes in.
      await ok(['observe', '--state', empty, '--results', '-']);
      expect(await schemaThere(empty)).toBe(true);
      const copy = await ok(['backup', '--state', state, '--out', empty]);
      expect(JSON.parse(copy.stdout)).toEqual({ out: empty, prompts: 40, last_step: 0, rollout_ids: 160 });
      expect((await pgState(empty)).prompts).toEqual(sqliteState(state).prompts);
    } finally {
      await dropPgSchema(base!, url);
      await dropPgSchema(base!, empty);
    }
  });

  it('refuses a source that is not a state, and makes no schema; the partial rollouts of a state stay in its file, with a note', async () => {
    const dir = tempDir('rb-pgmove-');
    const url = freshPgUrl(base!);
    try {
      const text = join(dir, 'results.jsonl');
      writeFileSync(text, '{"prompt_id":"a","reward":1}\n');
      const app = join(dir, 'app.db');
      const db = new Database(app);
      db.exec("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO users (name) VALUES ('ada')");
      db.close();
      const cases: [string, string][] = [
        [text, `${text}: the state file is not a SQLite database`],
        [app, `${app}: a SQLite database of another program (its tables: users), not a rollout-budget state`],
      ];
      for (const [source, message] of cases) {
        const r = await cli(['backup', '--state', source, '--out', url]);
        expect(r.code, source).toBe(2);
        expect(r.stderr).toContain(message);
        expect(r.stdout).toBe('');
      }
      expect(await schemaThere(url)).toBe(false);

      const state = join(dir, 'state.db');
      await ok(['observe', '--state', state, '--results', text]);
      const partials = new Database(state);
      partials.exec(`CREATE TABLE partial_rollouts (rollout_id TEXT PRIMARY KEY, prompt_id TEXT NOT NULL, step INTEGER NOT NULL, seed INTEGER NOT NULL, text TEXT NOT NULL, tokens INTEGER, finish_reason TEXT);
        INSERT INTO partial_rollouts VALUES ('r1', 'a', 1, 7, 'so far', 12, NULL), ('r2', 'a', 1, 8, 'more', 3, NULL)`);
      partials.close();
      const copy = await ok(['backup', '--state', state, '--out', url]);
      expect(copy.stderr).toBe(`rollout-budget: note: ${state} keeps 2 partial rollouts for execute and loop to resume; a PostgreSQL state has no table for them, so they were not copied and stay in ${state}\n`);
      // One claimed key: a batch without rollout ids claims its digest.
      expect(JSON.parse(copy.stdout)).toEqual({ out: url, prompts: 1, last_step: 0, rollout_ids: 1 });
      const tables = await withPg(async (c) => (await c.query<{ t: string }>('SELECT tablename AS t FROM pg_tables WHERE schemaname = $1 ORDER BY 1', [schemaOf(url)])).rows.map((r) => r.t));
      expect(tables).toEqual(['meta', 'pooled', 'prompts', 'seen']);
    } finally {
      await dropPgSchema(base!, url);
    }
  });

  it('a row PostgreSQL refuses after a whole batch went in rolls the copy back: the schema holds nothing of it', async () => {
    const { state, db } = await seededState();
    // 12,000 prompts (two batches); the last one's rollouts 2.5, which SQLite keeps and a bigint column refuses.
    db.exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 12000)
      INSERT INTO prompts (id, grp, successes, failures, last_step, rollouts, reward_sum, correct_count, correct_tokens, wrong_count, wrong_tokens)
      SELECT 'p-' || i, NULL, 1, 1, 0, CASE WHEN i = 12000 THEN 2.5 ELSE 2 END, 1, 1, 10, 1, 10 FROM n`);
    db.close();
    const url = freshPgUrl(base!);
    try {
      await ok(['observe', '--state', url, '--results', '-']); // the tables, no state
      const before = await pgState(url);
      const r = await cli(['backup', '--state', state, '--out', url]);
      expect(r.code).toBe(2);
      expect(r.stderr).toBe(`rollout-budget: ${url}: the copy failed (invalid input syntax for type bigint: "2.5"); nothing was written, the schema is as it was\n`);
      expect(await pgState(url)).toEqual(before);
      expect(before.prompts).toEqual([]);
    } finally {
      await dropPgSchema(base!, url);
    }
  });
});
