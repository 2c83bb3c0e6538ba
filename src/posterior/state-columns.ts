import { addToGroupStats, emptyGroupStats, type GroupStats, type PromptState, type StateSnapshot } from './state.js';
import { IdIndex } from './state-index.js';

/** Integers that an Int32Array keeps as they are (not −0). */
const isInt32 = (v: unknown): v is number => typeof v === 'number' && (v | 0) === v && !(v === 0 && 1 / v < 0);

/** A number, or null (kept as NaN, which no state holds: SQLite stores NaN as NULL). */
const isNumberOrNull = (v: unknown): v is number | null => v === null || (typeof v === 'number' && v === v);

/**
 * Prompt states held as columns, a row per distinct id in the order added: typed arrays, the
 * ids in an IdIndex, no object per prompt. A state object is made when asked for (`state(k)`),
 * the same fields in the same order as a row read into a PromptState (store/sqlite-rows.ts),
 * so a plan that looks up each candidate once makes short-lived objects only. Memory: about
 * 76 bytes a row besides the id.
 */
export class StateColumns {
  readonly index: IdIndex;
  /** Group of each row: a position in `groupNames`, or −1 for none. */
  private readonly group: Int32Array;
  private readonly groupNames: string[] = [];
  private readonly groupAt = new Map<string, number>();
  private readonly successes: Float64Array;
  private readonly failures: Float64Array;
  private readonly rewardSum: Float64Array;
  private readonly correctTokens: Float64Array;
  private readonly wrongTokens: Float64Array;
  /** NaN: null. */
  private readonly priorPassRate: Float64Array;
  private readonly priorSamples: Float64Array;
  private readonly lastStep: Int32Array;
  private readonly rollouts: Int32Array;
  private readonly correctCount: Int32Array;
  private readonly wrongCount: Int32Array;

  /** Columns for up to `capacity` rows. */
  constructor(readonly capacity: number) {
    this.index = new IdIndex(capacity);
    this.group = new Int32Array(capacity);
    this.successes = new Float64Array(capacity);
    this.failures = new Float64Array(capacity);
    this.rewardSum = new Float64Array(capacity);
    this.correctTokens = new Float64Array(capacity);
    this.wrongTokens = new Float64Array(capacity);
    this.priorPassRate = new Float64Array(capacity);
    this.priorSamples = new Float64Array(capacity);
    this.lastStep = new Int32Array(capacity);
    this.rollouts = new Int32Array(capacity);
    this.correctCount = new Int32Array(capacity);
    this.wrongCount = new Int32Array(capacity);
  }

  get size(): number {
    return this.index.size;
  }

  /**
   * Adds a row (the prompts table's columns, store/sqlite-rows.ts ROW_COLUMNS) and returns true;
   * returns false, adding nothing, for a row the columns cannot keep exactly: a repeated id, a
   * value of another type than the table's, an integer column beyond 32 bits, or more rows
   * than `capacity`. The caller then reads the state the careful way.
   */
  add(
    id: unknown, group: unknown, successes: unknown, failures: unknown, lastStep: unknown, rollouts: unknown, rewardSum: unknown,
    correctCount: unknown, correctTokens: unknown, wrongCount: unknown, wrongTokens: unknown, priorPassRate: unknown, priorSamples: unknown,
  ): boolean {
    const k = this.index.size;
    if (k === this.capacity || typeof id !== 'string' || (group !== null && typeof group !== 'string')) return false;
    if (typeof successes !== 'number' || typeof failures !== 'number' || typeof rewardSum !== 'number' || typeof correctTokens !== 'number' || typeof wrongTokens !== 'number') return false;
    if (!isInt32(lastStep) || !isInt32(rollouts) || !isInt32(correctCount) || !isInt32(wrongCount) || !isNumberOrNull(priorPassRate) || !isNumberOrNull(priorSamples)) return false;
    if (this.index.add(id) !== k) return false;
    this.successes[k] = successes;
    this.failures[k] = failures;
    this.rewardSum[k] = rewardSum;
    this.correctTokens[k] = correctTokens;
    this.wrongTokens[k] = wrongTokens;
    this.priorPassRate[k] = priorPassRate ?? NaN;
    this.priorSamples[k] = priorSamples ?? NaN;
    this.lastStep[k] = lastStep;
    this.rollouts[k] = rollouts;
    this.correctCount[k] = correctCount;
    this.wrongCount[k] = wrongCount;
    let g = -1;
    if (group !== null) {
      g = this.groupAt.get(group) ?? -1;
      if (g < 0) this.groupAt.set(group, (g = this.groupNames.push(group) - 1));
    }
    this.group[k] = g;
    return true;
  }

  /** Row k's group, or null. */
  groupOf(k: number): string | null {
    const g = this.group[k]!;
    return g < 0 ? null : this.groupNames[g]!;
  }

  /** Row k as a PromptState (a new object each call). */
  state(k: number): PromptState {
    const rate = this.priorPassRate[k]!;
    const samples = this.priorSamples[k]!;
    return {
      id: this.index.idAt(k),
      group: this.groupOf(k),
      successes: this.successes[k]!,
      failures: this.failures[k]!,
      lastStep: this.lastStep[k]!,
      rollouts: this.rollouts[k]!,
      rewardSum: this.rewardSum[k]!,
      correctCount: this.correctCount[k]!,
      correctTokens: this.correctTokens[k]!,
      wrongCount: this.wrongCount[k]!,
      wrongTokens: this.wrongTokens[k]!,
      ...(rate !== rate ? {} : { priorPassRate: rate }),
      ...(samples !== samples ? {} : { priorSamples: samples }),
    };
  }

  /**
   * The snapshot snapshotOf (posterior/state.ts) gives for `[state(0), state(1), …]`: the same
   * pooled figures, summed in row order, and states made on lookup. O(rows) to build.
   */
  snapshot(lastStep?: number | null): StateSnapshot {
    const n = this.size;
    const { successes, failures, correctCount, correctTokens, wrongCount, wrongTokens, lastStep: steps, rollouts, priorPassRate } = this;
    // The fields addToGroupStats reads, one object reused over the rows.
    const row = { successes: 0, failures: 0, correctCount: 0, correctTokens: 0, wrongCount: 0, wrongTokens: 0 };
    const groups: GroupStats[] = this.groupNames.map(() => emptyGroupStats);
    let all = emptyGroupStats;
    let latest: number | null = null;
    for (let k = 0; k < n; k++) {
      row.successes = successes[k]!;
      row.failures = failures[k]!;
      row.correctCount = correctCount[k]!;
      row.correctTokens = correctTokens[k]!;
      row.wrongCount = wrongCount[k]!;
      row.wrongTokens = wrongTokens[k]!;
      all = addToGroupStats(all, row);
      const g = this.group[k]!;
      if (g >= 0) groups[g] = addToGroupStats(groups[g]!, row);
      if (rollouts[k]! > 0 && (latest === null || steps[k]! > latest)) latest = steps[k]!;
    }
    let hinted: PromptState[] | undefined;
    let states: PromptState[] | undefined;
    return {
      lastStep: lastStep ?? latest,
      get: (id, hash) => {
        const k = this.index.find(id, hash);
        return k < 0 ? undefined : this.state(k);
      },
      group: (name) => {
        const g = this.groupAt.get(name);
        return g === undefined ? undefined : groups[g];
      },
      all,
      hinted: () => {
        if (hinted === undefined) {
          hinted = [];
          for (let k = 0; k < n; k++) if (priorPassRate[k] === priorPassRate[k] && successes[k]! + failures[k]! > 0) hinted.push(this.state(k));
        }
        return hinted;
      },
      states: () => (states ??= Array.from({ length: n }, (_, k) => this.state(k))),
    };
  }
}
