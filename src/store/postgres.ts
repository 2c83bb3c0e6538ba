import pg from 'pg';
import { RolloutBudgetError } from '../errors.js';
import { sourceOfBatch, type ResultBatch, type ResultSource } from '../io/results.js';
import { LN_EVIDENCE_FLOOR, LN_GUARD, type DecayOptions } from '../posterior/decay.js';
import { snapshotOf, type PromptState, type StateSnapshot } from '../posterior/state.js';
import { ALL_SCOPE, groupScope, partialSnapshot, PooledDeltas } from './pooled.js';
import { addPooled, buildPooled, pooledTableSql, readPooled } from './postgres-pooled.js';
import { readPartial } from './postgres-partial.js';
import { EvidenceAccumulator, type StepEvidence } from './accumulate.js';
import { BatchClaims } from './claims.js';
import type { AsyncStore } from './async.js';
import { mergeMeta, NO_STEP, type PromptMeta } from './meta.js';
import type { ObserveSummary } from './types.js';
import { redactUrl } from './url.js';

const COLUMNS = `id, grp, successes, failures, last_step::float8 AS last_step, rollouts::float8 AS rollouts, reward_sum,
  correct_count::float8 AS correct_count, correct_tokens, wrong_count::float8 AS wrong_count, wrong_tokens,
  prior_pass_rate, prior_samples::float8 AS prior_samples`;

const schemaSql = (s: string) => `
CREATE SCHEMA IF NOT EXISTS ${s};
CREATE TABLE IF NOT EXISTS ${s}.meta (key TEXT PRIMARY KEY, value BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS ${s}.prompts (
  id TEXT PRIMARY KEY,
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
CREATE TABLE IF NOT EXISTS ${s}.seen (rollout_id TEXT PRIMARY KEY);
${pooledTableSql(s)}`;

/** withMeta's hint rule in SQL: a given hint replaces the stored one with its samples; none keeps it. */
const HINT_SET = `prior_pass_rate = CASE WHEN excluded.prior_pass_rate IS NULL THEN p.prior_pass_rate ELSE excluded.prior_pass_rate END,
  prior_samples = CASE WHEN excluded.prior_pass_rate IS NULL THEN p.prior_samples ELSE excluded.prior_samples END`;

/**
 * `decayedTerm(x, λ, gap, ρ)` of posterior/decay.ts in SQL: the same guard, threshold and
 * grouping, so the two backends store the same numbers and PostgreSQL never raises "value out
 * of range: underflow" (its power() and * do, where JavaScript gives 0). The ln() arguments
 * are guarded with GREATEST rather than by CASE order: PostgreSQL may fold ln($1) at planning.
 */
const term = (x: string, gap: string, rho: string) => {
  const ln = (v: string) => `ln(GREATEST(${v}, ${LN_GUARD}::float8))`;
  return `(CASE WHEN ${ln(x)} + ${gap} * ${ln('$1::float8')} + ${ln(rho)} < ${LN_EVIDENCE_FLOOR}::float8 THEN 0::float8
    ELSE ${x} * (power($1::float8, ${gap}) * ${rho}) END)`;
};

/**
 * The decay rule of `addEvidence` (posterior/decay.ts) as one SQL expression over the old
 * row `p` and the incoming row `excluded` ($1 = λ, $2 = ρ):
 *   step > last: old·(λ^(step−last)·ρ) + new;  step = last: old + new;  step < last: old + new·λ^(last−step),
 * each decayed term floored at 1e-100 as decayedTerm does.
 */
const decayed = (col: string) => `CASE
  WHEN excluded.last_step > p.last_step THEN ${term(`p.${col}`, '(excluded.last_step - p.last_step)::float8', '$2::float8')} + excluded.${col}
  WHEN excluded.last_step = p.last_step THEN p.${col} + excluded.${col}
  ELSE p.${col} + ${term(`excluded.${col}`, '(p.last_step - excluded.last_step)::float8', '1::float8')} END`;

/** Evidence rows whose prompt ids are distinct, as column arrays for one unnest() upsert. */
const upsertSql = (s: string) => `
INSERT INTO ${s}.prompts AS p (id, grp, successes, failures, last_step, rollouts, reward_sum, correct_count, correct_tokens, wrong_count, wrong_tokens,
  prior_pass_rate, prior_samples)
SELECT * FROM unnest($3::text[], $4::text[], $5::float8[], $6::float8[], $7::bigint[], $8::bigint[], $9::float8[], $10::bigint[], $11::float8[], $12::bigint[], $13::float8[],
  $14::float8[], $15::bigint[])
ON CONFLICT (id) DO UPDATE SET
  grp = COALESCE(excluded.grp, p.grp),
  successes = ${decayed('successes')},
  failures = ${decayed('failures')},
  last_step = GREATEST(p.last_step, excluded.last_step),
  rollouts = p.rollouts + excluded.rollouts,
  reward_sum = p.reward_sum + excluded.reward_sum,
  correct_count = p.correct_count + excluded.correct_count,
  correct_tokens = p.correct_tokens + excluded.correct_tokens,
  wrong_count = p.wrong_count + excluded.wrong_count,
  wrong_tokens = p.wrong_tokens + excluded.wrong_tokens,
  ${HINT_SET}`;

/** store/meta.ts's metadata upsert: a new prompt gets zero evidence and last_step −1; evidence is never touched. */
const recordSql = (s: string) => `
INSERT INTO ${s}.prompts AS p (id, grp, successes, failures, last_step, rollouts, reward_sum, correct_count, correct_tokens, wrong_count, wrong_tokens,
  prior_pass_rate, prior_samples)
SELECT t.id, t.grp, 0, 0, ${NO_STEP}, 0, 0, 0, 0, 0, 0, t.rate, t.samples
FROM unnest($1::text[], $2::text[], $3::float8[], $4::bigint[]) AS t(id, grp, rate, samples) ORDER BY t.id
ON CONFLICT (id) DO UPDATE SET grp = COALESCE(excluded.grp, p.grp), ${HINT_SET}`;

/**
 * The prompts whose ids are in the array $1 (distinct ids), as a join of the array with the
 * table: PostgreSQL plans it as one primary-key lookup per id, whatever its statistics say.
 * `WHERE id = ANY($1)` was planned as a parallel scan of the whole table while the statistics
 * were missing or stale (a state just written in bulk, before autovacuum's ANALYZE caught up:
 * 4,096 ids in a 10⁶-prompt state took ~300 ms, ~90 ms as a join); with fresh ones both cost
 * the same.
 */
const promptsOf = (s: string) => `FROM unnest($1::text[]) AS k(id) JOIN ${s}.prompts AS p USING (id)`;

/** Ids sorted (neighbouring lookups share index pages) and each once (the join repeats a repeated id). O(n log n). */
function sortedUnique(ids: readonly string[]): string[] {
  const sorted = [...ids].sort();
  return sorted.filter((id, k) => k === 0 || id !== sorted[k - 1]);
}

interface Row {
  id: string; grp: string | null; successes: number; failures: number; last_step: number; rollouts: number;
  reward_sum: number; correct_count: number; correct_tokens: number; wrong_count: number; wrong_tokens: number;
  prior_pass_rate: number | null; prior_samples: number | null;
}

const fromRow = (r: Row): PromptState => ({
  id: r.id, group: r.grp, successes: r.successes, failures: r.failures, lastStep: r.last_step, rollouts: r.rollouts,
  rewardSum: r.reward_sum, correctCount: r.correct_count, correctTokens: r.correct_tokens, wrongCount: r.wrong_count,
  wrongTokens: r.wrong_tokens,
  ...(r.prior_pass_rate === null ? {} : { priorPassRate: r.prior_pass_rate }),
  ...(r.prior_samples === null ? {} : { priorSamples: r.prior_samples }),
});

/** Splits evidence (sorted by prompt, then step) into rounds with one entry per prompt each. */
function rounds(evidence: readonly StepEvidence[]): StepEvidence[][] {
  const out: StepEvidence[][] = [];
  let prev: string | undefined;
  let k = 0;
  for (const e of evidence) {
    k = e.prompt_id === prev ? k + 1 : 0;
    prev = e.prompt_id;
    (out[k] ??= []).push(e);
  }
  return out;
}

/**
 * Claims distinct `keys` in the `seen` table and returns those not claimed now (stored before,
 * by an earlier batch or a concurrent writer). First a plain INSERT inside a savepoint, which
 * is what almost every chunk needs (new keys) and costs less than half of `ON CONFLICT` (10⁶
 * keys: ~4.5 s against ~10 s here); a key already there fails it with a unique violation
 * (23505, after waiting for a concurrent writer of that key as `ON CONFLICT` does), and the
 * chunk is then claimed with `ON CONFLICT DO NOTHING`, which sends back only the refused keys.
 */
async function claimKeys(c: pg.PoolClient, s: string, keys: readonly string[]): Promise<string[]> {
  await c.query('SAVEPOINT claim');
  try {
    await c.query(`INSERT INTO ${s}.seen (rollout_id) SELECT k FROM unnest($1::text[]) AS k ORDER BY k`, [keys]);
    await c.query('RELEASE SAVEPOINT claim');
    return [];
  } catch (error) {
    if ((error as { code?: string }).code !== '23505') throw error;
  }
  await c.query('ROLLBACK TO SAVEPOINT claim');
  const refused = await c.query<{ k: string }>(
    `WITH claimed AS (INSERT INTO ${s}.seen (rollout_id) SELECT k FROM unnest($1::text[]) AS k ORDER BY k ON CONFLICT DO NOTHING RETURNING rollout_id)
     SELECT k FROM unnest($1::text[]) AS k EXCEPT ALL SELECT rollout_id FROM claimed`, [keys]);
  await c.query('RELEASE SAVEPOINT claim');
  return refused.rows.map((r) => r.k);
}

/** Retry on deadlock (40P01) and serialisation failure (40001): the batch is idempotent. */
const RETRYABLE = new Set(['40P01', '40001']);

export { redactUrl } from './url.js';

/**
 * The state in PostgreSQL, for many writers at once (several controllers, reward workers).
 * Tables live in one schema (`?schema=` in the URL, default `rollout_budget`).
 *
 * apply() is one READ COMMITTED transaction that never reads a posterior into the client:
 * 1. `INSERT INTO seen` claims the batch's rollout keys (claimKeys: a plain INSERT, else
 *    `ON CONFLICT DO NOTHING RETURNING`); a concurrent writer of the same key waits for this
 *    one and then skips it;
 * 2. one `INSERT ... ON CONFLICT DO UPDATE` per round applies the decay rule in SQL against
 *    the row as it is at that moment (row lock), so concurrent batches for one prompt compose;
 * 3. `last_step` only grows (GREATEST).
 * Keys and prompts are taken in sorted order, so writers lock rows in the same order; a
 * deadlock or serialisation failure still retries the whole transaction (up to 5 times).
 * Results without a `step` get the last step + 1 as read at the start of the transaction
 * (unlocked): two writers doing that at once may both take the same step, as if their
 * results had come in one batch. Trainers with several writers should send `step`.
 */
export class PostgresStore implements AsyncStore {
  readonly kind = 'postgres';
  private closed = false;

  private constructor(private readonly pool: pg.Pool, private readonly schema: string, readonly url: string) {}

  static async connect(url: string, options: { maxConnections?: number } = {}): Promise<PostgresStore> {
    const parsed = new URL(url);
    const schema = parsed.searchParams.get('schema') ?? 'rollout_budget';
    if (!/^[a-z_][a-z0-9_]{0,62}$/.test(schema)) {
      throw new RolloutBudgetError('BAD_OPTION', `${redactUrl(url)}: "schema" must match [a-z_][a-z0-9_]*, got ${JSON.stringify(schema)}`);
    }
    parsed.searchParams.delete('schema');
    const pool = new pg.Pool({ connectionString: parsed.toString(), max: options.maxConnections ?? 10, connectionTimeoutMillis: 10_000 });
    pool.on('error', () => undefined); // an idle client's broken socket; the next query reports it
    const store = new PostgresStore(pool, `"${schema}"`, url);
    try {
      await store.transaction(async (c) => {
        await c.query('SELECT pg_advisory_xact_lock(724019)'); // concurrent CREATE ... IF NOT EXISTS can race
        await c.query(schemaSql(store.schema));
        await buildPooled(c, store.schema, async () => (await c.query<Row>(`SELECT ${COLUMNS} FROM ${store.schema}.prompts`)).rows.map(fromRow));
      });
    } catch (error) {
      await pool.end().catch(() => undefined);
      throw new RolloutBudgetError('STATE_ERROR', `${redactUrl(url)}: cannot open the state database (${(error as Error).message})`);
    }
    return store;
  }

  private async transaction<T>(work: (c: pg.PoolClient) => Promise<T>, mode = 'BEGIN'): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const client = await this.pool.connect();
      try {
        await client.query(mode);
        const result = await work(client);
        await client.query('COMMIT');
        return result;
      } catch (error) {
        await client.query('ROLLBACK').catch(() => undefined);
        const code = (error as { code?: string }).code;
        if (attempt >= 5 || code === undefined || !RETRYABLE.has(code)) throw error;
      } finally {
        client.release();
      }
    }
  }

  async get(id: string): Promise<PromptState | undefined> {
    const { rows } = await this.pool.query<Row>(`SELECT ${COLUMNS} FROM ${this.schema}.prompts WHERE id = $1`, [id]);
    return rows[0] === undefined ? undefined : fromRow(rows[0]);
  }

  async lastStep(): Promise<number | null> {
    const { rows } = await this.pool.query<{ v: number }>(`SELECT value::float8 AS v FROM ${this.schema}.meta WHERE key = 'last_step'`);
    return rows[0]?.v ?? null;
  }

  /** Prompts with evidence (a prompt only planned, store/meta.ts, is not counted). */
  async count(): Promise<number> {
    const { rows } = await this.pool.query<{ n: number }>(`SELECT COUNT(*)::float8 AS n FROM ${this.schema}.prompts WHERE rollouts > 0`);
    return rows[0]!.n;
  }

  /**
   * Records prompts' group and hint (store/meta.ts) in one statement: evidence untouched,
   * idempotent. The rows are locked first (id order, as apply locks them), so an observed
   * prompt whose group changes moves its share of the pooled rows in the same transaction.
   */
  async recordPrompts(meta: readonly PromptMeta[]): Promise<void> {
    if (meta.length === 0) return;
    const last = mergeMeta(meta);
    const s = this.schema;
    await this.transaction(async (c) => {
      const ids = last.map((m) => m.id);
      const old = new Map<string, PromptState>();
      const locked = await c.query<Row>(`SELECT ${COLUMNS} ${promptsOf(s)} ORDER BY id FOR UPDATE OF p`, [ids]);
      for (const row of locked.rows) old.set(row.id, fromRow(row));
      const { rows } = await c.query<Row>(`${recordSql(s)} RETURNING ${COLUMNS}`, [
        ids, last.map((m) => m.group ?? null), last.map((m) => m.priorPassRate ?? null),
        last.map((m) => (m.priorPassRate === undefined ? null : m.priorSamples ?? null)),
      ]);
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
      const read = await readPartial<Row>(this.pool, this.schema, COLUMNS, promptsOf(this.schema), sortedUnique(ids), [ALL_SCOPE, ...groups.map(groupScope)]);
      const states = read.prompts.map(fromRow);
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
    const s = this.schema;
    return this.transaction(async (c) => {
      const meta = await c.query<{ v: number }>(`SELECT value::float8 AS v FROM ${s}.meta WHERE key = 'last_step'`);
      const before = meta.rows[0]?.v ?? null;
      const acc = new EvidenceAccumulator(before === null ? 0 : before + 1);
      const claims = new BatchClaims(source.digest);
      for (const chunk of source.chunks()) {
        const request = claims.request(chunk);
        const claimed = new Set<string>(request.claim);
        if (request.claim.length > 0) for (const k of await claimKeys(c, s, request.claim)) claimed.delete(k);
        let legacySeen = false;
        if (request.legacy !== undefined) {
          legacySeen = ((await c.query(`SELECT 1 FROM ${s}.seen WHERE rollout_id = $1`, [request.legacy])).rowCount ?? 0) > 0;
        }
        claims.settle(chunk, claimed, legacySeen, acc);
      }
      const evidence = acc.evidence().sort((a, b) => (a.prompt_id < b.prompt_id ? -1 : a.prompt_id > b.prompt_id ? 1 : a.step - b.step));
      // The touched prompts as they are, locked (in id order): a new one first gets a row of
      // zeros, which adds nothing to the pooled sums, so its change is all of it.
      const ids = [...new Set(evidence.map((e) => e.prompt_id))];
      const old = new Map<string, PromptState>();
      if (ids.length > 0) {
        await c.query(`INSERT INTO ${s}.prompts (id, grp, successes, failures, last_step, rollouts, reward_sum, correct_count, correct_tokens, wrong_count, wrong_tokens)
          SELECT k, NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0 FROM unnest($1::text[]) AS k ORDER BY k ON CONFLICT (id) DO NOTHING`, [ids]);
        const { rows } = await c.query<Row>(`SELECT ${COLUMNS} ${promptsOf(s)} ORDER BY id FOR UPDATE OF p`, [ids]);
        for (const row of rows) old.set(row.id, fromRow(row));
      }
      const after = new Map<string, PromptState>();
      for (const round of rounds(evidence)) {
        const { rows } = await c.query<Row>(`${upsertSql(s)} RETURNING ${COLUMNS}`, [
          decay.forgetPerStep, decay.reobserveDiscount,
          round.map((e) => e.prompt_id), round.map((e) => e.group), round.map((e) => e.successes), round.map((e) => e.failures),
          round.map((e) => e.step), round.map((e) => e.rollouts), round.map((e) => e.successes), round.map((e) => e.correctCount),
          round.map((e) => e.correctTokens), round.map((e) => e.wrongCount), round.map((e) => e.wrongTokens),
          round.map((e) => e.priorPassRate ?? null), round.map((e) => (e.priorPassRate === undefined ? null : e.priorSamples ?? null)),
        ]);
        for (const row of rows) after.set(row.id, fromRow(row));
      }
      const deltas = new PooledDeltas();
      for (const id of ids) deltas.change(old.get(id), after.get(id)!);
      await addPooled(c, s, deltas.entries());
      let last = before;
      if (evidence.length > 0) {
        let top = evidence[0]!.step;
        for (const e of evidence) if (e.step > top) top = e.step;
        const up = await c.query<{ v: number }>(
          `INSERT INTO ${s}.meta (key, value) VALUES ('last_step', $1) ON CONFLICT (key) DO UPDATE SET value = GREATEST(${s}.meta.value, excluded.value) RETURNING value::float8 AS v`,
          [top]);
        last = up.rows[0]!.v;
      }
      const prompts = new Set(evidence.map((e) => e.prompt_id)).size;
      return { applied: acc.applied, duplicates: acc.duplicates, aborted: acc.aborted, prompts, last_step: last };
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.pool.end();
  }
}
