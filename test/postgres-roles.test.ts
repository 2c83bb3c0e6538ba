import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { cli } from './cli-helpers.js';
import { pgUrl } from './service-helpers.js';
import { tempDir } from './temp.js';

// A state in a schema an administrator set up, used by a role with fewer rights than its owner:
// the usual grant on a managed database. `CREATE ... IF NOT EXISTS` asks for CREATE on the
// database (schema) or schema (tables), and `ALTER TABLE ... ADD COLUMN IF NOT EXISTS` for the
// table's ownership, before looking whether anything is missing: such a role could not open
// a state that was all there ("permission denied for database ..."). Real roles on the test
// server, dropped at the end.
const PG = pgUrl();

describe.skipIf(PG === undefined)('PostgreSQL roles with fewer rights than the state\'s owner', () => {
  it('a role with USAGE and DML on the tables (or CREATE on the schema only) uses a state, a read-only one reads it, one with neither is told what to grant', async () => {
    const base = PG!;
    const tag = randomBytes(4).toString('hex');
    const [schema, empty, dml, maker, reader] = [`adm_${tag}`, `empty_${tag}`, `dml_${tag}`, `maker_${tag}`, `reader_${tag}`];
    /** The URL of `s` as `role` (password pw), or as the test server's own user. */
    const urlOf = (role: string | undefined, s: string) => {
      const u = new URL(base);
      if (role !== undefined) {
        u.username = role;
        u.password = 'pw';
      }
      u.searchParams.set('schema', s);
      return u.toString();
    };
    const admin = new pg.Client({ connectionString: base });
    await admin.connect();
    const dir = tempDir();
    const step = (n: number, id: string) => {
      const path = join(dir, `r${n}.jsonl`);
      writeFileSync(path, `{"prompt_id":"${id}","step":${n},"reward":1,"rollout_id":"${id}-${n}"}\n`);
      return path;
    };
    try {
      for (const role of [dml, maker, reader]) await admin.query(`CREATE ROLE ${role} LOGIN PASSWORD 'pw'`);
      // The administrator makes the state (any command as the owner), then grants the DML role.
      const made = await cli(['observe', '--results', step(0, 'a'), '--state', urlOf(undefined, schema)]);
      expect(made.code, made.stderr).toBe(0);
      await admin.query(`GRANT USAGE ON SCHEMA ${schema} TO ${dml}; GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ${schema} TO ${dml}`);
      const observed = await cli(['observe', '--results', step(1, 'b'), '--state', urlOf(dml, schema)]);
      expect(observed.code, observed.stderr).toBe(0);
      expect(JSON.parse(observed.stdout)).toMatchObject({ applied: 1, last_step: 1 });
      const inspected = await cli(['inspect', '--state', urlOf(dml, schema)]);
      expect(inspected.code, inspected.stderr).toBe(0);
      expect(JSON.parse(inspected.stdout)).toMatchObject({ prompts: 2, last_step: 1 });

      // A read-only role (USAGE, SELECT): inspect and a plan with nothing to record work (they
      // failed: building the pooled rows' mark ran an INSERT ... ON CONFLICT DO NOTHING); an
      // observe exits 2 naming the right it lacks (it was an internal error with a stack, exit 1).
      await admin.query(`GRANT USAGE ON SCHEMA ${schema} TO ${reader}; GRANT SELECT ON ALL TABLES IN SCHEMA ${schema} TO ${reader}`);
      const read = await cli(['inspect', '--state', urlOf(reader, schema), '--prompt', 'b']);
      expect(read.code, read.stderr).toBe(0);
      expect(JSON.parse(read.stdout)).toMatchObject({ id: 'b', rollouts: 1 });
      // Pooled rows that no longer sum the prompts (another program's write): the reader's
      // inspect says it cannot rebuild them and answers; the DML role's rebuilds them.
      await admin.query(`UPDATE ${schema}.pooled SET count = count + 5 WHERE scope = 'all'`);
      const stale = await cli(['inspect', '--state', urlOf(reader, schema)]);
      expect(stale.code, stale.stderr).toBe(0);
      expect(stale.stderr).toMatch(/^rollout-budget: note: the pooled rows differ from the prompts. sums \(inspect.s read\), and could not be checked again or rebuilt: this database role lacks a right on the state \(permission denied for table pooled\)/);
      expect(JSON.parse(stale.stdout)).toMatchObject({ prompts: 2 }); // the prompts' own count, not the stale row's 7
      const mended = await cli(['inspect', '--state', urlOf(dml, schema)]);
      expect(mended.stderr).toMatch(/note: .*the pooled rows .* rebuilt from the prompts\n$/);
      expect(JSON.parse(mended.stdout)).toMatchObject({ prompts: 2 });
      writeFileSync(join(dir, 'prompts.jsonl'), '{"id":"a"}\n{"id":"new"}\n');
      const planned = await cli(['plan', '--prompts', join(dir, 'prompts.jsonl'), '--budget-rollouts', '8', '--state', urlOf(reader, schema)]);
      expect(planned.code, planned.stderr).toBe(0);
      expect(JSON.parse(planned.stdout).totals.rollouts).toBe(8);
      const denied = await cli(['observe', '--results', step(2, 'c'), '--state', urlOf(reader, schema)]);
      expect(denied.code).toBe(2);
      expect(denied.stderr).toBe('rollout-budget: this database role lacks a right on the state (permission denied for table seen); nothing was written. Reading the state takes USAGE on its schema and SELECT on its tables; observing, and planning prompts that bring a group or hint, INSERT, UPDATE and DELETE too (docs/service.md, "Shared state on PostgreSQL")\n');
      expect(JSON.parse((await cli(['inspect', '--state', urlOf(dml, schema)])).stdout)).toMatchObject({ prompts: 2, last_step: 1 });

      // An empty schema the administrator made, with CREATE on it (not on the database).
      await admin.query(`CREATE SCHEMA ${empty}; GRANT USAGE, CREATE ON SCHEMA ${empty} TO ${maker}`);
      const first = await cli(['observe', '--results', step(0, 'c'), '--state', urlOf(maker, empty)]);
      expect(first.code, first.stderr).toBe(0);

      // Neither: no schema, no right to make one.
      const missing = `none_${tag}`;
      const refused = await cli(['observe', '--results', step(0, 'd'), '--state', urlOf(dml, missing)]);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toContain(`cannot make schema "${missing}": permission denied for database`);
      expect(refused.stderr).toContain('grant this role CREATE on the database');
      expect((await admin.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [missing])).rowCount).toBe(0);
    } finally {
      await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE; DROP SCHEMA IF EXISTS ${empty} CASCADE`);
      for (const role of [dml, maker, reader]) await admin.query(`DROP OWNED BY ${role}; DROP ROLE ${role}`).catch(() => undefined);
      await admin.end();
    }
  }, 60_000);
});
