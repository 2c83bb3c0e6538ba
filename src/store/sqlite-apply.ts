import type Database from 'better-sqlite3';
import type { ResultSource } from '../io/results.js';
import { nextStep, type DecayOptions } from '../posterior/decay.js';
import type { PromptState } from '../posterior/state.js';
import { applyEvidence, EvidenceAccumulator, summaryOf } from './accumulate.js';
import { ALL_CLAIMED, BatchClaims } from './claims.js';
import { POOLED_COLUMNS, PooledDeltas } from './pooled.js';
import { withMeta, type PromptMeta } from './meta.js';
import { lastStepReader } from './sqlite-last-step.js';
import { fromRawRow, ROW_COLUMNS, type KeyedRawRow } from './sqlite-rows.js';
import type { ObserveSummary } from './types.js';

/** Keys claimed by one statement. */
export const CLAIM_ROWS = 500;
/** Prompts read by one statement. */
const READ_ROWS = 1000;
/** Prompts written by one statement (13 values each, under SQLite's 32,766 bound values). */
const WRITE_ROWS = 500;

const COLUMNS = ['id', 'grp', 'successes', 'failures', 'last_step', 'rollouts', 'reward_sum', 'correct_count', 'correct_tokens', 'wrong_count', 'wrong_tokens', 'prior_pass_rate', 'prior_samples'] as const;

/**
 * Observe's writes to a SQLite state, run inside the store's one transaction: the source's
 * chunks are claimed (store/claims.ts) and summed as they come; then the touched prompts are
 * read in batches, their evidence applied in step order in memory (`applyEvidence`, the rule
 * every store applies) and written back in batches of multi-row upserts; the pooled rows get
 * each scope's change (store/pooled.ts). Statements with many
 * rows, because a statement costs about 1.5 µs of its own: per rollout or per prompt that
 * was most of an observe.
 */
export class SqliteWriter {
  private readonly claims = new Map<number, Database.Statement>();
  private readonly inserts = new Map<number, Database.Statement>();
  private readonly writes = new Map<number, Database.Statement>();
  private readonly seen: Database.Statement;
  private readonly read: Database.Statement;
  private readonly lastStep: () => number | null;
  private readonly setStep: Database.Statement;
  private readonly addPooled: Database.Statement;

  constructor(private readonly db: Database.Database) {
    this.seen = db.prepare('SELECT 1 FROM seen WHERE rollout_id = ?').pluck();
    // The stored prompts among a JSON array of ids, each with its index in the array.
    this.read = db.prepare(`SELECT ${ROW_COLUMNS.split(', ').map((c) => `p.${c}`).join(', ')}, j.key FROM json_each(?) AS j JOIN prompts AS p ON p.id = j.value`).raw();
    this.lastStep = lastStepReader(db);
    this.setStep = db.prepare("INSERT INTO meta (key, value) VALUES ('last_step', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value");
    this.addPooled = db.prepare(`INSERT INTO pooled (scope, ${POOLED_COLUMNS.join(', ')}) VALUES (?, ${POOLED_COLUMNS.map(() => '?').join(', ')})
      ON CONFLICT(scope) DO UPDATE SET ${POOLED_COLUMNS.map((c) => `${c} = ${c} + excluded.${c}`).join(', ')}`);
  }

  /**
   * `INSERT OR IGNORE` of `count` keys; with `returning`, the statement gives the keys it
   * claimed, else only how many (`changes`).
   */
  private claim(count: number, returning: boolean): Database.Statement {
    const cache = returning ? this.claims : this.inserts;
    let statement = cache.get(count);
    if (statement === undefined) {
      const insert = `INSERT OR IGNORE INTO seen (rollout_id) VALUES ${'(?),'.repeat(count - 1)}(?)`;
      statement = returning ? this.db.prepare(`${insert} RETURNING rollout_id`).pluck() : this.db.prepare(insert);
      cache.set(count, statement);
    }
    return statement;
  }

  /** An upsert of `count` whole prompt rows. */
  private write(count: number): Database.Statement {
    let statement = this.writes.get(count);
    if (statement === undefined) {
      const row = `(${COLUMNS.map(() => '?').join(', ')})`;
      statement = this.db.prepare(`INSERT INTO prompts (${COLUMNS.join(', ')}) VALUES ${`${row}, `.repeat(count - 1)}${row}
        ON CONFLICT(id) DO UPDATE SET ${COLUMNS.slice(1).map((c) => `${c} = excluded.${c}`).join(', ')}`);
      this.writes.set(count, statement);
    }
    return statement;
  }

  /**
   * Records prompts' group and hint (store/meta.ts withMeta, inside a write transaction):
   * evidence untouched; an observed prompt whose group changes moves its share of the pooled
   * rows from the old group's scope to the new one's. O(changes).
   */
  record(meta: readonly PromptMeta[]): void {
    const at = new Map<string, number>();
    for (const m of meta) if (!at.has(m.id)) at.set(m.id, at.size);
    const old = this.readStates([...at.keys()]);
    const states = old.slice();
    for (const m of meta) states[at.get(m.id)!] = withMeta(states[at.get(m.id)!], m);
    this.writeStates([...at.keys()], old, states as PromptState[]);
  }

  /** The prompts `ids` (distinct) as stored, by their index in `ids` (undefined: none yet), read in batches. */
  private readStates(ids: readonly string[]): (PromptState | undefined)[] {
    const states = new Array<PromptState | undefined>(ids.length).fill(undefined);
    for (let k = 0; k < ids.length; k += READ_ROWS) {
      for (const row of this.read.all(JSON.stringify(ids.slice(k, k + READ_ROWS))) as KeyedRawRow[]) states[k + row[13]] = fromRawRow(row);
    }
    return states;
  }

  /**
   * Writes the prompts `ids` as `states` holds them (by index), in batches, and adds their
   * change from `old` to the pooled rows.
   */
  private writeStates(ids: readonly string[], old: readonly (PromptState | undefined)[], states: readonly PromptState[]): void {
    const deltas = new PooledDeltas();
    for (let k = 0; k < ids.length; k++) deltas.change(old[k], states[k]!);
    for (let k = 0; k < ids.length; k += WRITE_ROWS) {
      const count = Math.min(WRITE_ROWS, ids.length - k);
      const values: unknown[] = [];
      for (let i = k; i < k + count; i++) pushRow(values, states[i]!);
      this.write(count).run(values);
    }
    for (const [scope, delta] of deltas.entries()) if (delta.some((v) => v !== 0)) this.addPooled.run(scope, ...delta);
  }

  /**
   * Applies the source (inside a write transaction). `hopeful`: claim keys without asking
   * which were taken, and throw ClaimConflict, for the caller to roll back and apply again
   * without hope, as soon as a statement claims fewer keys than it was given (a key stored
   * before). A batch of new keys, the usual one, then costs no key returned (a third of
   * a claim's time); one with stored keys costs what it read before the first of them.
   */
  apply(source: ResultSource, decay: DecayOptions, hopeful = false): ObserveSummary {
    const before = this.lastStep();
    const acc = new EvidenceAccumulator(nextStep(before));
    const claims = new BatchClaims(source);
    for (const chunk of source.chunks(claims.taker(acc))) {
      const request = claims.request(chunk);
      const claimed = hopeful ? ALL_CLAIMED : new Set<string>();
      for (let k = 0; k < request.claim.length; k += CLAIM_ROWS) {
        const part = request.claim.slice(k, k + CLAIM_ROWS);
        if (claimed !== ALL_CLAIMED) for (const key of this.claim(part.length, true).all(part) as string[]) claimed.add(key);
        else if (this.claim(part.length, false).run(part).changes !== part.length) throw new ClaimConflict();
      }
      claims.settle(chunk, claimed, request.legacy !== undefined && this.seen.get(request.legacy) !== undefined, acc);
    }
    const { evidence, ids, at } = acc.touched();
    // Each touched prompt read once, its steps applied in order, written once.
    const old = this.readStates(ids);
    const states = old.slice();
    let last = before;
    let newest: number | null = null;
    for (let k = 0; k < evidence.length; k++) {
      const e = evidence[k]!;
      states[at[k]!] = applyEvidence(states[at[k]!], e, decay);
      if (last === null || e.step > last) last = e.step;
      if (newest === null || e.step > newest) newest = e.step;
    }
    this.writeStates(ids, old, states as PromptState[]);
    if (last !== null && last !== before) this.setStep.run(String(last));
    return summaryOf({ applied: acc.applied, duplicates: acc.duplicates, aborted: acc.aborted, prompts: ids.length, last_step: last }, newest, before, decay, claims.warnings());
  }
}

/** A hopeful apply met a key stored before: roll back and apply again (SqliteWriter.apply). */
export class ClaimConflict extends Error {
  constructor() {
    super('a rollout key was stored before');
  }
}

/** Pushes a prompt's values in COLUMNS order. */
function pushRow(values: unknown[], s: PromptState): void {
  values.push(
    s.id, s.group, s.successes, s.failures, s.lastStep, s.rollouts, s.rewardSum, s.correctCount, s.correctTokens, s.wrongCount, s.wrongTokens,
    s.priorPassRate ?? null, s.priorSamples ?? null,
  );
}
