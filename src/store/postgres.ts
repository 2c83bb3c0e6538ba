import type pg from 'pg';
import { lazyRequire } from '../lazy.js';
import { RolloutBudgetError } from '../errors.js';
import { sourceOfBatch, type ResultBatch, type ResultSource } from '../io/results.js';
import { checkDecay, type DecayOptions } from '../posterior/decay.js';
import { snapshotOf, type PromptState, type StateSnapshot } from '../posterior/state.js';
import { ALL_SCOPE, groupScope, partialSnapshot, POOLED_COLUMNS, POOLED_META_KEY, PooledDeltas, pooledMendedNote, pooledSumsSql, samePooled, scopesOfSums } from './pooled.js';
import { addPooled, buildPooled, readPooled } from './postgres-pooled.js';
import { CONNECT_TIMEOUT_MS, ensureSchema, SCHEMA_LOCK, serverOf } from './postgres-schema.js';
import { applyIn, HINT_SET } from './postgres-apply.js';
import { readPartial } from './postgres-partial.js';
import { COLUMNS, fromRow, fromValues, lockPrompts, promptsOf, type Row } from './postgres-rows.js';
import type { AsyncStore } from './async.js';
import { mergeMeta, NO_STEP, type PromptMeta } from './meta.js';
import type { ObserveSummary } from './types.js';
import { redactUrl } from './url.js';
import { cannotOpen, keyTooLong, permissionDenied, rethrowUnreachable, stateUnreachable } from './unavailable.js';

/** node-postgres, loaded on first connect: a library import that never opens PostgreSQL loaded it (0.1 s). */
const pgLib = lazyRequire<typeof pg>('pg');

/**
 * store/meta.ts's metadata upsert: a new prompt gets zero evidence and last_step −1; evidence is
 * never touched. `insertOnly`: rows not there yet only (ON CONFLICT DO NOTHING).
 */
const recordSql = (s: string, insertOnly = false) => `
INSERT INTO ${s}.prompts AS p (id, grp, successes, failures, last_step, rollouts, reward_sum, correct_count, correct_tokens, wrong_count, wrong_tokens,
  prior_pass_rate, prior_samples)
SELECT t.id, t.grp, 0, 0, ${NO_STEP}, 0, 0, 0, 0, 0, 0, t.rate, t.samples
FROM unnest($1::text[], $2::text[], $3::float8[], $4::bigint[]) AS t(id, grp, rate, samples) ORDER BY t.id COLLATE "C"
ON CONFLICT (id) ${insertOnly ? 'DO NOTHING' : `DO UPDATE SET grp = COALESCE(excluded.grp, p.grp), ${HINT_SET}`}`;

/** recordSql's four array parameters: ids, groups, hints, hint samples. */
function metaColumns(meta: readonly PromptMeta[]): unknown[] {
  return [
    meta.map((m) => m.id), meta.map((m) => m.group ?? null), meta.map((m) => m.priorPassRate ?? null),
    meta.map((m) => (m.priorPassRate === undefined ? null : m.priorSamples ?? null)),
  ];
}

/** Ids sorted (neighbouring lookups share index pages) and each once (the join repeats a repeated id). O(n log n). */
function sortedUnique(ids: readonly string[]): string[] {
  const sorted = [...ids].sort();
  return sorted.filter((id, k) => k === 0 || id !== sorted[k - 1]);
}


/** The key columns, each with the table it is in: what schemaSql makes `COLLATE "C"`. */
const KEY_COLUMNS = [['prompts', 'id'], ['seen', 'rollout_id'], ['pooled', 'scope'], ['meta', 'key']] as const;

/**
 * A note when a key column of `schema` compares by a language's rules (a state made before
 * schemaSql named "C", in a database whose default collation sorts 'a' before 'B', as every
 * language's does and bytes do not), naming the columns and where the statements that
 * convert them are; none otherwise. One catalog query (any PostgreSQL version).
 */
async function collationNotes(c: pg.Pool, schema: string): Promise<string[]> {
  const { rows } = await c.query<{ col: string; coll: string }>(
    `SELECT k.t || '.' || k.c AS col, co.collname AS coll
     FROM unnest($2::text[], $3::text[]) WITH ORDINALITY AS k(t, c, o)
     JOIN pg_namespace n ON n.nspname = $1 JOIN pg_class r ON r.relnamespace = n.oid AND r.relname = k.t
     JOIN pg_attribute a ON a.attrelid = r.oid AND a.attname = k.c JOIN pg_collation co ON co.oid = a.attcollation
     WHERE co.collname NOT IN ('C', 'POSIX', 'ucs_basic') AND (co.collname <> 'default' OR 'a' < 'B')
     ORDER BY k.o`,
    [schema, KEY_COLUMNS.map(([table]) => table), KEY_COLUMNS.map(([, column]) => column)],
  );
  if (rows.length === 0) return [];
  const columns = rows.map((r) => (r.coll === 'default' ? r.col : `${r.col} (${r.coll})`)).join(', ');
  return [`the state's key columns ${columns} compare by the rules of a language, not by bytes, which slows every lookup; docs/service.md ("Shared state on PostgreSQL") gives the ALTER TABLE statements that convert them`];
}

/** Retry on deadlock (40P01) and serialisation failure (40001): the batch is idempotent. */
const RETRYABLE = new Set(['40P01', '40001']);

/** SQLSTATE of a statement cancelled (pg_cancel_backend). */
const QUERY_CANCELED = '57014';

export { redactUrl } from './url.js';


/**
 * The state in PostgreSQL, for many writers at once (several controllers, reward workers).
 * Tables live in one schema (`?schema=` in the URL, default `rollout_budget`).
 *
 * apply() is one READ COMMITTED transaction that never reads a posterior into the client
 * (store/postgres-apply.ts):
 * 1. `INSERT INTO seen` claims the batch's rollout keys (claimKeys: a plain INSERT, else
 *    `ON CONFLICT DO NOTHING RETURNING`), a chunk's while the next chunk is read; a
 *    concurrent writer of the same key waits for this one and then skips it;
 * 2. the touched prompts that have a row are locked; the others are inserted with their first
 *    step's evidence (one that another writer inserts meanwhile is waited for, then locked);
 * 3. one `INSERT ... ON CONFLICT DO UPDATE` per round applies the decay rule in SQL against
 *    the row as it is at that moment (row lock), so concurrent batches for one prompt compose;
 * 4. `last_step` only grows (GREATEST).
 * Keys and prompts are taken in sorted order, so writers lock rows in the same order; a
 * deadlock or serialisation failure still retries the whole transaction (up to 5 times).
 * Results without a `step` get the last step + 1 as read at the start of the transaction
 * (unlocked): two writers doing that at once may both take the same step, as if their
 * results had come in one batch. Trainers with several writers should send `step`.
 */
export class PostgresStore implements AsyncStore {
  readonly kind = 'postgres';
  /** What an operator should know about this state (`serve` logs each at start); see collationNotes. */
  notes: readonly string[] = [];
  private closed = false;

  private constructor(private readonly pool: pg.Pool, private readonly schema: string, readonly url: string, private readonly server: string) {}

  /** Connections in use now (onClient; stopWaiting cancels their statements). */
  private readonly busy = new Set<pg.PoolClient>();
  private stopped: string | undefined;

  static async connect(url: string, options: { maxConnections?: number } = {}): Promise<PostgresStore> {
    const { schema, connectionString } = serverOf(url);
    const pool = new (pgLib().Pool)({ connectionString, max: options.maxConnections ?? 10, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
    pool.on('error', () => undefined); // an idle client's broken socket; the next query reports it
    // Every client hears its own errors, always: pg-pool takes its listener off a client it
    // hands out, and does so in the same turn as the client's first ReadyForQuery, so an
    // ErrorResponse in that same TCP read (the server ending a connection just opened, as a
    // restart or pg_terminate_backend under load does) reached no listener and ended the
    // process. The query it breaks rejects with it (transaction() below).
    pool.on('connect', (client) => client.on('error', () => undefined));
    const store = new PostgresStore(pool, `"${schema}"`, url, connectionString);
    try {
      await store.transaction(async (c) => {
        await c.query(`SELECT pg_advisory_xact_lock(${SCHEMA_LOCK}, hashtext($1))`, [schema]); // concurrent CREATE ... IF NOT EXISTS can race
        await ensureSchema(c, schema);
        await buildPooled(c, store.schema, async () => (await c.query<Row>(`SELECT ${COLUMNS} FROM ${store.schema}.prompts`)).rows.map(fromRow));
      });
    } catch (error) {
      await pool.end().catch(() => undefined);
      throw cannotOpen(redactUrl(url), error);
    }
    // A diagnosis only: a server whose catalog it cannot read still opens, without notes.
    store.notes = await collationNotes(pool, schema).catch(() => []);
    return store;
  }

  /**
   * Whether the state at `url` has its tables, asked without creating anything (connect
   * creates the schema and its tables when they are missing): for commands that only read.
   */
  static async holdsState(url: string): Promise<boolean> {
    const { schema, connectionString } = serverOf(url);
    const client = new (pgLib().Client)({ connectionString, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
    client.on('error', () => undefined); // a connection dropped mid-query: the query rejects with it
    try {
      await client.connect();
      const { rows } = await client.query<{ there: boolean }>('SELECT to_regclass($1) IS NOT NULL AS there', [`"${schema}".prompts`]);
      return rows[0]!.there;
    } catch (error) {
      throw cannotOpen(redactUrl(url), error);
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  /**
   * Throws a failed query's or connect's error as what it means (rethrowUnreachable), but a
   * wait for a connection that timed out while every one of the pool's connections was in use
   * as the service being busy, not the database gone: pg-pool says "timeout exceeded when
   * trying to connect" for both.
   */
  private readonly rethrow = (error: unknown): never => {
    const pool = this.pool;
    if (error instanceof Error && /^timeout exceeded when trying to connect/.test(error.message) && pool.totalCount >= (pool.options.max ?? 10) && pool.idleCount === 0) {
      const busy = new RolloutBudgetError(
        'STATE_ERROR',
        `all ${pool.totalCount} of this process's connections to the state database were busy for ${CONNECT_TIMEOUT_MS / 1000} s (${pool.waitingCount} more requests waiting): too many large requests at once, or the database is not answering them; retry later, or send fewer at a time`,
      );
      busy.cause = error;
      busy.retryable = true;
      throw busy;
    }
    return rethrowUnreachable(error);
  };

  private async transaction<T>(work: (c: pg.PoolClient) => Promise<T>, mode = 'BEGIN'): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.onClient(async (client) => {
          await client.query(mode);
          try {
            const result = await work(client);
            await client.query('COMMIT');
            return result;
          } catch (error) {
            // A lost connection's transaction the server rolls back itself.
            if (stateUnreachable(error) === undefined) await client.query('ROLLBACK').catch(() => undefined);
            throw error;
          }
        });
      } catch (error) {
        const denied = permissionDenied(error) ?? keyTooLong(error);
        if (denied !== undefined) throw denied;
        const code = (error as { code?: string }).code;
        if (attempt >= 5 || code === undefined || !RETRYABLE.has(code)) throw error;
      }
    }
  }

  /** One statement outside a transaction, as pool.query runs it, on a connection stopWaiting can cancel (onClient). */
  private read<R extends pg.QueryResultRow>(config: pg.QueryConfig): Promise<pg.QueryResult<R>>;
  private read(config: pg.QueryArrayConfig): Promise<pg.QueryArrayResult>;
  private read(config: pg.QueryConfig | pg.QueryArrayConfig): Promise<pg.QueryResult | pg.QueryArrayResult> {
    return this.onClient((client) => client.query(config as pg.QueryConfig));
  }

  /**
   * Runs `work` on a connection of the pool that stopWaiting can cancel (every transaction and
   * read: a `/healthz` blocked behind another session's `LOCK TABLE` kept a stopping service up
   * as long as the lock was held), refused once it was called. A lost connection is dropped
   * (not given to the next request) and said as STATE_ERROR; a statement cancelled by the stop
   * says so.
   */
  private async onClient<T>(work: (c: pg.PoolClient) => Promise<T>): Promise<T> {
    if (this.stopped !== undefined) throw new RolloutBudgetError('STATE_ERROR', `${redactUrl(this.url)}: ${this.stopped}: not started; nothing was applied`);
    const client = await this.pool.connect().catch(this.rethrow);
    this.busy.add(client);
    let lost: RolloutBudgetError | undefined;
    try {
      return await work(client);
    } catch (error) {
      lost = stateUnreachable(error);
      if (lost !== undefined) throw lost;
      if (this.stopped !== undefined && (error as { code?: string }).code === QUERY_CANCELED) {
        throw new RolloutBudgetError('STATE_ERROR', `${redactUrl(this.url)}: ${this.stopped}: its statement was cancelled (waiting for a lock another session holds, or still running); nothing was applied`);
      }
      throw error;
    } finally {
      this.busy.delete(client);
      client.release(lost);
    }
  }

  /**
   * Ends the transactions in flight, nothing of them applied, and refuses new ones (SqliteStore.stopWaiting):
   * a stopping service whose clients were cut does not wait, without bound, for a lock another
   * session holds (`LOCK TABLE`, a migration, a stuck transaction), then apply a batch no client
   * will hear of. Cancels their statements (pg_cancel_backend, on a connection of its own: the
   * pool's may all be waiting); best effort.
   */
  async stopWaiting(reason: string): Promise<void> {
    this.stopped = reason;
    const pids = [...this.busy].map((c) => (c as unknown as { processID?: number }).processID).filter((p): p is number => typeof p === 'number');
    if (pids.length === 0) return;
    const client = new (pgLib().Client)({ connectionString: this.server, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
    client.on('error', () => undefined);
    try {
      await client.connect();
      await client.query('SELECT pg_cancel_backend(pid) FROM unnest($1::int[]) AS pid', [pids]);
    } catch {
      // The server is gone or refuses: its connections end with it, nothing applied.
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  async get(id: string): Promise<PromptState | undefined> {
    const { rows } = await this.read<Row>({ text: `SELECT ${COLUMNS} FROM ${this.schema}.prompts WHERE id = $1`, values: [id] }).catch(this.rethrow);
    return rows[0] === undefined ? undefined : fromRow(rows[0]);
  }

  async lastStep(): Promise<number | null> {
    const { rows } = await this.read<{ v: number }>({ text: `SELECT value::float8 AS v FROM ${this.schema}.meta WHERE key = 'last_step'` }).catch(this.rethrow);
    return rows[0]?.v ?? null;
  }

  /**
   * Prompts with evidence (a prompt only planned, store/meta.ts, is not counted): the pooled
   * `all` row's count, one row (SqliteStore.count); row by row where the pooled rows were
   * never built.
   */
  async count(): Promise<number> {
    const s = this.schema;
    const { rows } = await this.read<{ n: number }>({
      text: `SELECT CASE WHEN EXISTS (SELECT 1 FROM ${s}.meta WHERE key = $1) THEN (SELECT coalesce(sum(count), 0) FROM ${s}.pooled WHERE scope = $2) ELSE (SELECT COUNT(*) FROM ${s}.prompts WHERE rollouts > 0) END::float8 AS n`,
      values: [POOLED_META_KEY, ALL_SCOPE],
    }).catch(this.rethrow);
    return Math.round(rows[0]!.n);
  }

  /**
   * SqliteStore.mendPooled on PostgreSQL: checked in one REPEATABLE READ view (writers go on);
   * rows found wrong are checked again with the pooled table locked (EXCLUSIVE: reads go on, an
   * observe's pooled update waits for this transaction, and one that changed prompts before it
   * is seen or waits), and rebuilt.
   */
  async mendPooled(): Promise<string | undefined> {
    const s = this.schema;
    const wrong = async (c: pg.PoolClient) => {
      const { rows } = await c.query<Record<string, number | string>>(`SELECT scope, ${POOLED_COLUMNS.join(', ')} FROM ${s}.pooled`);
      const stored = new Map(rows.map((r) => [r.scope as string, POOLED_COLUMNS.map((col) => r[col] as number)]));
      const actual = scopesOfSums((await c.query({ text: pooledSumsSql(`${s}.prompts`), rowMode: 'array' })).rows as unknown[][]);
      return samePooled(stored, actual) ? undefined : actual;
    };
    if ((await this.transaction(wrong, 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY').catch(this.rethrow)) === undefined) return undefined;
    return this.transaction(async (c) => {
      await c.query(`LOCK TABLE ${s}.pooled IN EXCLUSIVE MODE`);
      const actual = await wrong(c);
      if (actual === undefined) return undefined;
      await c.query(`DELETE FROM ${s}.pooled`);
      await addPooled(c, s, [...actual]);
      return pooledMendedNote(redactUrl(this.url));
    }).catch(this.rethrow);
  }

  /**
   * Records prompts' group and hint (store/meta.ts): evidence untouched, idempotent. In the order
   * observe takes its rows (postgres-apply.ts applyIn), so the two never deadlock: the rows there
   * are locked (id order) and read; those not there are inserted with no evidence (ON CONFLICT DO
   * NOTHING, which waits for another writer's insert of the same id), and any another writer
   * inserted meanwhile are locked and read too; then all are updated, and an observed prompt
   * whose group changes moves its share of the pooled rows in the same transaction. Before, a
   * prompt an observe inserted between the lock and the update (a lock cannot see an uncommitted
   * insert; the upsert waited for it and returned its evidence) had its whole evidence added to
   * the pooled rows a second time: two services planning and observing the same new prompts
   * counted 2,024 prompts of 1,600.
   */
  async recordPrompts(meta: readonly PromptMeta[]): Promise<void> {
    if (meta.length === 0) return;
    const last = mergeMeta(meta);
    const s = this.schema;
    await this.transaction(async (c) => {
      const ids = last.map((m) => m.id);
      const values = metaColumns(last);
      const old = new Map<string, PromptState>();
      const lock = (keys: readonly string[]) => lockPrompts(c, s, keys, old);
      await lock(ids);
      const missing = last.filter((m) => !old.has(m.id));
      if (missing.length > 0) {
        const { rows: inserted } = await c.query<{ id: string }>(`${recordSql(s, true)} RETURNING id`, metaColumns(missing));
        const made = new Set(inserted.map((r) => r.id));
        const raced = missing.filter((m) => !made.has(m.id)).map((m) => m.id);
        if (raced.length > 0) await lock(raced);
      }
      const { rows } = await c.query<Row>(`${recordSql(s)} RETURNING ${COLUMNS}`, values);
      const deltas = new PooledDeltas();
      for (const row of rows) deltas.change(old.get(row.id), fromRow(row));
      await addPooled(c, s, deltas.entries().filter(([, d]) => d.some((v) => v !== 0)));
    });
  }

  /**
   * A consistent view in one REPEATABLE READ transaction: every prompt and the last step, or
   * `ids`, their pooled rows and, when hinted or a prompt read has a hint, every observed
   * hinted prompt. Without hints, `ids` are read in one statement (store/postgres-partial.ts);
   * a prompt read with a hint has them read again here, with the hinted prompts.
   */
  async snapshot(ids?: readonly string[], groups: readonly string[] = [], hinted = false): Promise<StateSnapshot> {
    if (ids !== undefined && !hinted) {
      const read = await readPartial((config) => this.read(config), this.schema, COLUMNS, promptsOf(this.schema), sortedUnique(ids), [ALL_SCOPE, ...groups.map(groupScope)], fromValues)
        .catch(this.rethrow);
      const states = read.prompts;
      if (!states.some((st) => st.priorPassRate !== undefined)) return partialSnapshot(states, read.pooled, read.lastStep);
    }
    return this.transaction(async (c) => {
      const meta = await c.query<{ v: number }>(`SELECT value::float8 AS v FROM ${this.schema}.meta WHERE key = 'last_step'`);
      const lastStep = meta.rows[0]?.v ?? null;
      if (ids === undefined) {
        const { rows } = await c.query<Row>(`SELECT ${COLUMNS} FROM ${this.schema}.prompts`);
        return snapshotOf(rows.map(fromRow), lastStep);
      }
      const { rows } = await c.query<Row>(`SELECT ${COLUMNS} ${promptsOf(this.schema)}`, [sortedUnique(ids)]);
      const states = rows.map(fromRow);
      const scopes = new Set([ALL_SCOPE, ...groups.map(groupScope)]);
      for (const st of states) if (st.group !== null) scopes.add(groupScope(st.group));
      let calibration: PromptState[] | undefined;
      if (hinted || states.some((st) => st.priorPassRate !== undefined)) {
        const h = await c.query<Row>(`SELECT ${COLUMNS} FROM ${this.schema}.prompts WHERE prior_pass_rate IS NOT NULL AND successes + failures > 0`);
        calibration = h.rows.map(fromRow);
      }
      return partialSnapshot(states, await readPooled(c, this.schema, [...scopes]), lastStep, calibration);
    }, 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
  }

  async apply(batch: ResultBatch, decay: DecayOptions): Promise<ObserveSummary> {
    return this.applySource(sourceOfBatch(batch), decay);
  }

  /**
   * apply() for a batch read chunk by chunk (a results file of any size): one transaction;
   * each chunk's keys are claimed (store/claims.ts) and its evidence summed as it comes, the
   * prompt rows written at the end. A retried transaction reads the source again.
   */
  async applySource(source: ResultSource, decay: DecayOptions): Promise<ObserveSummary> {
    checkDecay(decay);
    return this.transaction((c) => applyIn(c, this.schema, source, decay));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.pool.end();
  }
}
