import type pg from 'pg';
import { lazyRequire } from '../lazy.js';
import { RolloutBudgetError } from '../errors.js';
import { pgArray } from './pg-array.js';
import { addToSums, emptyGroupStats, type GroupStats, type RunningSums, type Sums } from '../posterior/state.js';
import { POOLED_COLUMNS, POOLED_META_KEY, pooledValues, scopesOf } from './pooled.js';
import { CONNECT_TIMEOUT_MS, ensureSchema, SCHEMA_LOCK, serverOf } from './postgres-schema.js';
import { fromRawRow, type RawRow } from './sqlite-rows.js';
import { cannotOpen, keyTooLong, permissionDenied, stateUnreachable } from './unavailable.js';
import { redactUrl } from './url.js';

/** node-postgres, loaded on first connect: a library import that never opens PostgreSQL loaded it (0.1 s). */
const pgLib = lazyRequire<typeof pg>('pg');

/**
 * A state's rows as a copy reads them (store/sqlite-source.ts SqliteSource), each call a read
 * of the same moment.
 */
export interface StateRows {
  prompts(): Iterable<RawRow[]>;
  seen(): Iterable<string[]>;
  lastStep(): number | null;
}

/** What a copy wrote: prompts observed (as `inspect` counts them) and in all, claimed rollout keys, the last step. */
export interface ImportSummary {
  readonly prompts: number;
  readonly promptRows: number;
  readonly rolloutIds: number;
  readonly lastStep: number | null;
}

/** The prompts table's columns in RawRow order, and their types for unnest(). */
const PROMPT_COLUMNS = 'id, grp, successes, failures, last_step, rollouts, reward_sum, correct_count, correct_tokens, wrong_count, wrong_tokens, prior_pass_rate, prior_samples';
const PROMPT_TYPES = ['text', 'text', 'float8', 'float8', 'bigint', 'bigint', 'float8', 'bigint', 'float8', 'bigint', 'float8', 'float8', 'bigint'];

const insertPrompts = (s: string) =>
  `INSERT INTO ${s}.prompts (${PROMPT_COLUMNS}) SELECT * FROM unnest(${PROMPT_TYPES.map((t, k) => `$${k + 1}::${t}[]`).join(', ')})`;
const insertPooled = (s: string) =>
  `INSERT INTO ${s}.pooled (scope, ${POOLED_COLUMNS.join(', ')}) SELECT * FROM unnest($1::text[], ${POOLED_COLUMNS.map((_, k) => `$${k + 2}::float8[]`).join(', ')})`;

/**
 * Copies a state (`rows`) into the PostgreSQL schema `url` names, in one transaction: the schema
 * and its tables made if missing, every prompt row, claimed key and the last step inserted a
 * batch at a time (multi-row INSERTs from unnest() of array parameters, as observe writes;
 * the next batch is read while the server inserts this one), and the pooled rows summed from
 * the prompts copied, in their order, with their mark (postgres-pooled.ts buildPooled, as a
 * store's first open builds them). Memory: one batch.
 *
 * The pooled rows are summed afresh, not copied: they are then the sums of the prompts the
 * schema holds, whatever the file's rows went through (never built, a state only read), and
 * the figures a plan reads from them are the bits a full read of the SQLite file sums in the
 * same order (`plan` on a state under PARTIAL_READ_PROMPTS prompts): the plans are the same
 * bytes. Rows kept by observes add differences (store/pooled.ts) and differ from a fresh sum
 * in the last bits (relative ~1e-15 a batch); so do these from the file's own, and from a
 * schema that observed the same results (test/backup-postgres-copy.test.ts checks within 1e-12). A failure, or the process killed, leaves the schema as it was (the
 * server rolls the transaction back; a schema it made is gone with it).
 *
 * A schema that already holds prompts, claimed keys or a last step is refused (BAD_OPTION),
 * nothing written: a copy never merges two states. The state's tables are locked against writes
 * (EXCLUSIVE, in observe's order: seen, prompts, pooled, meta) before that check, so no writer
 * adds rows between the check and the commit; readers go on. The advisory lock under which
 * stores make a schema's tables (SCHEMA_LOCK, one a schema) is held to the commit: a command
 * opening this schema waits for the copy; one on another schema does not.
 */
export async function importIntoPostgres(url: string, rows: StateRows): Promise<ImportSummary> {
  const { schema, connectionString } = serverOf(url);
  const where = redactUrl(url);
  const client = new (pgLib().Client)({ connectionString, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
  client.on('error', () => undefined); // a connection dropped mid-query: the query rejects with it
  try {
    await client.connect();
  } catch (error) {
    await client.end().catch(() => undefined);
    throw cannotOpen(where, error);
  }
  const s = `"${schema}"`;
  try {
    await client.query('BEGIN');
    try {
      // The schema's own lock, held until the commit: a command that opens it meanwhile waits
      // for the whole copy (it failed on the half-made schema, holding every connect up).
      await client.query(`SELECT pg_advisory_xact_lock(${SCHEMA_LOCK}, hashtext($1))`, [schema]);
      await ensureSchema(client, schema);
    } catch (error) {
      throw stateUnreachable(error) ?? (error instanceof RolloutBudgetError ? error : cannotOpen(where, error));
    }
    await client.query(`LOCK TABLE ${s}.seen, ${s}.prompts, ${s}.pooled, ${s}.meta IN EXCLUSIVE MODE`);
    await refuseHeldState(client, s, where, schema);
    await client.query(`DELETE FROM ${s}.pooled`); // an empty state's rows (none, or zeros)
    let prompts = 0;
    let promptRows = 0;
    // The pooled rows summed as the prompts go by, in their order (pooledOf's sums, one read of the file).
    const sums: RunningSums = { all: { ...emptyGroupStats }, latest: null };
    const groups = new Map<string, Sums>();
    await pipelined(rows.prompts(), (batch) => {
      promptRows += batch.length;
      for (const r of batch) {
        if (r[5] > 0) prompts++;
        addToSums(sums, groups, fromRawRow(r));
      }
      return client.query(insertPrompts(s), PROMPT_TYPES.map((_, k) => pgArray(batch.map((r) => r[k]))));
    });
    let rolloutIds = 0;
    await pipelined(rows.seen(), (keys) => {
      rolloutIds += keys.length;
      return client.query(`INSERT INTO ${s}.seen (rollout_id) SELECT * FROM unnest($1::text[])`, [pgArray(keys)]);
    });
    const lastStep = rows.lastStep();
    if (lastStep !== null) await client.query(`INSERT INTO ${s}.meta (key, value) VALUES ('last_step', $1)`, [lastStep]);
    const pooled = promptRows === 0 ? [] : pooledRows(sums.all, groups);
    if (pooled.length > 0) await client.query(insertPooled(s), [pooled.map(([scope]) => scope), ...POOLED_COLUMNS.map((_, k) => pooled.map(([, v]) => v[k]!))]);
    await client.query(`INSERT INTO ${s}.meta (key, value) VALUES ($1, 1) ON CONFLICT (key) DO NOTHING`, [POOLED_META_KEY]);
    await client.query('COMMIT');
    return { prompts, promptRows, rolloutIds, lastStep };
  } catch (error) {
    if (stateUnreachable(error) === undefined) await client.query('ROLLBACK').catch(() => undefined);
    if (error instanceof RolloutBudgetError) throw error;
    const known = stateUnreachable(error) ?? permissionDenied(error) ?? keyTooLong(error);
    if (known !== undefined) throw known;
    // Any other refusal of the server's (a value a column cannot take, a statement too large): said as the copy's.
    const failed = new RolloutBudgetError('STATE_ERROR', `${where}: the copy failed (${error instanceof Error ? error.message : String(error)}); nothing was written, the schema is as it was`);
    failed.cause = error;
    throw failed;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Throws BAD_OPTION naming the schema when it holds prompts, claimed keys or a last step. */
async function refuseHeldState(c: pg.Client, s: string, where: string, schema: string): Promise<void> {
  const { rows } = await c.query<{ prompts: number; observed: number; keys: boolean; last: number | null }>(
    `SELECT (SELECT count(*) FROM ${s}.prompts)::float8 AS prompts, (SELECT count(*) FROM ${s}.prompts WHERE rollouts > 0)::float8 AS observed,
       EXISTS (SELECT 1 FROM ${s}.seen) AS keys, (SELECT value::float8 FROM ${s}.meta WHERE key = 'last_step') AS last`);
  const { prompts, observed, keys, last } = rows[0]!;
  if (prompts === 0 && !keys && last === null) return;
  // Prompts only planned (a plan records its candidates' group and hint) count: inspect says 0 of them.
  const held = [`${prompts} prompt${prompts === 1 ? '' : 's'}, ${observed} of them observed`, keys ? 'claimed rollout ids' : 'no claimed rollout ids', last === null ? 'no last step' : `last step ${last}`];
  throw new RolloutBudgetError(
    'BAD_OPTION',
    `${where}: schema ${schema} already holds a state (${held.join(', ')}); a copy goes into a new schema or one with no state in it, never merged into another: nothing was written. Give another ?schema=`,
  );
}

/** Sends each batch (`send`), reading the next one while the server works on it; one statement in flight. */
async function pipelined<T>(batches: Iterable<T>, send: (batch: T) => Promise<unknown>): Promise<void> {
  const it = batches[Symbol.iterator]();
  for (let next = it.next(); next.done !== true; ) {
    const sending = send(next.value);
    sending.catch(() => undefined); // awaited below; a failed read of the next batch throws first
    next = it.next();
    await sending;
  }
}

/** The pooled rows of the sums (scopesOf), in scope order, as the insert takes them. */
function pooledRows(all: GroupStats, groups: ReadonlyMap<string, GroupStats>): [string, number[]][] {
  const rows = [...scopesOf(all, groups)].map(([scope, stats]): [string, number[]] => [scope, pooledValues(stats)]);
  return rows.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
}
