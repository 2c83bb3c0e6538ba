import type pg from 'pg';
import type { ResultSource } from '../io/results.js';
import { LN_EVIDENCE_FLOOR, LN_GUARD, nextStep, type DecayOptions } from '../posterior/decay.js';
import type { PromptState } from '../posterior/state.js';
import { applyEvidence, EvidenceAccumulator, summaryOf, type StepEvidence } from './accumulate.js';
import { ALL_CLAIMED, BatchClaims } from './claims.js';
import { dollarQuoted, pgArray } from './pg-array.js';
import { PooledDeltas } from './pooled.js';
import { addPooled } from './postgres-pooled.js';
import { COLUMNS, fromRow, lockPrompts, type Row } from './postgres-rows.js';
import type { ObserveSummary } from './types.js';

/** withMeta's hint rule in SQL: a given hint replaces the stored one with its samples; none keeps it. */
export const HINT_SET = `prior_pass_rate = CASE WHEN excluded.prior_pass_rate IS NULL THEN p.prior_pass_rate ELSE excluded.prior_pass_rate END,
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

/**
 * Prompts written by one statement: its 13 array literals, the message pg makes of them and
 * the rows it returns are what observe holds at its peak (10⁵ prompts in one statement: ~40 MB).
 */
const WRITE_ROWS = 10_000;

/** The prompts table's columns, as observe writes them (evidenceColumns gives their values). */
const PROMPT_COLUMNS = `id, grp, successes, failures, last_step, rollouts, reward_sum, correct_count, correct_tokens, wrong_count, wrong_tokens,
  prior_pass_rate, prior_samples`;

/** unnest() of evidenceColumns' 13 arrays, the first one being parameter `$from`. */
const evidenceRows = (from: number) =>
  `unnest(${['text', 'text', 'float8', 'float8', 'bigint', 'bigint', 'float8', 'bigint', 'float8', 'bigint', 'float8', 'float8', 'bigint'].map((t, k) => `$${from + k}::${t}[]`).join(', ')})`;

/**
 * Evidence rows of prompts that have no row, inserted as they are: the upsert below would store
 * the same numbers on a row of zeros (0 + x = x; a decayed zero is 0), in one write instead of
 * two. A prompt another writer inserted meanwhile is left out (ON CONFLICT DO NOTHING; the
 * caller then upserts it).
 */
const insertSql = (s: string) => `INSERT INTO ${s}.prompts (${PROMPT_COLUMNS}) SELECT * FROM ${evidenceRows(1)} ON CONFLICT (id) DO NOTHING`;

/** Evidence rows whose prompt ids are distinct, as column arrays for one unnest() upsert. */
const upsertSql = (s: string) => `
INSERT INTO ${s}.prompts AS p (${PROMPT_COLUMNS})
SELECT * FROM ${evidenceRows(3)}
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

/** Evidence rows as the 13 array parameters of evidenceRows (pgArray literals), in PROMPT_COLUMNS order. */
function evidenceColumns(round: readonly StepEvidence[]): string[] {
  return [
    round.map((e) => e.prompt_id), round.map((e) => e.group), round.map((e) => e.successes), round.map((e) => e.failures),
    round.map((e) => e.step), round.map((e) => e.rollouts), round.map((e) => e.successes), round.map((e) => e.correctCount),
    round.map((e) => e.correctTokens), round.map((e) => e.wrongCount), round.map((e) => e.wrongTokens),
    round.map((e) => e.priorPassRate ?? null), round.map((e) => (e.priorPassRate === undefined ? null : e.priorSamples ?? null)),
  ].map(pgArray);
}

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
  const array = pgArray(keys);
  try {
    // One simple query (no parameters, so it goes out at once, whole): the client needs no
    // answer between the savepoint and the insert.
    await c.query(`SAVEPOINT claim; INSERT INTO ${s}.seen (rollout_id) SELECT k FROM unnest(${dollarQuoted(array)}::text[]) AS k ORDER BY k COLLATE "C"; RELEASE SAVEPOINT claim`);
    return [];
  } catch (error) {
    if ((error as { code?: string }).code !== '23505') throw error;
  }
  await c.query('ROLLBACK TO SAVEPOINT claim');
  const refused = await c.query<{ k: string }>(
    `WITH claimed AS (INSERT INTO ${s}.seen (rollout_id) SELECT k FROM unnest($1::text[]) AS k ORDER BY k COLLATE "C" ON CONFLICT DO NOTHING RETURNING rollout_id)
     SELECT k FROM unnest($1::text[]) AS k EXCEPT ALL SELECT rollout_id FROM claimed`, [array]);
  await c.query('RELEASE SAVEPOINT claim');
  return refused.rows.map((r) => r.k);
}

/**
 * PostgresStore.applySource's work inside its transaction `c` on schema `s`: the source's
 * chunks claimed and summed, then the touched prompts written (see PostgresStore).
 */
export async function applyIn(c: pg.PoolClient, s: string, source: ResultSource, decay: DecayOptions): Promise<ObserveSummary> {
  const meta = await c.query<{ v: number }>(`SELECT value::float8 AS v FROM ${s}.meta WHERE key = 'last_step'`);
  const before = meta.rows[0]?.v ?? null;
  const acc = new EvidenceAccumulator(nextStep(before));
  const claims = new BatchClaims(source);
  // A chunk's claim goes out, then the next chunk is read while the database works on it.
  const chunks = source.chunks()[Symbol.iterator]();
  for (let next = chunks.next(); next.done !== true; ) {
    const chunk = next.value;
    const request = claims.request(chunk);
    const refusing = request.claim.length > 0 ? claimKeys(c, s, request.claim) : Promise.resolve([]);
    refusing.catch(() => undefined); // awaited below; a bad line in the next chunk throws first
    next = chunks.next();
    const refused = await refusing;
    // Every key claimed (the usual batch): settle needs no set of them (store/claims.ts).
    const claimed = refused.length === 0 ? ALL_CLAIMED : new Set<string>(request.claim);
    if (claimed !== ALL_CLAIMED) for (const k of refused) claimed.delete(k);
    let legacySeen = false;
    if (request.legacy !== undefined) {
      legacySeen = ((await c.query(`SELECT 1 FROM ${s}.seen WHERE rollout_id = $1`, [request.legacy])).rowCount ?? 0) > 0;
    }
    claims.settle(chunk, claimed, legacySeen, acc);
  }
  const evidence = acc.evidence().sort((a, b) => (a.prompt_id < b.prompt_id ? -1 : a.prompt_id > b.prompt_id ? 1 : a.step - b.step));
  // The touched prompts that have a row, locked (in id order); the others are inserted with
  // their first step's evidence (a new prompt's change to the pooled sums is all of it), and
  // any that another writer inserted meanwhile are locked and read, then upserted as the rest.
  const ids = [...new Set(evidence.map((e) => e.prompt_id))];
  const old = new Map<string, PromptState>();
  const after = new Map<string, PromptState>();
  const byRound = rounds(evidence);
  const lock = (keys: readonly string[]) => lockPrompts(c, s, keys, old);
  if (ids.length > 0) {
    await lock(ids);
    const fresh = byRound[0]!.filter((e) => !old.has(e.prompt_id));
    if (fresh.length > 0) {
      const inserted = new Set<string>();
      for (let k = 0; k < fresh.length; k += WRITE_ROWS) {
        const { rows } = await c.query<{ id: string }>(`${insertSql(s)} RETURNING id`, evidenceColumns(fresh.slice(k, k + WRITE_ROWS)));
        for (const row of rows) inserted.add(row.id);
      }
      // The row inserted is the evidence as it is (insertSql), which is what applyEvidence gives on no state.
      for (const e of fresh) if (inserted.has(e.prompt_id)) after.set(e.prompt_id, applyEvidence(undefined, e, decay));
      const raced = fresh.filter((e) => !inserted.has(e.prompt_id)).map((e) => e.prompt_id);
      if (raced.length > 0) await lock(raced);
    }
  }
  for (const [k, all] of byRound.entries()) {
    const round = k === 0 ? all.filter((e) => old.has(e.prompt_id)) : all;
    if (round.length === 0) continue;
    for (let j = 0; j < round.length; j += WRITE_ROWS) {
      const part = evidenceColumns(round.slice(j, j + WRITE_ROWS));
      const { rows } = await c.query<Row>(`${upsertSql(s)} RETURNING ${COLUMNS}`, [decay.forgetPerStep, decay.reobserveDiscount, ...part]);
      for (const row of rows) after.set(row.id, fromRow(row));
    }
  }
  const deltas = new PooledDeltas();
  for (const id of ids) deltas.change(old.get(id), after.get(id)!);
  await addPooled(c, s, deltas.entries());
  let last = before;
  let top: number | null = null;
  if (evidence.length > 0) {
    top = evidence[0]!.step;
    for (const e of evidence) if (e.step > top) top = e.step;
    const up = await c.query<{ v: number }>(
      `INSERT INTO ${s}.meta (key, value) VALUES ('last_step', $1) ON CONFLICT (key) DO UPDATE SET value = GREATEST(${s}.meta.value, excluded.value) RETURNING value::float8 AS v`,
      [top]);
    last = up.rows[0]!.v;
  }
  const prompts = new Set(evidence.map((e) => e.prompt_id)).size;
  return summaryOf({ applied: acc.applied, duplicates: acc.duplicates, aborted: acc.aborted, prompts, last_step: last }, top, before, decay, claims.warnings());
}
