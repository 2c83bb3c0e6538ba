import { StateIndex } from './state-index.js';

/**
 * What the state keeps per prompt. Evidence is discounted (see decay.ts); the raw totals and
 * length sums are not.
 */
export interface PromptState {
  readonly id: string;
  readonly group: string | null;
  /** Discounted success evidence Σ r as of lastStep. */
  readonly successes: number;
  /** Discounted failure evidence Σ (1 − r) as of lastStep. */
  readonly failures: number;
  /** The latest step any evidence came from. */
  readonly lastStep: number;
  /** Raw count of rollouts observed (aborted ones excluded). */
  readonly rollouts: number;
  /** Raw Σ reward. */
  readonly rewardSum: number;
  /** Rollouts with reward ≥ 0.5 that reported tokens, and their summed tokens. */
  readonly correctCount: number;
  readonly correctTokens: number;
  /** Rollouts with reward < 0.5 that reported tokens, and their summed tokens. */
  readonly wrongCount: number;
  readonly wrongTokens: number;
  /**
   * The prompt's offline hint, as its candidates or results last gave it (store/meta.ts):
   * a reference pass rate in [0, 1] and how many rollouts it came from. Absent: none known.
   */
  readonly priorPassRate?: number;
  readonly priorSamples?: number;
}

/**
 * Pooled figures of one group of prompts (or all of them) for the learned prior and the
 * length model. rate_i = successes_i / (successes_i + failures_i) over prompts with evidence.
 */
export interface GroupStats {
  /** Prompts with evidence. */
  readonly count: number;
  readonly sumRate: number;
  readonly sumRate2: number;
  /** Σ rate_i (1 − rate_i) / evidence_i: the binomial part of the spread of rates. */
  readonly sumNoise: number;
  readonly correctCount: number;
  readonly correctTokens: number;
  readonly wrongCount: number;
  readonly wrongTokens: number;
}

export const emptyGroupStats: GroupStats = {
  count: 0, sumRate: 0, sumRate2: 0, sumNoise: 0, correctCount: 0, correctTokens: 0, wrongCount: 0, wrongTokens: 0,
};

/** The fields of a prompt state that its group's pooled figures sum. */
export type PooledFields = Pick<PromptState, 'successes' | 'failures' | 'correctCount' | 'correctTokens' | 'wrongCount' | 'wrongTokens'>;

/** Adds one prompt to a group's pooled figures. */
export function addToGroupStats(stats: GroupStats, s: PooledFields): GroupStats {
  const sum = { ...stats };
  addInto(sum, s);
  return sum;
}

/** GroupStats being summed (addInto). */
export type Sums = { -readonly [K in keyof GroupStats]: number };

/**
 * addToGroupStats in place, on a sum of one's own: the same additions in the same order (so
 * the same bits), without an object a prompt (a state's 10⁶ rows: 147 MB of short-lived
 * objects in a plan).
 */
export function addInto(sum: Sums, s: PooledFields): void {
  const evidence = s.successes + s.failures;
  const rate = evidence > 0 ? s.successes / evidence : 0;
  const has = evidence > 0 ? 1 : 0;
  sum.count = sum.count + has;
  sum.sumRate = sum.sumRate + has * rate;
  sum.sumRate2 = sum.sumRate2 + has * rate * rate;
  sum.sumNoise = sum.sumNoise + (has ? (rate * (1 - rate)) / evidence : 0);
  sum.correctCount = sum.correctCount + s.correctCount;
  sum.correctTokens = sum.correctTokens + s.correctTokens;
  sum.wrongCount = sum.wrongCount + s.wrongCount;
  sum.wrongTokens = sum.wrongTokens + s.wrongTokens;
}

/**
 * A read-only view of the state that a plan is computed from. Plans are a pure function of
 * (snapshot, candidates, options, seed).
 */
export interface StateSnapshot {
  /** Latest step with evidence, or null for an empty state. */
  readonly lastStep: number | null;
  /**
   * The state of `id`, if any. `hash`, when a caller passes it, is fnv1a(id) (the planner
   * has every candidate's for its tie-break); an implementation may ignore it.
   */
  get(id: string, hash?: number): PromptState | undefined;
  /**
   * `each(i, get(items[i].id, hashes[i]))` for every i in order, where `hashes[i]` is
   * fnv1a(items[i].id): the planner's lookup of all its candidates. Optional: a snapshot that
   * looks many ids up faster at once than one by one (StateColumns: in blocks) gives it. The
   * state handed to `each` is good during that call only: an implementation may hand every
   * call one object with its fields set anew (StateColumns does, its hint fields undefined
   * where `get`'s state has none), so a caller that keeps a state copies it.
   */
  eachOf?(items: readonly { readonly id: string }[], hashes: Uint32Array, each: (i: number, state: PromptState | undefined) => void): void;
  /** Pooled figures of a group (null: prompts without a group are pooled only in `all`). */
  group(name: string): GroupStats | undefined;
  readonly all: GroupStats;
  /**
   * Every observed prompt (with evidence) that carries an offline hint (`priorPassRate`): what
   * the hint calibration is fitted on (posterior/hints.ts). Optional: a snapshot without it
   * has no calibration data, and hinted candidates get the cautious default.
   */
  hinted?(): readonly PromptState[];
  /** Every prompt state, when the snapshot holds them in memory (store/meta.ts rebuilds from it). */
  states?(): readonly PromptState[];
}

/**
 * A prompt's state from its row's values, in the prompts table's column order (id, grp,
 * successes, failures, last_step, rollouts, reward_sum, correct_count, correct_tokens,
 * wrong_count, wrong_tokens, prior_pass_rate, prior_samples): the one place every store's
 * reader makes a state, whether its rows come as objects, as arrays or as a SQL function's
 * arguments. The hint's fields are present only when not null, after the others. O(1).
 */
export function stateOfValues(
  id: unknown, grp: unknown, successes: unknown, failures: unknown, lastStep: unknown, rollouts: unknown, rewardSum: unknown,
  correctCount: unknown, correctTokens: unknown, wrongCount: unknown, wrongTokens: unknown, priorPassRate: unknown, priorSamples: unknown,
): PromptState {
  const s = { id, group: grp, successes, failures, lastStep, rollouts, rewardSum, correctCount, correctTokens, wrongCount, wrongTokens } as {
    -readonly [K in keyof PromptState]: PromptState[K];
  };
  if (priorPassRate !== null) s.priorPassRate = priorPassRate as number;
  if (priorSamples !== null) s.priorSamples = priorSamples as number;
  return s;
}

/**
 * The pooled figures of `states`, summed in their order: over all of them and by group (in the
 * order groups first appear), with the latest step that has evidence (null: none). The one sum
 * of in-memory states (snapshotOf, store/pooled.ts pooledOf). O(N).
 */
export function pooledSums(states: Iterable<PromptState>): { all: Sums; groups: Map<string, Sums>; latest: number | null } {
  const groups = new Map<string, Sums>();
  const sums: RunningSums = { all: { ...emptyGroupStats }, latest: null };
  for (const s of states) addToSums(sums, groups, s);
  return { all: sums.all, groups, latest: sums.latest };
}

/** pooledSums's step: one state added to `sums` and to its group's in `groups` (made at its group's first state). O(1). */
export function addToSums(sums: RunningSums, groups: Map<string, Sums>, s: PromptState): void {
  let group: Sums | undefined;
  if (s.group !== null) {
    group = groups.get(s.group);
    if (group === undefined) groups.set(s.group, (group = { ...emptyGroupStats }));
  }
  addState(sums, s, group);
}

/** Pooled figures summed a state at a time (addState): over all states, and the latest step with evidence. Plain data (it crosses threads). */
export interface RunningSums {
  readonly all: Sums;
  latest: number | null;
}

/**
 * Adds one state to `sums`, and to `group` (its group's sums; undefined for none): the one rule
 * of pooledSums and of StateColumns, which sums its rows as they are added. O(1).
 */
export function addState(sums: RunningSums, s: PooledFields & Pick<PromptState, 'rollouts' | 'lastStep'>, group: Sums | undefined): void {
  addInto(sums.all, s);
  if (group !== undefined) addInto(group, s);
  if (s.rollouts > 0 && (sums.latest === null || s.lastStep > sums.latest)) sums.latest = s.lastStep;
}

/** A snapshot over prompt states held in memory, indexed by id (StateIndex). O(N) to build. */
export function snapshotOf(states: Iterable<PromptState>, lastStep?: number | null): StateSnapshot {
  const list = Array.isArray(states) ? (states as readonly PromptState[]) : [...states];
  const byId = new StateIndex(list);
  const { all, groups, latest } = pooledSums(list);
  let hinted: PromptState[] | undefined;
  return {
    lastStep: lastStep ?? latest,
    get: (id, hash) => byId.get(id, hash),
    group: (g) => groups.get(g),
    all,
    // Built on first use: plans without hinted candidates never pay for it.
    hinted: () => (hinted ??= list.filter((s) => s.priorPassRate !== undefined && s.successes + s.failures > 0)),
    states: () => list,
  };
}
