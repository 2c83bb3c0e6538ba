import { StateIndex } from '../posterior/state-index.js';
import { addToGroupStats, emptyGroupStats, pooledSums, type GroupStats, type PromptState, type StateSnapshot } from '../posterior/state.js';

/**
 * The pooled figures of the learned prior and the length model (posterior/state.ts
 * GroupStats), kept in the state beside the prompts, so a plan of N candidates reads N
 * prompts and a few pooled rows instead of every prompt of the state.
 *
 * One row per scope: `all` (every prompt) and `group:<name>` (the prompts of a group). Each
 * observe adds, per scope, the difference between the new and the old contribution of every
 * prompt it changed (`PooledDeltas`), in the same transaction as the prompts, so the rows
 * always sum the state as it is. The sums are updated by differences, so they can differ from
 * a fresh sum over the prompts in the last bits (relative ~1e-15 a batch); a plan from them
 * (the service's) equals one from a full read (the CLI's) up to that rounding.
 */
export const ALL_SCOPE = 'all';

export const groupScope = (group: string) => `group:${group}`;

/** The pooled table's columns, in GroupStats order. */
export const POOLED_COLUMNS = ['count', 'sum_rate', 'sum_rate2', 'sum_noise', 'correct_count', 'correct_tokens', 'wrong_count', 'wrong_tokens'] as const;

/** The meta key marking that the pooled rows were built for the prompts already there. */
export const POOLED_META_KEY = 'pooled_version';

/** GroupStats as the pooled columns' values. */
export function pooledValues(g: GroupStats): number[] {
  return [g.count, g.sumRate, g.sumRate2, g.sumNoise, g.correctCount, g.correctTokens, g.wrongCount, g.wrongTokens];
}

/** GroupStats from the pooled columns' values. */
export function statsOfValues(v: readonly number[]): GroupStats {
  return {
    count: v[0]!, sumRate: v[1]!, sumRate2: v[2]!, sumNoise: v[3]!, correctCount: v[4]!, correctTokens: v[5]!, wrongCount: v[6]!, wrongTokens: v[7]!,
  };
}

/** Every scope's figures over `states`, summed in their order (posterior/state.ts pooledSums, as snapshotOf sums them). O(N). */
export function pooledOf(states: Iterable<PromptState>): Map<string, GroupStats> {
  const { all, groups } = pooledSums(states);
  return scopesOf(all, groups);
}

/** The pooled rows by scope of pooledSums's sums: `all`, then each group's. */
export function scopesOf(all: GroupStats, groups: ReadonlyMap<string, GroupStats>): Map<string, GroupStats> {
  const out = new Map<string, GroupStats>([[ALL_SCOPE, all]]);
  for (const [group, sum] of groups) out.set(groupScope(group), sum);
  return out;
}

/** Sums, per scope, the change of the pooled figures as prompts change. */
export class PooledDeltas {
  private readonly sums = new Map<string, Float64Array>();

  /** Prompt `before` (undefined: new) became `after`. O(1). */
  change(before: PromptState | undefined, after: PromptState): void {
    if (before !== undefined) this.add(before, -1);
    this.add(after, 1);
  }

  private add(s: PromptState, sign: 1 | -1): void {
    const v = pooledValues(addToGroupStats(emptyGroupStats, s));
    this.into(ALL_SCOPE, v, sign);
    if (s.group !== null) this.into(groupScope(s.group), v, sign);
  }

  private into(scope: string, v: readonly number[], sign: 1 | -1): void {
    let sum = this.sums.get(scope);
    if (sum === undefined) this.sums.set(scope, (sum = new Float64Array(POOLED_COLUMNS.length)));
    for (let k = 0; k < v.length; k++) sum[k]! += sign * v[k]!;
  }

  /** The scopes' changes, scopes sorted (writers lock pooled rows in one order). */
  entries(): [string, number[]][] {
    return [...this.sums.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)).map(([scope, sum]) => [scope, [...sum]]);
  }
}

/**
 * A snapshot of some prompts (those a plan's candidates name) with the pooled figures read
 * from the state: what the planner needs, without the other prompts. `hinted`, when read,
 * is every observed prompt with an offline hint (StateSnapshot.hinted: the hint calibration's
 * data); without it a hinted candidate gets the cautious default, so a store reads it
 * whenever a candidate or its state carries a hint.
 */
export function partialSnapshot(
  states: readonly PromptState[], pooled: ReadonlyMap<string, GroupStats>, lastStep: number | null, hinted?: readonly PromptState[],
): StateSnapshot {
  const byId = new StateIndex(states);
  const all = pooled.get(ALL_SCOPE) ?? emptyGroupStats;
  const snapshot: PartialSnapshot = {
    lastStep, get: (id, hash) => byId.get(id, hash), group: (g) => pooled.get(groupScope(g)), all,
    parts: { states, pooled, ...(hinted === undefined ? {} : { hinted }) },
  };
  return hinted === undefined ? snapshot : { ...snapshot, hinted: () => hinted };
}

/** A partial snapshot keeps what it was built from, so store/meta.ts can rebuild it after a metadata change. */
export interface PartialSnapshot extends StateSnapshot {
  readonly parts: { readonly states: readonly PromptState[]; readonly pooled: ReadonlyMap<string, GroupStats>; readonly hinted?: readonly PromptState[] };
}

/** The pooled figures `pooled` after adding the deltas' changes (scope by scope). */
export function withDeltas(pooled: ReadonlyMap<string, GroupStats>, deltas: PooledDeltas): Map<string, GroupStats> {
  const out = new Map(pooled);
  for (const [scope, d] of deltas.entries()) {
    const v = pooledValues(out.get(scope) ?? emptyGroupStats);
    out.set(scope, statsOfValues(v.map((x, k) => x + d[k]!)));
  }
  return out;
}

/**
 * Every scope's pooled figures summed by the database over `table` (SQLite and PostgreSQL
 * alike): one row a group (NULL: no group) with POOLED_COLUMNS, as posterior/state.ts addInto
 * sums them (rate = s / (s + f) where s + f > 0), in the database's order of addition. For
 * mendPooled's check, which reads the whole table without a row object a prompt (10⁶ rows as
 * objects took 5 s and 630 MB at a service's start). O(N) in the database.
 */
export function pooledSumsSql(table: string): string {
  const e = '(successes + failures)';
  const rate = `(1.0 * successes / ${e})`;
  const over = (x: string) => `CAST(coalesce(sum(CASE WHEN ${e} > 0 THEN ${x} ELSE 0 END), 0) AS DOUBLE PRECISION)`;
  const plain = (c: string) => `CAST(coalesce(sum(${c}), 0) AS DOUBLE PRECISION)`;
  return `SELECT grp, ${over('1')}, ${over(rate)}, ${over(`${rate} * ${rate}`)}, ${over(`${rate} * (1 - ${rate}) / ${e}`)}, ${plain('correct_count')}, ${plain('correct_tokens')}, ${plain('wrong_count')}, ${plain('wrong_tokens')} FROM ${table} GROUP BY grp`;
}

/** pooledSumsSql's rows ([grp, ...figures]) as pooled rows by scope: each group's, and `all` their sum. O(groups). */
export function scopesOfSums(rows: readonly (readonly unknown[])[]): Map<string, number[]> {
  const all = POOLED_COLUMNS.map(() => 0);
  const out = new Map<string, number[]>([[ALL_SCOPE, all]]);
  for (const [grp, ...v] of rows) {
    const values = v.map(Number);
    values.forEach((x, k) => (all[k]! += x));
    if (grp !== null) out.set(groupScope(String(grp)), values);
  }
  return out;
}

/** POOLED_COLUMNS that sum integers (prompts, correct and wrong rollouts): compared exactly. */
const COUNT_COLUMNS: ReadonlySet<number> = new Set([0, 4, 6]);

/**
 * Whether the stored pooled rows sum the prompts as `actual` does: the counts exactly (within
 * 0.5: one prompt more in 10⁶ was within a relative 1e-6), the other figures within a relative
 * 1e-6 (observes add differences, and a sum's order of addition moves its last bits: ~1e-15 a
 * batch), a scope missing on one side read as all zeros. Two equal values are the same, NaN
 * included (a NaN rebuilt at every start and inspect); a non-finite value against another value
 * is not (Infinity's tolerance took any stored value). O(scopes).
 */
export function samePooled(stored: ReadonlyMap<string, readonly number[]>, actual: ReadonlyMap<string, readonly number[]>): boolean {
  const zeros = POOLED_COLUMNS.map(() => 0);
  for (const scope of new Set([...stored.keys(), ...actual.keys()])) {
    const a = stored.get(scope) ?? zeros;
    const b = actual.get(scope) ?? zeros;
    for (let k = 0; k < POOLED_COLUMNS.length; k++) {
      const x = a[k]!;
      const y = b[k]!;
      if (Object.is(x, y) || x === y) continue;
      if (!Number.isFinite(x) || !Number.isFinite(y)) return false;
      const tolerance = COUNT_COLUMNS.has(k) ? 0.5 : 1e-6 * Math.max(1, Math.abs(x), Math.abs(y));
      if (!(Math.abs(x - y) <= tolerance)) return false;
    }
  }
  return true;
}

/** samePooled for one scope's figures (GroupStats): `inspect` checks the `all` row against its whole read. */
export function sameStats(stored: GroupStats, actual: GroupStats): boolean {
  return samePooled(new Map([[ALL_SCOPE, pooledValues(stored)]]), new Map([[ALL_SCOPE, pooledValues(actual)]]));
}

/** The note a store gives when it rebuilt pooled rows that no longer summed its prompts (mendPooled). */
export function pooledMendedNote(where: string): string {
  return `${where}: the pooled rows (the learned prior's and the length model's sums) did not sum the prompts, which another program or a rollout-budget older than them wrote: rebuilt from the prompts`;
}

/** The note for pooled rows that do not sum the prompts of a state this process may not write: left as they are. */
export function pooledStaleNote(where: string, why: string): string {
  return `${where}: the pooled rows (the learned prior's and the length model's sums) do not sum the prompts, and were not rebuilt: ${why}. A command that may write the state rebuilds them (serve at its start, inspect)`;
}
