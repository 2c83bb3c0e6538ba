import type pg from 'pg';
import { RolloutBudgetError } from '../errors.js';
import { pooledTableSql } from './postgres-pooled.js';
import { redactUrl } from './url.js';

/**
 * A PostgreSQL state's schema: where a URL points (serverOf) and the tables made there
 * (ensureSchema), for PostgresStore.connect and for backup's copy of a SQLite state
 * (store/postgres-import.ts), which makes them inside its own transaction.
 */

/**
 * The tables. Every key column compares bytes (`COLLATE "C"`, as SQLite does), whatever the
 * database's own collation: on a database made with a language's collation (en-US, ICU or
 * libc, the default of many installs) each index probe would otherwise compare by the
 * language's rules, which costs more (docs/service.md: observe of 10⁶ rollouts with ids
 * 9.4–9.7 s against 6.8–8.0 s). Sorts that set lock order name "C" too, so a state made
 * before the columns had it locks in one order as well.
 */
const schemaSql = (s: string) => `
CREATE TABLE IF NOT EXISTS ${s}.meta (key TEXT COLLATE "C" PRIMARY KEY, value BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS ${s}.prompts (
  id TEXT COLLATE "C" PRIMARY KEY,
  grp TEXT,
  successes DOUBLE PRECISION NOT NULL,
  failures DOUBLE PRECISION NOT NULL,
  last_step BIGINT NOT NULL,
  rollouts BIGINT NOT NULL,
  reward_sum DOUBLE PRECISION NOT NULL,
  correct_count BIGINT NOT NULL,
  correct_tokens DOUBLE PRECISION NOT NULL,
  wrong_count BIGINT NOT NULL,
  wrong_tokens DOUBLE PRECISION NOT NULL
);
ALTER TABLE ${s}.prompts ADD COLUMN IF NOT EXISTS prior_pass_rate DOUBLE PRECISION;
ALTER TABLE ${s}.prompts ADD COLUMN IF NOT EXISTS prior_samples BIGINT;
CREATE TABLE IF NOT EXISTS ${s}.seen (rollout_id TEXT COLLATE "C" PRIMARY KEY);
${pooledTableSql(s)}`;

/** How long a request waits for a connection (a new one, or a pool slot) before it fails. */
export const CONNECT_TIMEOUT_MS = 10_000;

/**
 * The advisory lock under which a state's tables are made (concurrent `CREATE ... IF NOT
 * EXISTS` can race), one a schema: `pg_advisory_xact_lock(SCHEMA_LOCK, hashtext(schema))`. A
 * copy into a new schema (postgres-import.ts) holds its schema's until it commits, so a command
 * on that schema waits for the copy, and commands on other schemas never do (one lock for the
 * whole database held them all up behind a copy's 87 s at 10⁶ prompts).
 */
export const SCHEMA_LOCK = 724019;

/** The tables schemaSql makes, and the columns it adds to prompts after it was first made. */
const TABLES = ['meta', 'prompts', 'seen', 'pooled'] as const;
const ADDED_PROMPT_COLUMNS = ['prior_pass_rate', 'prior_samples'] as const;

/**
 * Makes what the state at `schema` lacks: the schema, then schemaSql. When the catalog shows
 * every table and column there, it runs no DDL at all: `CREATE ... IF NOT EXISTS` asks for
 * CREATE on the database or schema, and `ALTER TABLE ... IF NOT EXISTS` for the table's
 * ownership, before it looks whether there is anything to make. So a role an administrator
 * gave only USAGE on the schema and SELECT, INSERT, UPDATE, DELETE on its tables (or CREATE on
 * an existing schema, not on the database) could not open a state that was all there
 * ("permission denied for database ..."). Run under the schema's advisory lock.
 */
export async function ensureSchema(c: pg.ClientBase, schema: string): Promise<void> {
  const { rows } = await c.query<{ schema: boolean; tables: number; columns: number }>(
    `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1) AS schema,
       (SELECT count(*)::int FROM pg_class r JOIN pg_namespace n ON n.oid = r.relnamespace
        WHERE n.nspname = $1 AND r.relname = ANY($2::text[]) AND r.relkind IN ('r', 'p')) AS tables,
       (SELECT count(*)::int FROM pg_attribute a JOIN pg_class r ON r.oid = a.attrelid JOIN pg_namespace n ON n.oid = r.relnamespace
        WHERE n.nspname = $1 AND r.relname = 'prompts' AND a.attname = ANY($3::text[]) AND NOT a.attisdropped) AS columns`,
    [schema, TABLES, ADDED_PROMPT_COLUMNS],
  );
  const have = rows[0]!;
  if (have.schema && have.tables === TABLES.length && have.columns === ADDED_PROMPT_COLUMNS.length) return;
  const s = `"${schema}"`;
  try {
    if (!have.schema) await c.query(`CREATE SCHEMA ${s}`);
    await c.query(schemaSql(s));
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code !== '42501') throw error; // insufficient_privilege
    // A plain Error: cannotOpen puts the URL before it.
    const what = have.schema ? `the state's tables in schema ${s}` : `schema ${s}`;
    throw new Error(`cannot make ${what}: ${(error as Error).message}; make them once as a role that may (any rollout-budget command run with that role's URL), or grant this role CREATE on ${have.schema ? 'the schema' : 'the database'}. Once the tables are there, a role with USAGE on the schema and SELECT, INSERT, UPDATE, DELETE on its tables is enough`);
  }
}

/** The schema a state URL names (`?schema=`, default rollout_budget; checked) and the server's URL without it. */
export function serverOf(url: string): { schema: string; connectionString: string } {
  const parsed = new URL(url);
  const schema = parsed.searchParams.get('schema') ?? 'rollout_budget';
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(schema)) {
    throw new RolloutBudgetError('BAD_OPTION', `${redactUrl(url)}: "schema" must match [a-z_][a-z0-9_]*, got ${JSON.stringify(schema)}`);
  }
  parsed.searchParams.delete('schema');
  return { schema, connectionString: parsed.toString() };
}
